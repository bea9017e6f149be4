// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package criproxy proves the node service's CRI proxy mode on the rig: the
// CRI validation suite (critest) passes the same tests through the proxy as
// against containerd directly; the rig's kubelet runs through the proxy of
// the packaged service under a real systemd with socket activation (pods,
// exec, logs, port-forward, probe start latency, a restart during pod churn);
// and benchmarks put the proxy's latency beside containerd's.
package criproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/e2e/rig/image"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme), framework.WithImages(images()...))
}

// WebImage stands in for the nginx and httpd images of critest's network,
// streaming and namespace tests (no registry here): busybox httpd on port 80
// that, like nginx, leaves its PID in /var/run/nginx.pid. It is imported under
// critest's own names too, since those tests look images up by the fixed name
// before they would pull.
const WebImage = "probeshim.local/critest-web:e2e"

var webImageAliases = []string{
	"registry.k8s.io/e2e-test-images/nginx:1.14-2",
	"registry.k8s.io/e2e-test-images/httpd:2.4.39-4",
}

// StampImage has busybox and /bin/stamp (e2e/testimages/stamp), which an
// exec probe runs to record, to the nanosecond, when it first ran.
const StampImage = "probeshim.local/criproxy-stamp:e2e"

func images() []rig.Image {
	out := []rig.Image{{
		Ref:        StampImage,
		Busybox:    true,
		GoPrograms: map[string]string{"/bin/stamp": "github.com/probeshim/probeshim/e2e/testimages/stamp"},
		Cmd:        []string{"sh"},
	}}
	out = append(out, critestImages()...)
	for _, ref := range append([]string{WebImage}, webImageAliases...) {
		out = append(out, rig.Image{
			Ref:     ref,
			Busybox: true,
			Entries: []image.Entry{
				{Path: "/www/index.html", Mode: 0o644, Data: []byte("<h1>probeshim critest web</h1>\n")},
				{Path: "/var/run", Dir: true},
			},
			Entrypoint: []string{"sh", "-c", "echo $$ > /var/run/nginx.pid; exec httpd -f -p 80 -h /www"},
		})
	}
	return out
}

// startProxy runs the node service with the CRI proxy on a socket of the
// test's own and returns the socket once it answers CRI calls; the service
// stops when the test ends.
func startProxy(tb testing.TB, c *framework.Cluster) (*framework.NodeService, string) {
	tb.Helper()
	sock := filepath.Join(tb.TempDir(), "cri.sock")
	svc := c.StartNodeService(tb, "--cri-proxy", "--cri-proxy-socket", sock)
	if err := waitCRI(framework.Context(tb, time.Minute), sock, 30*time.Second); err != nil {
		tb.Fatalf("%v\nnode service log:\n%s", err, logtail.Last(svc.Logs(), 30))
	}
	return svc, sock
}

// waitCRI polls the CRI socket until Version answers.
func waitCRI(ctx context.Context, sock string, timeout time.Duration) error {
	return framework.WaitFor(ctx, timeout, "CRI Version on "+sock, func(ctx context.Context) (bool, string, error) {
		rs, conn, err := dialCRI(sock)
		if err != nil {
			return false, err.Error(), nil
		}
		defer conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		v, err := rs.Version(cctx, &runtimeapi.VersionRequest{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, v.RuntimeName + " " + v.RuntimeVersion, nil
	})
}

func dialCRI(sock string) (runtimeapi.RuntimeServiceClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return runtimeapi.NewRuntimeServiceClient(conn), conn, nil
}

// critestDir builds critest (cached by version under $PROBESHIM_CACHE, see
// e2e/critest/build.sh) unless PROBESHIM_CRITEST_BIN names its folder.
func critestDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("PROBESHIM_CRITEST_BIN"); d != "" {
		return d
	}
	root, err := framework.ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "e2e", "critest", "build.sh")).Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		tb.Fatalf("e2e/critest/build.sh: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// metric sums the samples of a counter or gauge family in a /metrics text.
func metric(body, name string) (float64, bool) {
	var sum float64
	found := false
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		f := strings.Fields(l)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// restartKubelet starts the kubelet stopped by a test again and waits until
// the node is Ready and carries none of the taints a stopped kubelet earns
// (not-ready, unreachable), so that the next test can schedule pods.
func restartKubelet(tb testing.TB, c *framework.Cluster) {
	tb.Helper()
	ctx := framework.Context(tb, 3*time.Minute)
	started := time.Now()
	if err := c.Rig.StartComponent(ctx, "kubelet"); err != nil {
		tb.Fatal(err)
	}
	err := framework.WaitFor(ctx, 2*time.Minute, "node Ready (a heartbeat of the new kubelet) and untainted", func(ctx context.Context) (bool, string, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, c.Rig.NodeName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				// Heartbeats have a resolution of a second.
				ready = cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.After(started.Truncate(time.Second))
			}
		}
		var taints []string
		for _, tn := range n.Spec.Taints {
			if strings.HasPrefix(tn.Key, "node.kubernetes.io/") {
				taints = append(taints, tn.Key)
			}
		}
		return ready && len(taints) == 0, fmt.Sprintf("ready=%t taints=%v", ready, taints), nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}
