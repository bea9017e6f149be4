// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package packaged is the packaged node service on the rig: the .deb installed in a Debian system
// booted with a real systemd (systemd-nspawn) inside the rig's network namespace, with the rig's
// containerd socket, the pods' network namespaces and a node kubeconfig bound in. The service runs
// under systemd as a node operator would run it and must probe a real pod on the rig; the framework
// starts no node service of its own here.
package packaged

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/packaging/nspawn"
	"github.com/probeshim/probeshim/packaging/rigtest"
)

func TestMain(m *testing.M) { framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme)) }

const (
	execProbe = "exec-file"
	httpProbe = "http-local"
)

func TestPackagedServiceOnRig(t *testing.T) {
	c := framework.Get(t) // skips without root or the Kubernetes binaries
	ctx := framework.Context(t, 15*time.Minute)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	root, build := filepath.Join(work, "rootfs"), filepath.Join(work, "build")

	var pkgs rigtest.Packages
	step(t, "base system (cached rootfs tarball, extracted) and the .deb", func() {
		if err := rigtest.Base(ctx, t.Logf, rigtest.CacheDir(), root); err != nil {
			t.Fatal(err)
		}
		pkgs, err = rigtest.Build(ctx, repo, "PROBESHIM_VERSION=1.0.0~e2e.1", "PROBESHIM_FORMATS=deb", "PROBESHIM_DIST="+build)
		if err != nil {
			t.Fatal(err)
		}
		if pkgs.Deb == "" {
			t.Fatalf("no .deb built: %+v", pkgs)
		}
	})

	c.InstallCRDs(t)
	ns := c.Namespace(t)
	var pod *corev1.Pod
	step(t, "pod with a file for an exec probe and an HTTP server on its loopback", func() {
		pod = c.CreatePod(t, framework.NewPod(ns, "probed",
			framework.Command("box", "sh", "-c", "touch /tmp/healthy; exec sleep 100000"),
			framework.Command("web", "localhttp-server", "-listen", "127.0.0.1:8080"),
		))
		pod = c.WaitForPodReady(t, pod, 2*time.Minute)
	})
	s := &suite{c: c, pod: pod}
	s.writeSpec(t)

	node := c.Rig.NodeName()
	kubeconfig, err := c.Rig.Kubeconfig("system:node:"+node, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	r := rigtest.Rig{Dir: c.Rig.Dir(), NetNS: c.NetNSPath(), Containerd: c.ContainerdSocket(), Kubeconfig: kubeconfig, Node: node}
	if rel, err := filepath.Rel(r.Dir, c.PodNetNSDir()); err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("the pods' netns folder %s is outside the rig's folder %s: it would not be bound in", c.PodNetNSDir(), r.Dir)
	}

	// Nobody probes before the packaged service runs: whatever status appears is its work.
	if st, err := s.readStates(ctx); err != nil || len(st) != 0 {
		t.Fatalf("NodePodProbe status before the packaged service started: %v %v", st, err)
	}

	var ctr *nspawn.Container
	var installed time.Time
	step(t, "boot the container in the rig's netns and install the package", func() {
		ctr = boot(t, r, root, build, work)
		s.ctr = ctr
		start := time.Now()
		if err := rigtest.Install(ctx, ctr, "/pkgs/"+filepath.Base(pkgs.Deb), r); err != nil {
			t.Fatal(err)
		}
		installed = time.Now()
		t.Logf("timing: dpkg -i, config and systemctl restart (blocks until READY=1): %s", installed.Sub(start).Round(time.Millisecond))
	})

	t.Run("both probes succeed", func(t *testing.T) {
		s.waitState(t, execProbe, v1alpha1.ProbeSucceeded, 2*time.Minute)
		s.waitState(t, httpProbe, v1alpha1.ProbeSucceeded, 30*time.Second)
		t.Logf("timing: both results in the NodePodProbe status %s after systemctl restart returned", time.Since(installed).Round(time.Millisecond))
	})

	// The container has a PID namespace of its own, containerd is the host's: the service tells so
	// at start and its execs never hand the shim a /proc path it cannot open.
	t.Run("exec output through FIFOs from the start", func(t *testing.T) {
		entries, err := journal(ctx, ctr)
		if err != nil {
			t.Fatal(err)
		}
		var told bool
		for _, e := range entries {
			msg := fmt.Sprint(e["MESSAGE"])
			told = told || strings.Contains(msg, "containerd runs in another PID namespace")
			if strings.Contains(msg, "cannot open exec output pipes") {
				t.Errorf("an exec fell back to FIFOs after its start failed: %s", msg)
			}
		}
		if !told {
			t.Error(`no "containerd runs in another PID namespace" in the service's journal`)
		}
	})

	t.Run("flipping the file flips the exec probe", func(t *testing.T) {
		s.boxExec(t, "rm", "-f", "/tmp/healthy")
		s.waitState(t, execProbe, v1alpha1.ProbeFailed, 30*time.Second)
		s.boxExec(t, "touch", "/tmp/healthy")
		s.waitState(t, execProbe, v1alpha1.ProbeSucceeded, 30*time.Second)
	})

	t.Run("journal carries the pod's entries", func(t *testing.T) {
		var entries []map[string]any
		err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "journal entries with POD_NAME="+pod.Name,
			func(ctx context.Context) (bool, string, error) {
				var err error
				entries, err = journal(ctx, ctr, "POD_NAME="+pod.Name)
				return err == nil && len(entries) > 0, fmt.Sprintf("%d entries %v", len(entries), err), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, e := range entries {
			if e["POD_NAME"] != pod.Name || e["NAMESPACE"] != ns {
				t.Errorf("journalctl POD_NAME=%s returned an entry of %v/%v: %v", pod.Name, e["NAMESPACE"], e["POD_NAME"], e["MESSAGE"])
			}
			msgs = append(msgs, fmt.Sprint(e["MESSAGE"]))
		}
		t.Logf("journalctl -u probeshim POD_NAME=%s: %d entries:\n%s", pod.Name, len(entries), logtail.Last(strings.Join(msgs, "\n"), 10))
		// The filter really filters: nothing for a pod nobody logged.
		if none, err := journal(ctx, ctr, "POD_NAME=no-such-pod"); err != nil || len(none) != 0 {
			t.Fatalf("journalctl POD_NAME=no-such-pod: %d entries, %v", len(none), err)
		}
	})

	t.Run("systemctl is-active", func(t *testing.T) {
		out, err := ctr.Run(ctx, "systemctl", "is-active", rigtest.Unit)
		if got := strings.TrimSpace(out); err != nil || got != "active" {
			t.Fatalf("systemctl is-active %s = %q (%v)", rigtest.Unit, got, err)
		}
		if n, _ := ctr.Run(ctx, "systemctl", "show", "-p", "NRestarts", "--value", rigtest.Unit); strings.TrimSpace(n) != "0" {
			t.Errorf("the service restarted %s times while probing", strings.TrimSpace(n))
		}
	})
}

// boot boots the container on the rig's node with the build folder at /pkgs; it is powered off and
// its cgroups removed when the test ends, after logging the service's status and journal on failure.
func boot(t *testing.T, r rigtest.Rig, root, build, work string) *nspawn.Container {
	t.Helper()
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	console, err := os.Create(filepath.Join(work, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	o.Root, o.Name, o.Console = root, "e2e-packaged", console
	o.BindRO = append(o.BindRO, build+":/pkgs")
	start := time.Now()
	ctr, err := nspawn.Boot(context.Background(), o)
	if err != nil {
		console.Close()
		b, _ := os.ReadFile(console.Name())
		t.Fatalf("boot: %v\nconsole:\n%s", err, logtail.Last(string(b), 30))
	}
	t.Logf("timing: container booted in the rig's netns in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := ctr.Sh(context.Background(), "systemctl status --no-pager -l probeshim; journalctl --no-pager -n 80 -u probeshim")
			t.Logf("status and journal of probeshim in the container:\n%s", out)
		}
		start := time.Now()
		if err := ctr.Close(); err != nil {
			t.Errorf("teardown of the container: %v", err)
		}
		console.Close()
		t.Logf("timing: container torn down in %s", time.Since(start).Round(time.Millisecond))
	})
	return ctr
}

// suite is the probed pod and the container whose service probes it.
type suite struct {
	c   *framework.Cluster
	pod *corev1.Pod
	ctr *nspawn.Container
}

func (s *suite) npp() *v1alpha1.NodePodProbe {
	return &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: s.c.Rig.NodeName()}}
}

// writeSpec creates the node's NodePodProbe with an exec and an HTTP probe of the pod; it is
// deleted when the test ends.
func (s *suite) writeSpec(t *testing.T) {
	t.Helper()
	probe := func(name, container string, h corev1.ProbeHandler) v1alpha1.ContainerProbe {
		return v1alpha1.ContainerProbe{Name: name, ContainerName: container, Probe: v1alpha1.ContainerProbeSpec{
			Probe: corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}}}
	}
	npp := s.npp()
	npp.Spec.PodProbes = []v1alpha1.PodProbe{{Name: s.pod.Name, Namespace: s.pod.Namespace, UID: string(s.pod.UID),
		IP: s.pod.Status.PodIP, Probes: []v1alpha1.ContainerProbe{
			probe(execProbe, "box", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/healthy"}}}),
			probe(httpProbe, "web", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(8080), Path: "/"}}),
		}}}
	if err := s.c.Client.Create(framework.Context(t, time.Minute), npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.c.Client.Delete(ctx, s.npp())
	})
}

func (s *suite) readStates(ctx context.Context) (map[string]v1alpha1.ContainerProbeState, error) {
	return s.c.ProbeStates(ctx, s.c.Rig.NodeName(), s.pod.UID)
}

func (s *suite) waitState(t *testing.T, probe string, want v1alpha1.ProbeState, timeout time.Duration) {
	t.Helper()
	err := s.c.WaitForProbeState(framework.Context(t, timeout+time.Minute), s.c.Rig.NodeName(), s.pod.UID, probe, want, timeout)
	if err != nil {
		out, _ := s.ctr.Run(context.Background(), "journalctl", "--no-pager", "-n", "30", "-u", rigtest.Unit)
		t.Fatalf("%v\njournal of the packaged service:\n%s", err, out)
	}
}

// journal returns the service's journal entries (journalctl -o json) matching the field filters.
func journal(ctx context.Context, ctr *nspawn.Container, filters ...string) ([]map[string]any, error) {
	out, err := ctr.Run(ctx, append([]string{"journalctl", "--no-pager", "-o", "json", "-u", rigtest.Unit}, filters...)...)
	if err != nil {
		return nil, err
	}
	var entries []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// boxExec runs a command in the pod's box container.
func (s *suite) boxExec(t *testing.T, cmd ...string) {
	t.Helper()
	if _, stderr, err := s.c.Exec(framework.Context(t, time.Minute), s.pod.Namespace, s.pod.Name, "box", cmd...); err != nil {
		t.Fatalf("%v in box: %v %s", cmd, err, stderr)
	}
}

func step(t *testing.T, name string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	t.Logf("timing: %s: %s", name, time.Since(start).Round(time.Millisecond))
}
