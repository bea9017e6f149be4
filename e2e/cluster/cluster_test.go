// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cluster

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/podstatus"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

func TestMain(m *testing.M) {
	// The tests below wait on probes, controllers and the kubelet, hardly on the CPU: let all of
	// them run at once (the default is GOMAXPROCS, 2 here). -parallel on the command line wins.
	_ = flag.Set("test.parallel", "16")
	logf.SetLogger(logr.Discard()) // the framework's clients log nothing worth reading
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme), framework.WithImages(Image()))
}

// Names used by the scenarios.
const (
	labelIdle      = "gameserver-idle"
	annotationCost = "controller.kubernetes.io/pod-deletion-cost"
	conditionIdle  = "game.example.com/idle"
	waitMarks      = 45 * time.Second // a probe result reaching the pod: probe period 1 s, two controllers
	waitPodReady   = 90 * time.Second
)

// suite is the deployed cluster part and the node service, shared by the scenarios.
type suite struct {
	c   *framework.Cluster
	svc *framework.NodeService
}

// TestCluster deploys the cluster part from its manifests, starts the node service and runs the
// scenarios, each in a namespace of its own, all at once.
func TestCluster(t *testing.T) {
	c := framework.Get(t)
	ctx := framework.Context(t, 4*time.Minute)
	t0 := time.Now()
	if err := Deploy(ctx, c, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster deployment ready in %s", time.Since(t0).Round(time.Millisecond))
	s := &suite{c: c, svc: c.StartNodeService(t)}
	c.WaitForServed(t, c.Rig.NodeName()) // enhanced-liveness pods are scheduled only onto served nodes
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", Diagnose(c))
			t.Logf("node service log (end):\n%s", logtail.Last(s.svc.Logs(), 40))
		}
	})

	t.Run("scenarios", func(t *testing.T) {
		t.Run("exec probe marks the pod", s.testExecMarks)
		t.Run("tcpSocket probe", s.testTCP)
		t.Run("httpGet probe", s.testHTTP)
		t.Run("hostNetwork loopback", s.testHostNetworkLoopback)
		t.Run("h2c and gRPC TLS probes", s.testNewProbeModes)
		t.Run("message changes while the state does not", s.testMessageOnly)
		t.Run("startup probe holds the marker's probes", s.testStartupHold)
		t.Run("scaling keeps NodePodProbe exact", s.testScale)
		t.Run("deleting markers leaves nothing behind", s.testDeleteMarkers)
		t.Run("two markers on one container", s.testTwoMarkers)
		t.Run("condition as readinessGate", s.testReadinessGate)
		t.Run("enhanced liveness", s.testEnhancedLiveness)
		t.Run("kruise-game GameServerSet marker", s.testKruiseGame)
		t.Run("exec-free probe reads the file", s.testExecFree)
		t.Run("exec-free probe reads as the container user", s.testExecFreeUser)
		t.Run("exec-free probe has the container's capabilities only", s.testExecFreePrivileges)
	})

	CheckNoPanics(t, c, s.svc)
}

// ---- scenarios ----

// An exec probe's result becomes the condition, the label and the annotation of its
// markerPolicy; changing the command to fail flips all three, and back.
func (s *suite) testExecMarks(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "gs-0", map[string]string{"app": "gs"}, framework.Shell("main", "echo 'no players' > /tmp/idle; exec sleep 1000000"))
	m := s.createMarker(t, idleMarker(ns, "idle", map[string]string{"app": "gs"}, "cat", "/tmp/idle"))

	p := s.waitPod(t, pod, "idle marks", waitMarks, idleMarks(corev1.ConditionTrue, "no players"))
	if got := p.Labels["app"]; got != "gs" {
		t.Errorf("label app = %q, want the pod's own label kept", got)
	}
	s.waitMarkerStatus(t, m, 1)

	// The command changes and fails: label removed, annotation 10, condition False.
	s.editMarker(t, m, func(m *v1alpha1.PodProbeMarker) {
		m.Spec.Probes[0].Probe.Exec.Command = []string{"cat", "/tmp/busy"}
	})
	s.waitPod(t, pod, "busy marks", waitMarks, idleMarks(corev1.ConditionFalse, "/tmp/busy"))
	if _, err := s.c.WaitForEvent(framework.Context(t, time.Minute), ns, pod.Name, v1alpha1.EventReasonProbeFailed, "idle#idle", 30*time.Second); err != nil {
		t.Error(err)
	}
	s.waitMarkerStatus(t, m, 1)

	// And back.
	s.editMarker(t, m, func(m *v1alpha1.PodProbeMarker) {
		m.Spec.Probes[0].Probe.Exec.Command = []string{"cat", "/tmp/idle"}
	})
	s.waitPod(t, pod, "idle marks again", waitMarks, idleMarks(corev1.ConditionTrue, "no players"))
	// A recovery is an event (a first success is none: the condition says it).
	if _, err := s.c.WaitForEvent(framework.Context(t, time.Minute), ns, pod.Name, v1alpha1.EventReasonProbeSucceeded, "idle#idle", 30*time.Second); err != nil {
		t.Error(err)
	}

	// The container's own state flips it too: the server gets busy.
	s.exec(t, ns, pod.Name, "main", "rm", "/tmp/idle")
	s.waitPod(t, pod, "busy marks after rm /tmp/idle", waitMarks, idleMarks(corev1.ConditionFalse, "/tmp/idle"))
}

// A tcpSocket probe: port 80 open, 8081 closed, then the named port of 80.
func (s *suite) testTCP(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	web := framework.Shell("web", "mkdir -p /tmp/www; exec httpd -f -p 80 -h /tmp/www")
	web.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	pod := s.runPod(t, ns, "web", map[string]string{"app": "web"}, web)
	m := newMarker(ns, "port", map[string]string{"app": "web"}, v1alpha1.PodContainerProbe{
		Name: "listening", ContainerName: "web", PodConditionType: "web.example.com/listening",
		Probe: probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}),
	})
	m = s.createMarker(t, m)
	s.waitCondition(t, pod, "web.example.com/listening", corev1.ConditionTrue, "")

	s.editMarker(t, m, func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.TCPSocket.Port = intstr.FromInt32(8081) })
	s.waitCondition(t, pod, "web.example.com/listening", corev1.ConditionFalse, "")

	s.editMarker(t, m, func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.TCPSocket.Port = intstr.FromString("http") })
	s.waitCondition(t, pod, "web.example.com/listening", corev1.ConditionTrue, "")
	// The named port is resolved for the node: the NodePodProbe holds the number.
	probes := s.nppProbes(t, ns)[string(pod.UID)]
	if len(probes) != 1 || probes[0].Probe.TCPSocket == nil || probes[0].Probe.TCPSocket.Port != intstr.FromInt32(80) {
		t.Errorf("NodePodProbe probes of %s = %+v, want one tcpSocket probe on port 80", pod.Name, probes)
	}
}

// An httpGet probe naming the pod's loopback (host 127.0.0.1), of a server bound there only (the
// kubelet could not reach it): 200 is True, 503 False with the status in the message, 200 again
// True. The marker's author (the admin) may create pods/portforward, which such a probe needs.
func (s *suite) testHTTP(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "api", map[string]string{"app": "api"}, framework.Command("web", "localhttp-server", "-listen", "127.0.0.1:8080"))
	m := newMarker(ns, "http", map[string]string{"app": "api"}, v1alpha1.PodContainerProbe{
		Name: "healthz", ContainerName: "web", PodConditionType: "api.example.com/healthy",
		Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromInt32(8080)}}),
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"api-healthy": "true"}},
			{State: v1alpha1.ProbeFailed, Labels: map[string]string{"api-healthy": "false"}},
		},
	})
	s.createMarker(t, m)
	s.waitPod(t, pod, "healthy", waitMarks, all(condIs("api.example.com/healthy", corev1.ConditionTrue, ""), labelIs("api-healthy", "true")))

	s.exec(t, ns, pod.Name, "web", "localhttp-server", "set", "503")
	s.waitPod(t, pod, "unhealthy", waitMarks, all(condIs("api.example.com/healthy", corev1.ConditionFalse, "503"), labelIs("api-healthy", "false")))

	s.exec(t, ns, pod.Name, "web", "localhttp-server", "set", "200")
	s.waitPod(t, pod, "healthy again", waitMarks, all(condIs("api.example.com/healthy", corev1.ConditionTrue, ""), labelIs("api-healthy", "true")))
}

// A hostNetwork pod's loopback is the node's: a marker naming 127.0.0.1 reaches the pod's server
// bound there (on a port it declares), dialled in the node's namespace, as the kubelet would.
func (s *suite) testHostNetworkLoopback(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	const port = 18086 // in the rig's node namespace, used by nothing else
	web := framework.Command("web", "localhttp-server", "-listen", fmt.Sprintf("127.0.0.1:%d", port))
	web.Ports = []corev1.ContainerPort{{Name: "admin", ContainerPort: port}}
	pod := framework.NewPod(ns, "agent", web)
	pod.Labels = map[string]string{"app": "agent"}
	pod.Spec.HostNetwork = true
	pod = s.c.WaitForPodReady(t, s.c.CreatePod(t, pod), waitPodReady)
	s.createMarker(t, newMarker(ns, "lo", map[string]string{"app": "agent"}, v1alpha1.PodContainerProbe{
		Name: "admin", ContainerName: "web", PodConditionType: "agent.example.com/admin",
		Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromString("admin")}}),
	}))
	s.waitPod(t, pod, "healthy", waitMarks, condIs("agent.example.com/admin", corev1.ConditionTrue, ""))
	s.exec(t, ns, pod.Name, "web", "localhttp-server", "set", "-listen", fmt.Sprintf("127.0.0.1:%d", port), "503")
	s.waitPod(t, pod, "unhealthy", waitMarks, condIs("agent.example.com/admin", corev1.ConditionFalse, "503"))
}

// The kubelet's v1.37 probe modes on a marker: an httpGet probe with protocol HTTP2 reads a server
// that speaks h2c only, a grpc probe with mode TLS a gRPC server with a self-signed certificate;
// both True. The mode matters: the same HTTP2 probe of the pod's HTTP/1.1-only server, and a
// plaintext grpc probe of the TLS server, read False (the prober's Failure) and say why.
func (s *suite) testNewProbeModes(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "modes", map[string]string{"app": "modes"},
		framework.Command("h2c", "localhttp-server", "-h2c", "-listen", ":8080"),
		framework.Command("h1", "localhttp-server", "-listen", ":8081"),
		framework.Command("grpc", "grpc-health-server", "-tls", "-listen", ":9090"))
	h2 := corev1.HTTPProtocolHTTP2
	tlsMode := corev1.GRPCProbeModeTLS
	modeProbe := func(name, ctr string, h corev1.ProbeHandler) v1alpha1.PodContainerProbe {
		return v1alpha1.PodContainerProbe{Name: name, ContainerName: ctr, PodConditionType: "modes.example.com/" + name, Probe: probe(h)}
	}
	s.createMarker(t, newMarker(ns, "modes", map[string]string{"app": "modes"},
		modeProbe("h2c", "h2c", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Protocol: &h2}}),
		modeProbe("grpc-tls", "grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Mode: &tlsMode}}),
		modeProbe("h2c-of-h1", "h1", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8081), Protocol: &h2}}),
		modeProbe("plain-of-tls", "grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}),
	))
	s.waitPod(t, pod, "modes read", waitMarks, all(
		condIs("modes.example.com/h2c", corev1.ConditionTrue, ""),
		condIs("modes.example.com/grpc-tls", corev1.ConditionTrue, ""),
		condIs("modes.example.com/h2c-of-h1", corev1.ConditionFalse, "HTTP/2 over cleartext (h2c, prior knowledge) failed"),
		condIs("modes.example.com/plain-of-tls", corev1.ConditionFalse, "error: failed to connect service at"),
	))
	// The h2c server logs the protocol of each request: the probe spoke HTTP/2.
	logs, err := s.c.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "h2c"}).DoRaw(framework.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "GET /healthz") || !strings.Contains(string(logs), "proto=HTTP/2.0") {
		t.Errorf("the h2c server's log shows no HTTP/2 probe:\n%s", logs)
	}
	// The h2c probe follows the server's status, as an HTTP/1.1 probe does.
	s.exec(t, ns, pod.Name, "h2c", "localhttp-server", "set", "-h2c", "-listen", "127.0.0.1:8080", "503")
	s.waitCondition(t, pod, "modes.example.com/h2c", corev1.ConditionFalse, "HTTP probe failed with statuscode: 503")
	s.exec(t, ns, pod.Name, "grpc", "grpc-health-server", "set", "NOT_SERVING")
	s.waitCondition(t, pod, "modes.example.com/grpc-tls", corev1.ConditionFalse, "NOT_SERVING")
}

// A probe whose output changes while it keeps succeeding: the condition's message follows, its
// status and lastTransitionTime stay.
func (s *suite) testMessageOnly(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "gs-0", map[string]string{"app": "gs"}, framework.Shell("main", "echo 'players: 3' > /tmp/players; exec sleep 1000000"))
	s.createMarker(t, newMarker(ns, "players", map[string]string{"app": "gs"}, v1alpha1.PodContainerProbe{
		Name: "count", ContainerName: "main", PodConditionType: "game.example.com/players",
		Probe: probe(execHandler("cat", "/tmp/players")),
	}))
	p := s.waitCondition(t, pod, "game.example.com/players", corev1.ConditionTrue, "players: 3")
	before := *podCondition(p, "game.example.com/players")

	s.exec(t, ns, pod.Name, "main", "sh", "-c", "echo 'players: 5' > /tmp/players")
	p = s.waitCondition(t, pod, "game.example.com/players", corev1.ConditionTrue, "players: 5")
	after := *podCondition(p, "game.example.com/players")
	if !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("lastTransitionTime moved from %s to %s on a message-only change", before.LastTransitionTime, after.LastTransitionTime)
	}
	if strings.Contains(after.Message, "players: 3") {
		t.Errorf("message %q still holds the old output", after.Message)
	}
}

// A marker's probes of a container that has a startup probe wait for it, as the kubelet's readiness
// probe does: while the kubelet reports the container not started, the NodePodProbe holds no probe
// of it and the pod no mark, though the marker is in place (its other container's probe marks the
// pod); once the startup probe succeeds (the test lets it), the held probe runs and marks.
func (s *suite) testStartupHold(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	slow := framework.Shell("main", "echo 'players: 0' > /tmp/players; exec sleep 1000000")
	slow.StartupProbe = &corev1.Probe{
		ProbeHandler:  execHandler("test", "-e", "/tmp/started"),
		PeriodSeconds: 1, TimeoutSeconds: 10, FailureThreshold: 3600, // starts when the test says so
	}
	pod := framework.NewPod(ns, "gs-0", slow, framework.Shell("side", "exec sleep 1000000"))
	pod.Labels = map[string]string{"app": "gs"}
	pod = s.c.CreatePod(t, pod)
	s.createMarker(t, newMarker(ns, "players", map[string]string{"app": "gs"},
		v1alpha1.PodContainerProbe{Name: "count", ContainerName: "main", PodConditionType: "game.example.com/players",
			Probe: probe(execHandler("cat", "/tmp/players"))},
		v1alpha1.PodContainerProbe{Name: "side", ContainerName: "side", PodConditionType: "game.example.com/side",
			Probe: probe(execHandler("true"))}))

	// The marker is placed and probes the pod: side's condition; main still not started. (The
	// containers' start is the kubelet's, 40 s under load in CI: not the marks' time.)
	s.waitPod(t, pod, "side running", waitPodReady, framework.ContainerRunning("side"))
	p := s.waitCondition(t, pod, "game.example.com/side", corev1.ConditionTrue, "")
	if started(p, "main") {
		t.Fatalf("container main started before the test let it: %s", framework.DescribePod(p))
	}
	if c := podCondition(p, "game.example.com/players"); c != nil {
		t.Errorf("the held probe marked the pod before its container started: %+v", *c)
	}
	npp, err := s.npp(framework.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, pp := range npp.Spec.PodProbes {
		for _, pr := range pp.Probes {
			if pp.UID == string(pod.UID) && pr.ContainerName == "main" {
				t.Errorf("the NodePodProbe holds %s of container main before it started", pr.Name)
			}
		}
	}

	s.exec(t, ns, pod.Name, "main", "touch", "/tmp/started")
	p = s.waitCondition(t, pod, "game.example.com/players", corev1.ConditionTrue, "players: 0")
	if !started(p, "main") {
		t.Errorf("the held probe marked the pod while the kubelet reports main not started: %s", framework.DescribePod(p))
	}
}

// started reports whether the kubelet reports container name of p started.
func started(p *corev1.Pod, name string) bool {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == name {
			return st.Started != nil && *st.Started
		}
	}
	return false
}

// Scaling a Deployment down and up: the NodePodProbe holds entries for exactly the running
// pods, the marker counts them, and the new pods get their marks.
func (s *suite) testScale(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 3*time.Minute)
	dep := s.createDeployment(t, ns, "gs", 3, framework.Shell("main", "touch /tmp/idle; exec sleep 1000000"))
	m := s.createMarker(t, idleMarker(ns, "idle", map[string]string{"app": "gs"}, "cat", "/tmp/idle"))

	check := func(replicas int32) {
		t.Helper()
		s.scale(t, dep, replicas)
		var pods []corev1.Pod
		err := framework.WaitFor(ctx, 90*time.Second, fmt.Sprintf("%d pods marked idle, NodePodProbe exact", replicas), func(ctx context.Context) (bool, string, error) {
			list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gs"})
			if err != nil {
				return false, err.Error(), nil
			}
			pods = list.Items
			var live, marked []string
			for i := range pods {
				if pods[i].DeletionTimestamp != nil {
					return false, "pod " + pods[i].Name + " terminating", nil
				}
				live = append(live, string(pods[i].UID))
				if ok, _ := idleMarks(corev1.ConditionTrue, "")(&pods[i]); ok {
					marked = append(marked, pods[i].Name)
				}
			}
			spec, status, err := s.nppUIDs(ctx, ns)
			if err != nil {
				return false, err.Error(), nil
			}
			slices.Sort(live)
			obs := fmt.Sprintf("pods %v, marked %v, spec %v, status %v", live, marked, spec, status)
			return len(live) == int(replicas) && len(marked) == int(replicas) && slices.Equal(spec, live) && slices.Equal(status, live), obs, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		s.waitMarkerStatus(t, m, int64(replicas))
	}
	check(3)
	check(1)
	check(3)
}

// Deleting markers removes their NodePodProbe entries and every label, annotation and condition
// they set, and nothing the pod had of its own.
func (s *suite) testDeleteMarkers(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := framework.NewPod(ns, "gs-0", framework.Shell("main", "touch /tmp/idle; exec sleep 1000000"))
	pod.Labels = map[string]string{"app": "gs", "team": "blue"}
	pod.Annotations = map[string]string{"owner": "someone"}
	pod = s.c.CreatePod(t, pod)
	pod = s.c.WaitForPodReady(t, pod, waitPodReady)

	idle := s.createMarker(t, idleMarker(ns, "idle", map[string]string{"app": "gs"}, "cat", "/tmp/idle"))
	other := s.createMarker(t, newMarker(ns, "region", map[string]string{"team": "blue"}, v1alpha1.PodContainerProbe{
		Name: "region", ContainerName: "main", PodConditionType: "game.example.com/region",
		Probe: probe(execHandler("true")),
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"region": "eu"}, Annotations: map[string]string{"region.example.com/checked": "yes"}},
		},
	}))
	s.waitPod(t, pod, "marks of both markers", waitMarks, all(idleMarks(corev1.ConditionTrue, ""),
		condIs("game.example.com/region", corev1.ConditionTrue, ""), labelIs("region", "eu")))

	s.deleteMarker(t, idle)
	s.waitPod(t, pod, "only the region marker's marks", waitMarks, all(
		noCondition(conditionIdle), labelGone(labelIdle), annotationGone(annotationCost),
		condIs("game.example.com/region", corev1.ConditionTrue, ""), labelIs("region", "eu")))
	s.waitNPPProbes(t, pod, "region#region")

	s.deleteMarker(t, other)
	p := s.waitPod(t, pod, "no marks at all", waitMarks, all(
		noCondition(conditionIdle), noCondition("game.example.com/region"),
		labelGone(labelIdle), labelGone("region"), annotationGone(annotationCost), annotationGone("region.example.com/checked"),
		annotationGone(podstatus.RecordAnnotation)))
	if p.Labels["app"] != "gs" || p.Labels["team"] != "blue" || p.Annotations["owner"] != "someone" {
		t.Errorf("the pod's own labels or annotations changed: labels %v annotations %v", p.Labels, p.Annotations)
	}
	err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "no NodePodProbe entries for "+ns, func(ctx context.Context) (bool, string, error) {
		spec, status, err := s.nppUIDs(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(spec) == 0 && len(status) == 0, fmt.Sprintf("spec %v status %v", spec, status), nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Two markers probe the same container with different commands under the same probe name; each
// result reaches its own condition and label only.
func (s *suite) testTwoMarkers(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "gs-0", map[string]string{"app": "gs"}, framework.Shell("main", "touch /tmp/a; exec sleep 1000000"))
	mk := func(name string) *v1alpha1.PodProbeMarker {
		return newMarker(ns, name, map[string]string{"app": "gs"}, v1alpha1.PodContainerProbe{
			Name: "check", ContainerName: "main", PodConditionType: "game.example.com/" + name,
			Probe: probe(execHandler("test", "-f", "/tmp/"+name)),
			MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
				{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"has-" + name: "yes"}},
			},
		})
	}
	s.createMarker(t, mk("a"))
	s.createMarker(t, mk("b"))
	s.waitPod(t, pod, "a True, b False", waitMarks, all(
		condIs("game.example.com/a", corev1.ConditionTrue, ""), labelIs("has-a", "yes"),
		condIs("game.example.com/b", corev1.ConditionFalse, ""), labelGone("has-b")))
	s.waitNPPProbes(t, pod, "a#check", "b#check")

	s.exec(t, ns, pod.Name, "main", "sh", "-c", "rm /tmp/a; touch /tmp/b")
	s.waitPod(t, pod, "a False, b True", waitMarks, all(
		condIs("game.example.com/a", corev1.ConditionFalse, ""), labelGone("has-a"),
		condIs("game.example.com/b", corev1.ConditionTrue, ""), labelIs("has-b", "yes")))
}

// A marker's condition used as a readinessGate: the pod is Ready only while the probe succeeds.
func (s *suite) testReadinessGate(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	const gate = "game.example.com/ready"
	pod := framework.NewPod(ns, "gs-0", framework.Shell("main", "exec sleep 1000000"))
	pod.Labels = map[string]string{"app": "gs"}
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	pod = s.c.CreatePod(t, pod)
	s.createMarker(t, newMarker(ns, "ready", map[string]string{"app": "gs"}, v1alpha1.PodContainerProbe{
		Name: "ready", ContainerName: "main", PodConditionType: gate,
		Probe: probe(execHandler("test", "-f", "/tmp/ready")),
	}))
	notReady := all(condIs(gate, corev1.ConditionFalse, ""), condIs(string(corev1.ContainersReady), corev1.ConditionTrue, ""),
		condIs(string(corev1.PodReady), corev1.ConditionFalse, ""))
	s.waitPod(t, pod, "containers ready, gate False, pod not Ready", waitPodReady, notReady)

	s.exec(t, ns, pod.Name, "main", "touch", "/tmp/ready")
	s.waitPod(t, pod, "gate True, pod Ready", waitMarks, all(condIs(gate, corev1.ConditionTrue, ""), condIs(string(corev1.PodReady), corev1.ConditionTrue, "")))

	s.exec(t, ns, pod.Name, "main", "rm", "/tmp/ready")
	s.waitPod(t, pod, "gate False, pod not Ready again", waitMarks, notReady)
}

// A pod opted into enhanced liveness: its livenessProbe moves into the annotation, the
// NodePodProbe gets "<container>-livenessProbe", and the results show in its status. Nothing acts
// on them yet (the decider is a later issue), and the kubelet no longer restarts the container.
func (s *suite) testEnhancedLiveness(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	liveness := &corev1.Probe{
		ProbeHandler:        execHandler("test", "-f", "/tmp/alive"),
		InitialDelaySeconds: 0, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	app := framework.Shell("app", "touch /tmp/alive; exec sleep 1000000")
	app.LivenessProbe = liveness.DeepCopy()
	side := framework.Shell("side", "exec sleep 1000000") // no liveness probe: nothing to move
	pod := framework.NewPod(ns, "svc-0", app, side)
	// The decider's emergency switch keeps it from restarting (e2e/decider tests that), so a
	// restart below could only be the kubelet's.
	pod.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", decider.AnnotationRestartDisabled: "true"}
	pod = s.c.CreatePod(t, pod)

	for _, ctr := range pod.Spec.Containers {
		if ctr.LivenessProbe != nil {
			t.Errorf("container %s of the created pod still has a livenessProbe: %+v", ctr.Name, ctr.LivenessProbe)
		}
	}
	raw, ok := pod.Annotations[v1alpha1.AnnotationContainerProbeContext]
	if !ok {
		t.Fatalf("the created pod has no %s annotation: %v", v1alpha1.AnnotationContainerProbeContext, pod.Annotations)
	}
	ctxProbes, err := v1alpha1.ParseContainerProbeContext(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctxProbes) != 1 || ctxProbes[0].Name != "app" || !equality.Semantic.DeepEqual(ctxProbes[0].LivenessProbe, *liveness) {
		t.Fatalf("annotation %s = %s, want the app container's livenessProbe %+v", v1alpha1.AnnotationContainerProbeContext, raw, *liveness)
	}
	pod = s.c.WaitForPodReady(t, pod, waitPodReady)

	probes := s.waitNPPProbe(t, pod, "app-livenessProbe")
	if !equality.Semantic.DeepEqual(probes.Probe.Probe, *liveness) || probes.ContainerName != "app" {
		t.Errorf("NodePodProbe probe app-livenessProbe = %+v, want container app and %+v", probes, *liveness)
	}
	s.waitNPPProbes(t, pod, "app-livenessProbe")
	s.waitNPPState(t, pod, "app-livenessProbe", v1alpha1.ProbeSucceeded)

	s.exec(t, ns, pod.Name, "app", "rm", "/tmp/alive")
	s.waitNPPState(t, pod, "app-livenessProbe", v1alpha1.ProbeFailed)
	s.exec(t, ns, pod.Name, "app", "touch", "/tmp/alive")
	s.waitNPPState(t, pod, "app-livenessProbe", v1alpha1.ProbeSucceeded)
	p, err := s.c.Kube.CoreV1().Pods(ns).Get(framework.Context(t, time.Minute), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := framework.ContainerStatus(p, "app"); st == nil || st.RestartCount != 0 {
		t.Errorf("container app was restarted (by the kubelet?): %+v", st)
	}

	// The pod goes away: its entry goes too.
	if err := s.c.DeletePod(framework.Context(t, time.Minute), pod, time.Minute); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, "no NodePodProbe entry for the deleted pod", func(ctx context.Context) (bool, string, error) {
		spec, status, err := s.nppUIDs(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(spec) == 0 && len(status) == 0, fmt.Sprintf("spec %v status %v", spec, status), nil
	})
	if err != nil {
		t.Error(err)
	}
}

// ---- building objects ----

func execHandler(cmd ...string) corev1.ProbeHandler {
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

// probe is a fast probe: every second, one failure or success flips it. Its timeout is long: these
// scenarios are about results, and a timed-out probe fails (on a loaded 2-core machine an exec has
// taken seconds), which flips a condition a scenario holds steady.
func probe(h corev1.ProbeHandler) v1alpha1.ContainerProbeSpec {
	return v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 10, SuccessThreshold: 1, FailureThreshold: 1}}
}

func newMarker(ns, name string, selector map[string]string, probes ...v1alpha1.PodContainerProbe) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, Probes: probes},
	}
}

// idleMarker is the game server marker: an exec probe "idle" in container main whose success
// labels the pod idle and makes it cheap to delete, and whose failure makes it dear.
func idleMarker(ns, name string, selector map[string]string, cmd ...string) *v1alpha1.PodProbeMarker {
	return newMarker(ns, name, selector, v1alpha1.PodContainerProbe{
		Name: "idle", ContainerName: "main", PodConditionType: conditionIdle,
		Probe: probe(execHandler(cmd...)),
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{labelIdle: "true"}, Annotations: map[string]string{annotationCost: "-10"}},
			{State: v1alpha1.ProbeFailed, Annotations: map[string]string{annotationCost: "10"}},
		},
	})
}

// idleMarks is what idleMarker puts on a pod in state status (True idle, False busy), with
// msg in the condition's message ("" for any).
func idleMarks(status corev1.ConditionStatus, msg string) podCheck {
	if status == corev1.ConditionTrue {
		return all(condIs(conditionIdle, status, msg), labelIs(labelIdle, "true"), annotationIs(annotationCost, "-10"))
	}
	return all(condIs(conditionIdle, status, msg), labelGone(labelIdle), annotationIs(annotationCost, "10"))
}

// ---- actions ----

// runPod creates a pod of containers with labels and waits for it to be Ready.
func (s *suite) runPod(t *testing.T, ns, name string, labels map[string]string, containers ...corev1.Container) *corev1.Pod {
	t.Helper()
	pod := framework.NewPod(ns, name, containers...)
	pod.Labels = labels
	return s.c.WaitForPodReady(t, s.c.CreatePod(t, pod), waitPodReady)
}

func (s *suite) createDeployment(t *testing.T, ns, name string, replicas int32, containers ...corev1.Container) *appsv1.Deployment {
	t.Helper()
	tmpl := framework.NewPod(ns, name, containers...)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
	if err := s.c.Client.Create(framework.Context(t, time.Minute), dep); err != nil {
		t.Fatal(err)
	}
	return dep
}

func (s *suite) scale(t *testing.T, dep *appsv1.Deployment, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		ctx := framework.Context(t, time.Minute)
		if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		return s.c.Client.Update(ctx, d)
	})
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", dep.Name, replicas, err)
	}
}

func (s *suite) createMarker(t *testing.T, m *v1alpha1.PodProbeMarker) *v1alpha1.PodProbeMarker {
	t.Helper()
	if err := s.c.Client.Create(framework.Context(t, time.Minute), m); err != nil {
		t.Fatalf("create PodProbeMarker %s/%s: %v", m.Namespace, m.Name, err)
	}
	return m
}

func (s *suite) editMarker(t *testing.T, m *v1alpha1.PodProbeMarker, edit func(*v1alpha1.PodProbeMarker)) {
	t.Helper()
	s.c.EditMarker(t, m, edit)
}

func (s *suite) deleteMarker(t *testing.T, m *v1alpha1.PodProbeMarker) {
	t.Helper()
	if err := s.c.Client.Delete(framework.Context(t, time.Minute), m); err != nil {
		t.Fatalf("delete PodProbeMarker %s/%s: %v", m.Namespace, m.Name, err)
	}
}

func (s *suite) exec(t *testing.T, ns, pod, container string, cmd ...string) {
	t.Helper()
	s.c.MustExec(t, ns, pod, container, cmd...)
}

// ---- waiting ----

// The pod checks are the framework's, shared with e2e/examples.
type podCheck = framework.PodCheck

var (
	all            = framework.All
	podCondition   = framework.ConditionNamed
	condIs         = framework.CondIs
	condReason     = framework.CondReason
	noCondition    = framework.NoCondition
	labelIs        = framework.LabelIs
	labelGone      = framework.LabelGone
	annotationIs   = framework.AnnotationIs
	annotationGone = framework.AnnotationGone
)

// waitPod waits until check holds for the pod and returns it as last seen.
func (s *suite) waitPod(t *testing.T, pod *corev1.Pod, what string, timeout time.Duration, check podCheck) *corev1.Pod {
	t.Helper()
	last, err := s.c.WaitForPodCheck(framework.Context(t, timeout+time.Minute), pod.Namespace, pod.Name, timeout, what, check)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
	return last
}

func (s *suite) waitCondition(t *testing.T, pod *corev1.Pod, typ string, status corev1.ConditionStatus, msg string) *corev1.Pod {
	t.Helper()
	return s.waitPod(t, pod, fmt.Sprintf("condition %s=%s", typ, status), waitMarks, condIs(typ, status, msg))
}

// waitMarkerStatus waits for the marker's status to reflect its generation and count matched pods.
func (s *suite) waitMarkerStatus(t *testing.T, m *v1alpha1.PodProbeMarker, matched int64) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, fmt.Sprintf("PodProbeMarker %s/%s status: observed, %d matched", m.Namespace, m.Name, matched),
		func(ctx context.Context) (bool, string, error) {
			cur := &v1alpha1.PodProbeMarker{}
			if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
				return false, err.Error(), nil
			}
			st := cur.Status
			return st.ObservedGeneration == cur.Generation && st.MatchedPods == matched,
				fmt.Sprintf("generation %d, status %+v", cur.Generation, st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// explain is the state of things around a pod, for failure messages.
func (s *suite) explain(pod *corev1.Pod) string { return s.c.ExplainPod(pod, s.svc) }

// ---- NodePodProbe ----

func (s *suite) npp(ctx context.Context) (*v1alpha1.NodePodProbe, error) {
	npp := &v1alpha1.NodePodProbe{}
	return npp, s.c.Client.Get(ctx, client.ObjectKey{Name: s.c.Rig.NodeName()}, npp)
}

// nppProbes returns the node's NodePodProbe spec probes of namespace ns, by pod UID.
func (s *suite) nppProbes(t *testing.T, ns string) map[string][]v1alpha1.ContainerProbe {
	t.Helper()
	npp, err := s.npp(framework.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]v1alpha1.ContainerProbe{}
	for _, pp := range npp.Spec.PodProbes {
		if pp.Namespace == ns {
			out[pp.UID] = append(out[pp.UID], pp.Probes...)
		}
	}
	return out
}

// nppUIDs lists, sorted, the pod UIDs of namespace ns in the NodePodProbe's spec and status.
func (s *suite) nppUIDs(ctx context.Context, ns string) (spec, status []string, err error) {
	npp, err := s.npp(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, pp := range npp.Spec.PodProbes {
		if pp.Namespace == ns {
			spec = append(spec, pp.UID)
		}
	}
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.Namespace == ns {
			status = append(status, ps.UID)
		}
	}
	slices.Sort(spec)
	slices.Sort(status)
	return spec, status, nil
}

// waitNPPProbe waits for the pod's NodePodProbe entry to hold the named probe and returns it.
func (s *suite) waitNPPProbe(t *testing.T, pod *corev1.Pod, name string) v1alpha1.ContainerProbe {
	t.Helper()
	var found v1alpha1.ContainerProbe
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "NodePodProbe probe "+name+" of "+pod.Name, func(ctx context.Context) (bool, string, error) {
		npp, err := s.npp(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, pp := range npp.Spec.PodProbes {
			if pp.UID != string(pod.UID) {
				continue
			}
			if pp.IP != pod.Status.PodIP {
				return false, fmt.Sprintf("entry IP %s, pod IP %s", pp.IP, pod.Status.PodIP), nil
			}
			for _, p := range pp.Probes {
				if p.Name == name {
					found = p
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("entry has %v", probeNames(pp.Probes)), nil
		}
		return false, "no entry for the pod", nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
	return found
}

// waitNPPProbes waits for the pod's NodePodProbe entry to hold exactly the named probes.
func (s *suite) waitNPPProbes(t *testing.T, pod *corev1.Pod, names ...string) {
	t.Helper()
	slices.Sort(names)
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), 30*time.Second, fmt.Sprintf("NodePodProbe probes of %s: %v", pod.Name, names), func(ctx context.Context) (bool, string, error) {
		npp, err := s.npp(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var have []v1alpha1.ContainerProbe
		for _, pp := range npp.Spec.PodProbes {
			if pp.UID == string(pod.UID) {
				have = append(have, pp.Probes...)
			}
		}
		got := probeNames(have)
		return slices.Equal(got, names), fmt.Sprint(got), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
}

// waitNPPState waits for the named probe of the pod to be in state in the NodePodProbe status.
func (s *suite) waitNPPState(t *testing.T, pod *corev1.Pod, name string, state v1alpha1.ProbeState) {
	t.Helper()
	if err := s.c.WaitForProbeState(framework.Context(t, 2*time.Minute), s.c.Rig.NodeName(), pod.UID, name, state, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
}

func probeNames(probes []v1alpha1.ContainerProbe) []string {
	names := make([]string, len(probes))
	for i, p := range probes {
		names[i] = p.Name
	}
	slices.Sort(names)
	return names
}
