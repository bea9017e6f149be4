package crr

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// The cluster deployment as deployed (cluster/deploy: namespace, RBAC, admission policies,
// webhooks), its command running inside the rig's netns as its service account; the webhooks
// call it on loopback there instead of through the Service.
const (
	systemNamespace = "probeshim-system"
	clusterUser     = "system:serviceaccount:" + systemNamespace + ":probeshim-cluster"
	webhookAddr     = "127.0.0.1:19443"
	clusterHealth   = "127.0.0.1:19081"
)

func deployDir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "cluster", "deploy")
}

// manifests decodes files of cluster/deploy, with every webhook pointed at webhookAddr.
func manifests(t *testing.T, c *framework.Cluster, files ...string) []client.Object {
	t.Helper()
	dec := serializer.NewCodecFactory(c.Scheme).UniversalDeserializer()
	redirect := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u := "https://" + webhookAddr + *cc.Service.Path
		cc.URL, cc.Service = &u, nil
	}
	var out []client.Object
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(deployDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch o := obj.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				for i := range o.Webhooks {
					redirect(&o.Webhooks[i].ClientConfig)
				}
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				for i := range o.Webhooks {
					redirect(&o.Webhooks[i].ClientConfig)
				}
			}
			out = append(out, obj.(client.Object))
		}
	}
	return out
}

// startClusterDeployment installs the cluster deployment's objects and runs its command until
// the test ends.
func startClusterDeployment(t *testing.T, c *framework.Cluster) {
	t.Helper()
	ctx := framework.Context(t, 3*time.Minute)
	bin, err := framework.BuildBinary("./cluster/cmd/probeshim-cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range manifests(t, c, "namespace.yaml", "rbac.yaml", "admission-policies.yaml", "webhooks.yaml") {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	kubeconfig, err := c.Rig.Kubeconfig(clusterUser, "system:serviceaccounts", "system:serviceaccounts:"+systemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "probeshim-cluster.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(webhookAddr)
	cmd := c.Rig.Command(context.Background(), bin,
		"--namespace="+systemNamespace,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+clusterHealth,
		"--webhook-host="+host, "--webhook-port="+port,
		"--webhook-cert-dir="+filepath.Join(dir, "certs"),
		"--webhook-cert-extra-names="+host,
		"--cert-mode=self",
		"--kubeconfig="+kubeconfig,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	logs := func() string {
		b, _ := os.ReadFile(logPath)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		return strings.Join(lines, "\n")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("probeshim-cluster log (last lines):\n%s", logs())
		}
	})

	httpc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return rig.DialNetNS(ctx, c.NetNSPath(), network, addr)
		}}}
	err = framework.WaitFor(ctx, 2*time.Minute, "probeshim-cluster ready", func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			return false, "", fmt.Errorf("probeshim-cluster exited:\n%s", logs())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+clusterHealth+"/readyz", nil)
		resp, err := httpc.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK, string(body), nil
	})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logs())
	}
	// The API server calls the webhooks once it has the CA bundle the command patched in.
	err = framework.WaitFor(ctx, time.Minute, "the CRR webhooks answering", func(ctx context.Context) (bool, string, error) {
		crr := &v1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-ready"},
			Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "no-such-pod",
				Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
		}
		err := c.Client.Create(ctx, crr, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "pod no-such-pod does not exist") {
			return true, "", nil
		}
		return false, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logs())
	}
}
