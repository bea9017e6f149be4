// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package node is the node service's end-to-end suite: the real probeshim
// binary on the rig's node, probing real pods through the rig's containerd and
// inside the pods' network namespaces, with a NodePodProbe written by the test
// (no cluster deployment involved).
package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

func TestMain(m *testing.M) { framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme)) }

// suite is one pod with servers bound only to its loopback, probed by one
// node service, shared by the tests below.
type suite struct {
	c   *framework.Cluster
	svc *framework.NodeService
	pod *corev1.Pod
}

func exec(cmd ...string) corev1.ProbeHandler {
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

func httpGet(port int32, path string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(port), Path: path}}
}

func tcp(port int32) corev1.ProbeHandler {
	return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}
}

// loopback makes an httpGet or tcpSocket probe name the pod's own loopback (host 127.0.0.1).
func loopback(h corev1.ProbeHandler) corev1.ProbeHandler {
	if h.HTTPGet != nil {
		h.HTTPGet.Host = "127.0.0.1"
	}
	if h.TCPSocket != nil {
		h.TCPSocket.Host = "127.0.0.1"
	}
	return h
}

func probe(name, container string, h corev1.ProbeHandler, edit ...func(*corev1.Probe)) v1alpha1.ContainerProbe {
	p := corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1}
	for _, e := range edit {
		e(&p)
	}
	return v1alpha1.ContainerProbe{Name: name, ContainerName: container, Probe: v1alpha1.ContainerProbeSpec{Probe: p}}
}

// initialProbes is the spec the suite starts with; each test owns its probes.
func initialProbes() []v1alpha1.ContainerProbe {
	return []v1alpha1.ContainerProbe{
		probe("exec-ok", "box", exec("true")),
		probe("exec-fail", "box", exec("sh", "-c", "echo not idle; exit 1")),
		probe("exec-timeout", "box", exec("sleep", "37"), func(p *corev1.Probe) { p.PeriodSeconds = 3 }),
		probe("exec-big-output", "box", exec("sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; exit 2")),
		probe("exec-toggle", "box", exec("test", "-f", "/tmp/healthy")),
		probe("exec-restart", "box", exec("true"), func(p *corev1.Probe) { p.InitialDelaySeconds = 4 }),
		probe("exec-missing", "box", exec("no-such-command")),
		probe("http-local", "web", loopback(httpGet(8080, "/"))),
		probe("http-pod-ip", "web", httpGet(8080, "/")),
		probe("http-500", "web500", loopback(httpGet(8082, "/"))),
		probe("http-offhost-redirect", "web", loopback(httpGet(8080, "/redirect?to=http://192.0.2.1:9/elsewhere"))),
		probe("tcp-open", "web", loopback(tcp(8080))),
		probe("tcp-pod-ip", "web", tcp(8080)),
		probe("tcp-closed", "web", tcp(8081)),
		probe("grpc", "grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}),
		probe("host-is-node", "web", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: "10.217.0.1", Port: intstr.FromInt32(10250), Path: "/pods"}}),
	}
}

func TestNodeService(t *testing.T) {
	c := framework.Get(t)
	c.InstallCRDs(t)
	ns := c.Namespace(t)
	pod := c.CreatePod(t, framework.NewPod(ns, "probed",
		framework.Command("box", "sh", "-c", "touch /tmp/healthy; exec sleep 100000"),
		framework.Command("web", "localhttp-server", "-listen", "127.0.0.1:8080"),
		framework.Command("web500", "localhttp-server", "-listen", "127.0.0.1:8082", "-code", "500"),
		framework.Command("grpc", "grpc-health-server", "-listen", ":9090"),
	))
	pod = c.WaitForPodReady(t, pod, 2*time.Minute)

	s := &suite{c: c, pod: pod}
	s.writeSpec(t, initialProbes())
	s.svc = c.StartNodeService(t)

	// The first results of every probe, as the kubelet would give them.
	t.Run("results", func(t *testing.T) {
		want := map[string]v1alpha1.ProbeState{
			"exec-ok":               v1alpha1.ProbeSucceeded,
			"exec-fail":             v1alpha1.ProbeFailed,
			"exec-timeout":          v1alpha1.ProbeFailed,
			"exec-big-output":       v1alpha1.ProbeFailed,
			"exec-toggle":           v1alpha1.ProbeSucceeded,
			"exec-restart":          v1alpha1.ProbeSucceeded,
			"exec-missing":          v1alpha1.ProbeUnknown,   // a probe error: no result, but a reason
			"http-local":            v1alpha1.ProbeSucceeded, // host 127.0.0.1: the pod's own loopback, where the server is bound
			"http-pod-ip":           v1alpha1.ProbeFailed,    // no host: the pod IP, as the kubelet; loopback is not tried first
			"tcp-pod-ip":            v1alpha1.ProbeFailed,
			"http-500":              v1alpha1.ProbeFailed,
			"http-offhost-redirect": v1alpha1.ProbeSucceeded, // not followed: success with a warning, like the kubelet
			"tcp-open":              v1alpha1.ProbeSucceeded,
			"tcp-closed":            v1alpha1.ProbeFailed,
			"grpc":                  v1alpha1.ProbeSucceeded,
			"host-is-node":          v1alpha1.ProbeUnknown, // refused by the node service
		}
		for name, state := range want {
			s.waitState(t, name, state, 30*time.Second)
		}
		st := s.states(t)
		if m := st["exec-fail"].Message; !strings.Contains(m, "not idle") {
			t.Errorf("exec-fail message = %q, want the command's output", m)
		}
		if m := st["exec-big-output"].Message; len(m) > 1024 || !strings.HasPrefix(m, "xxxx") {
			t.Errorf("exec-big-output message is %d bytes (%.20q...), want the output capped at 1024", len(m), m)
		}
		// Unknown from the start: wait for the reason, not the state.
		err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "exec-missing says why it does not run",
			func(ctx context.Context) (bool, string, error) {
				st, err := s.readStates(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				m := st["exec-missing"]
				return m.State == v1alpha1.ProbeUnknown && strings.HasPrefix(m.Message, "probe error (CommandNotFound): ") &&
					strings.Contains(m.Message, "no-such-command"), fmt.Sprintf("%s %q", m.State, m.Message), nil
			})
		if err != nil {
			t.Error(err)
		}
		if m := st["http-500"].Message; m != "HTTP probe failed with statuscode: 500" {
			t.Errorf("http-500 message = %q", m)
		}
		// Refused by the spec's validation on the node, before any probe runs (not a probe error).
		if m := st["host-is-node"].Message; !strings.HasPrefix(m, "probe refused by the node service: ") || !strings.Contains(m, "httpGet.host") {
			t.Errorf("host-is-node message = %q, want the refusal and the field", m)
		}
		if !strings.Contains(s.svc.Logs(), "host-is-node") {
			t.Errorf("the refusal of host-is-node is not in the service log")
		}
		for _, name := range []string{"http-pod-ip", "tcp-pod-ip"} {
			if m := st[name].Message; !strings.Contains(m, "connection refused") || !strings.Contains(m, pod.Status.PodIP) {
				t.Errorf("%s message = %q, want the pod IP %s refusing the connection", name, m, pod.Status.PodIP)
			}
		}
	})

	t.Run("events only on transitions", func(t *testing.T) {
		ev, err := c.WaitForEvent(framework.Context(t, time.Minute), ns, pod.Name, v1alpha1.EventReasonProbeFailed, "exec-fail", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A probe that cannot run: one ProbeError with its reason, however often it errs.
		if _, err := c.WaitForEvent(framework.Context(t, time.Minute), ns, pod.Name, v1alpha1.EventReasonProbeError,
			"exec-missing probe errored (CommandNotFound): ", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		s.waitState(t, "exec-ok", v1alpha1.ProbeSucceeded, 15*time.Second)
		// Three more periods of a steady result: no repeat; and a first success is no event (the
		// status and the pod condition say it, as the kubelet writes none for successes).
		poll.Consistently(t, 3*time.Second, func() error {
			evs, err := c.Events(framework.Context(t, time.Minute), ns, pod.Name)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if e.Reason == ev.Reason && strings.Contains(e.Message, "exec-fail") && e.Count > 1 {
					return fmt.Errorf("event %s for a steady result recorded %d times, want once", e.Reason, e.Count)
				}
				if e.Reason == v1alpha1.EventReasonProbeError && strings.Contains(e.Message, "exec-missing") && e.Count > 1 {
					return fmt.Errorf("event %s for a probe that keeps erring recorded %d times, want once", e.Reason, e.Count)
				}
				if e.Reason == v1alpha1.EventReasonProbeSucceeded && strings.Contains(e.Message, "exec-ok") {
					return fmt.Errorf("event %s for exec-ok's first success: %s", e.Reason, e.Message)
				}
			}
			return nil
		})
	})

	t.Run("timed-out exec leaves no process", func(t *testing.T) {
		s.removeProbe(t, "exec-timeout")
		s.waitGone(t, "exec-timeout", 15*time.Second)
		err := framework.WaitFor(framework.Context(t, time.Minute), 10*time.Second, "no 'sleep 37' left in the container",
			func(ctx context.Context) (bool, string, error) {
				out, _, err := c.Exec(ctx, ns, pod.Name, "box", "ps", "-o", "pid,args")
				return err == nil && !strings.Contains(out, "sleep 37"), out, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("spec change flips the state", func(t *testing.T) {
		s.editProbe(t, "exec-fail", func(p *corev1.Probe) { p.Exec.Command = []string{"sh", "-c", "echo idle"} })
		s.waitState(t, "exec-fail", v1alpha1.ProbeSucceeded, 15*time.Second)
		if m := s.states(t)["exec-fail"].Message; !strings.Contains(m, "idle") || strings.Contains(m, "not idle") {
			t.Errorf("message after the change = %q", m)
		}
		// A recovery is told.
		if _, err := c.WaitForEvent(framework.Context(t, time.Minute), ns, pod.Name, v1alpha1.EventReasonProbeSucceeded, "exec-fail", 30*time.Second); err != nil {
			t.Error(err)
		}
	})

	t.Run("gRPC NOT_SERVING", func(t *testing.T) {
		if _, _, err := c.Exec(framework.Context(t, time.Minute), ns, pod.Name, "grpc", "grpc-health-server", "set", "NOT_SERVING"); err != nil {
			t.Fatal(err)
		}
		s.waitState(t, "grpc", v1alpha1.ProbeFailed, 15*time.Second)
	})

	t.Run("container restart reports Unknown then the new result", func(t *testing.T) {
		before := framework.ContainerStatus(s.pod, "box")
		s.stopContainer(t, "box")
		s.waitState(t, "exec-restart", v1alpha1.ProbeUnknown, 20*time.Second)
		s.waitState(t, "exec-restart", v1alpha1.ProbeSucceeded, 30*time.Second)
		p, err := c.Kube.CoreV1().Pods(ns).Get(framework.Context(t, time.Minute), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after := framework.ContainerStatus(p, "box"); after == nil || before == nil || after.ContainerID == before.ContainerID {
			t.Fatalf("box was not restarted: before %v after %v", before, after)
		}
		s.pod = p
	})

	t.Run("probe removed from the spec leaves the status", func(t *testing.T) {
		s.removeProbe(t, "tcp-closed")
		s.waitGone(t, "tcp-closed", 15*time.Second)
	})

	// Resilience: each step changes a result while something is away, and the
	// result must arrive once it is back.
	t.Run("containerd restart", func(t *testing.T) {
		if err := c.Rig.RestartComponent(framework.Context(t, 2*time.Minute), "containerd"); err != nil {
			t.Fatal(err)
		}
		// containerd 1.7's restart can have the kubelet stop and start the pod's containers (seen
		// in CI): the first exec waits for whichever box the kubelet runs now.
		s.toggleOnceRunning(t, false)
		s.waitState(t, "exec-toggle", v1alpha1.ProbeFailed, 30*time.Second)
		s.toggle(t, true)
		s.waitState(t, "exec-toggle", v1alpha1.ProbeSucceeded, 30*time.Second)
	})

	t.Run("API server away", func(t *testing.T) {
		if err := c.Rig.StopComponent("kube-apiserver"); err != nil {
			t.Fatal(err)
		}
		apiDown := true
		t.Cleanup(func() {
			// A failed step must not leave the API server away for the scenarios after this one.
			if apiDown {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := c.Rig.StartComponent(ctx, "kube-apiserver"); err != nil {
					t.Errorf("starting the API server again: %v", err)
				}
			}
		})
		down := time.Now()
		s.toggle(t, false) // through containerd: the API server is down
		// The service has the new result while it cannot write it (its status socket says)...
		err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "the status socket to show exec-toggle Failed",
			func(ctx context.Context) (bool, string, error) {
				st, err := s.svc.Status(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				for _, p := range st.Probes {
					if p.Probe == "exec-toggle" && p.Pod == pod.Name {
						return p.Result == string(v1alpha1.ProbeFailed), "exec-toggle " + p.Result, nil
					}
				}
				return false, "no exec-toggle", nil
			})
		if err != nil {
			t.Fatal(err)
		}
		// measures: ...and keeps it through an outage of 15 s, its writes backing off meanwhile
		time.Sleep(time.Until(down.Add(15 * time.Second)))
		apiDown = false
		if err := c.Rig.StartComponent(framework.Context(t, 2*time.Minute), "kube-apiserver"); err != nil {
			t.Fatal(err)
		}
		s.waitState(t, "exec-toggle", v1alpha1.ProbeFailed, 60*time.Second)
		s.toggle(t, true)
		s.waitState(t, "exec-toggle", v1alpha1.ProbeSucceeded, 30*time.Second)
	})

	t.Run("kill -9 and start again", func(t *testing.T) {
		s.svc.Kill()
		s.toggle(t, false)
		s.svc.Start(t)
		s.waitState(t, "exec-toggle", v1alpha1.ProbeFailed, 30*time.Second)
		if got := s.states(t)["exec-ok"].State; got != v1alpha1.ProbeSucceeded {
			t.Errorf("exec-ok after the restart = %s, want Succeeded kept", got)
		}
	})

	t.Run("probeshim status", func(t *testing.T) {
		st, err := s.svc.Status(framework.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range st.Probes {
			if p.Probe == "exec-ok" && p.Pod == pod.Name && p.Container == "box" && p.Type == "exec" && p.Result == "Succeeded" {
				found = true
			}
		}
		if !found {
			t.Errorf("status socket does not list exec-ok as Succeeded: %+v", st.Probes)
		}
		// The service was just restarted: its duration histogram appears with the first probe
		// that succeeds after the start (exec-ok, every second).
		// The series per container are on /metrics/probes, as the kubelet's; /metrics has none.
		err = framework.WaitFor(framework.Context(t, time.Minute), 20*time.Second, "the prober's series on /metrics and /metrics/probes",
			func(ctx context.Context) (bool, string, error) {
				metrics, err := s.svc.Get(ctx, "/metrics")
				if err != nil {
					return false, err.Error(), nil
				}
				perPod, err := s.svc.Get(ctx, "/metrics/probes")
				if err != nil {
					return false, err.Error(), nil
				}
				var missing []string
				for _, want := range []string{`probeshim_probes_total{probe_type=`, "probeshim_api_writes_total", "probeshim_build_info{",
					`probeshim_probe_errors_total{probe_type="custom",reason="CommandNotFound"}`} {
					if !strings.Contains(metrics, want) {
						missing = append(missing, want)
					}
				}
				for _, want := range []string{"prober_probe_total{", "prober_probe_duration_seconds"} {
					if !strings.Contains(perPod, want) {
						missing = append(missing, want+" (on /metrics/probes)")
					}
				}
				if strings.Contains(metrics, "prober_probe_total") {
					return false, "prober_probe_total on /metrics", nil
				}
				return len(missing) == 0, "missing " + strings.Join(missing, ", "), nil
			})
		if err != nil {
			t.Error(err)
		}
	})

	// Entries written past the cluster part: one whose IP is the node's (the node service would
	// have dialled the node's API server from inside the pod) and one without an IP (it would
	// have dialled the pod's loopback). Both are refused, Unknown with the reason, nothing dialled.
	// Last, since it replaces the spec the subtests above share.
	t.Run("entries with an IP that is not the pod's are refused", func(t *testing.T) {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(framework.Context(t, time.Minute), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		forged := []v1alpha1.ContainerProbe{
			probe("node-api-server", "web", tcp(6443)),
			probe("loopback-by-default", "web", httpGet(8080, "/")),
		}
		for _, tc := range []struct{ ip, want string }{
			{rig.NodeIP, "probe error (TargetRefused): probe refused: IP " + rig.NodeIP + " is not pod " + ns + "/probed's own; the runtime reports [" + pod.Status.PodIP + "]"},
			{"", "IP: Required value: the pod's IP"},
		} {
			s.writeEntries(t, []v1alpha1.PodProbe{{Name: pod.Name, Namespace: ns, UID: string(pod.UID), IP: tc.ip, Probes: forged}})
			err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "both refused with IP "+tc.ip, func(ctx context.Context) (bool, string, error) {
				st, err := s.readStates(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				seen := fmt.Sprint(st["node-api-server"], st["loopback-by-default"])
				for _, name := range []string{"node-api-server", "loopback-by-default"} {
					if st[name].State != v1alpha1.ProbeUnknown || !strings.Contains(st[name].Message, tc.want) {
						return false, seen, nil
					}
				}
				return true, seen, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Refused for good: for three periods still Unknown, never a result of a dial.
			poll.Consistently(t, 3*time.Second, func() error {
				st := s.states(t)
				for _, name := range []string{"node-api-server", "loopback-by-default"} {
					if st[name].State != v1alpha1.ProbeUnknown {
						return fmt.Errorf("IP %q: %s is %s (%q), want Unknown", tc.ip, name, st[name].State, st[name].Message)
					}
				}
				return nil
			})
		}
	})

	// A hostNetwork pod's entry written past the cluster part, whose rule it is that a marker's
	// probe of such a pod goes only to a port the pod declares: the node refuses the others
	// itself (the kubelet's port at the node's address and on its loopback), runs the declared
	// one, and dials the pod's own liveness probe wherever its spec says, as the kubelet would.
	t.Run("hostNetwork marker probes go only to declared ports", func(t *testing.T) {
		const declared, undeclared = 18087, 18088 // in the rig's node namespace, used by nothing else
		web := framework.Command("web", "localhttp-server", "-listen", fmt.Sprintf("127.0.0.1:%d", declared))
		web.Ports = []corev1.ContainerPort{{ContainerPort: declared}}
		hp := framework.NewPod(ns, "host-agent", web)
		hp.Spec.HostNetwork = true
		hp = c.WaitForPodReady(t, c.CreatePod(t, hp), 2*time.Minute)
		liveness := v1alpha1.LivenessProbeName("web")
		s.writeEntries(t, []v1alpha1.PodProbe{{Name: hp.Name, Namespace: ns, UID: string(hp.UID), IP: hp.Status.PodIP,
			Probes: []v1alpha1.ContainerProbe{
				probe("declared", "web", loopback(tcp(declared))),
				probe("kubelet", "web", tcp(10250)),
				probe("kubelet-loopback", "web", loopback(tcp(10250))),
				probe(liveness, "web", loopback(tcp(undeclared))),
			}}})
		refusal := "uses the host network and declares no TCP containerPort 10250"
		want := map[string]struct {
			state v1alpha1.ProbeState
			msg   string
		}{
			"declared":         {v1alpha1.ProbeSucceeded, ""},
			"kubelet":          {v1alpha1.ProbeUnknown, refusal},
			"kubelet-loopback": {v1alpha1.ProbeUnknown, refusal},
			liveness:           {v1alpha1.ProbeFailed, "connection refused"},
		}
		err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "the hostNetwork pod's probes",
			func(ctx context.Context) (bool, string, error) {
				st, err := c.ProbeStates(ctx, c.Rig.NodeName(), hp.UID)
				if err != nil {
					return false, err.Error(), nil
				}
				for name, w := range want {
					if st[name].State != w.state || !strings.Contains(st[name].Message, w.msg) {
						return false, fmt.Sprintf("%s: %s %q, want %s %q", name, st[name].State, st[name].Message, w.state, w.msg), nil
					}
				}
				return true, "", nil
			})
		if err != nil {
			st, _ := c.ProbeStates(framework.Context(t, time.Minute), c.Rig.NodeName(), hp.UID)
			t.Fatalf("%v\nstates: %+v\nnode service log:\n%s", err, st, logtail.Last(s.svc.Logs(), 30))
		}
	})

	if strings.Contains(s.svc.Logs(), "panic") {
		t.Errorf("the node service log shows a panic:\n%s", s.svc.Logs())
	}
}

// toggle creates or removes /tmp/healthy in the box container through
// containerd directly, so it works while the API server is down.
func (s *suite) toggle(t *testing.T, healthy bool) {
	t.Helper()
	cmd := []string{"rm", "-f", "/tmp/healthy"}
	if healthy {
		cmd = []string{"touch", "/tmp/healthy"}
	}
	id := containerID(t, s.c, s.pod, "box")
	if _, stderr, code, err := s.c.ExecSync(framework.Context(t, time.Minute), id, 10*time.Second, cmd...); err != nil || code != 0 {
		t.Fatalf("%v in box: exit %d %v %s", cmd, code, err, stderr)
	}
}

// toggleOnceRunning is toggle once an exec in the box the API names succeeds: after a runtime
// restart the kubelet may be starting a new one.
func (s *suite) toggleOnceRunning(t *testing.T, healthy bool) {
	t.Helper()
	cmd := []string{"rm", "-f", "/tmp/healthy"}
	if healthy {
		cmd = []string{"touch", "/tmp/healthy"}
	}
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, fmt.Sprintf("%v in box", cmd), func(ctx context.Context) (bool, string, error) {
		id := containerID(t, s.c, s.pod, "box")
		_, stderr, code, err := s.c.ExecSync(ctx, id, 10*time.Second, cmd...)
		if err != nil || code != 0 {
			return false, fmt.Sprintf("container %s: exit %d %v %s", id, code, err, stderr), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func containerID(t testing.TB, c *framework.Cluster, pod *corev1.Pod, name string) string {
	t.Helper()
	p, err := c.Kube.CoreV1().Pods(pod.Namespace).Get(framework.Context(t, time.Minute), pod.Name, metav1.GetOptions{})
	if err != nil {
		// The API server may be away: the last known pod is good enough.
		p = pod
	} else {
		// Kept as the last known: containerd 1.7 can kill a pod's shims when it restarts (it
		// takes a shim whose Pids call fails under load for leaked), and the kubelet then runs
		// the pod in a new sandbox, with new containers and a new IP.
		*pod = *p
	}
	st := framework.ContainerStatus(p, name)
	if st == nil || st.ContainerID == "" {
		t.Fatalf("no container %s in pod %s", name, pod.Name)
	}
	_, id, _ := strings.Cut(st.ContainerID, "://")
	return id
}

func (s *suite) stopContainer(t *testing.T, name string) {
	t.Helper()
	id := containerID(t, s.c, s.pod, name)
	cri, conn, err := s.c.CRI()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := cri.StopContainer(framework.Context(t, time.Minute), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) npp() *v1alpha1.NodePodProbe {
	return &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: s.c.Rig.NodeName()}}
}

// writeSpec sets the pod's probes in the node's NodePodProbe, creating it.
func (s *suite) writeSpec(t testing.TB, probes []v1alpha1.ContainerProbe) {
	t.Helper()
	s.writeEntries(t, []v1alpha1.PodProbe{{Name: s.pod.Name, Namespace: s.pod.Namespace, UID: string(s.pod.UID),
		IP: s.pod.Status.PodIP, Probes: probes}})
}

// writeEntries sets the node's NodePodProbe spec, creating the object.
func (s *suite) writeEntries(t testing.TB, entries []v1alpha1.PodProbe) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	// The node service writes the status all the while (every second under churn): give a
	// conflicting spec write more tries, spread out, than retry.DefaultRetry's five in 50 ms.
	backoff := wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 2 * time.Second}
	err := retry.RetryOnConflict(backoff, func() error {
		npp := s.npp()
		err := s.c.Client.Get(ctx, clientKey(npp), npp)
		if apierrors.IsNotFound(err) {
			npp.Spec.PodProbes = entries
			return s.c.Client.Create(ctx, npp)
		}
		if err != nil {
			return err
		}
		npp.Spec.PodProbes = entries
		return s.c.Client.Update(ctx, npp)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

func (s *suite) spec(t *testing.T) []v1alpha1.ContainerProbe {
	t.Helper()
	npp := s.npp()
	if err := s.c.Client.Get(framework.Context(t, time.Minute), client.ObjectKeyFromObject(npp), npp); err != nil {
		t.Fatal(err)
	}
	return npp.Spec.PodProbes[0].Probes
}

func (s *suite) editProbe(t *testing.T, name string, edit func(*corev1.Probe)) {
	t.Helper()
	probes := s.spec(t)
	for i := range probes {
		if probes[i].Name == name {
			edit(&probes[i].Probe.Probe)
		}
	}
	s.writeSpec(t, probes)
}

func (s *suite) removeProbe(t *testing.T, name string) {
	t.Helper()
	var keep []v1alpha1.ContainerProbe
	for _, p := range s.spec(t) {
		if p.Name != name {
			keep = append(keep, p)
		}
	}
	s.writeSpec(t, keep)
}

// states reads the pod's probe states from the NodePodProbe status.
func (s *suite) states(t *testing.T) map[string]v1alpha1.ContainerProbeState {
	t.Helper()
	out, err := s.readStates(framework.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *suite) readStates(ctx context.Context) (map[string]v1alpha1.ContainerProbeState, error) {
	return s.c.ProbeStates(ctx, s.c.Rig.NodeName(), s.pod.UID)
}

func (s *suite) waitState(t *testing.T, probe string, want v1alpha1.ProbeState, timeout time.Duration) {
	t.Helper()
	err := s.c.WaitForProbeState(framework.Context(t, timeout+time.Minute), s.c.Rig.NodeName(), s.pod.UID, probe, want, timeout)
	if err != nil {
		t.Fatalf("%v\nnode service log:\n%s", err, logtail.Last(s.svc.Logs(), 30))
	}
}

func (s *suite) waitGone(t *testing.T, probe string, timeout time.Duration) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, timeout+time.Minute), timeout, "probe "+probe+" gone from status",
		func(ctx context.Context) (bool, string, error) {
			st, err := s.readStates(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			got, ok := st[probe]
			return !ok, fmt.Sprintf("%+v", got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}
