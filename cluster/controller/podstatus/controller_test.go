// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podstatus

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env        *testenv.Env
	skipReason string
	ctx        = context.Background()
)

const (
	wait = 10 * time.Second
	cost = "controller.kubernetes.io/pod-deletion-cost"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error { return SetupWithManager(mgr) }, &env, &skipReason)
}

// fixture is one pod on a NodePodProbe whose spec and status the test writes, as the mapping
// controller and the node service would.
type fixture struct {
	t    *testing.T
	ns   string
	node string
	pod  *corev1.Pod
}

func setup(t *testing.T, markers ...*v1alpha1.PodProbeMarker) *fixture {
	t.Helper()
	testenv.Require(t, env, skipReason)
	f := &fixture{t: t, ns: env.Namespace(t), node: testenv.Name("node")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gs-0", Labels: map[string]string{"app": "game", "team": "blue"},
			Annotations: map[string]string{"owner": "me"}},
		Spec: corev1.PodSpec{NodeName: f.node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	f.pod = env.RunningPod(t, pod, "10.8.0.1")
	for _, m := range markers {
		m.Namespace = f.ns
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: f.node}}
	if err := env.Client.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, npp) })
	return f
}

func marker(name string, probes ...v1alpha1.PodContainerProbe) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}}, Probes: probes}}
}

func execProbe(name, condition string, policy ...v1alpha1.ProbeMarkerPolicy) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{Name: name, ContainerName: "main", PodConditionType: condition, MarkerPolicy: policy,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/" + name}}}}}}
}

func idlePolicy() []v1alpha1.ProbeMarkerPolicy {
	return []v1alpha1.ProbeMarkerPolicy{
		{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"gameserver-idle": "true"}, Annotations: map[string]string{cost: "-10"}},
		{State: v1alpha1.ProbeFailed, Annotations: map[string]string{cost: "10"}},
	}
}

// spec sets the pod's probe names in the NodePodProbe spec.
func (f *fixture) spec(probes ...string) {
	f.t.Helper()
	npp := f.npp()
	npp.Spec.PodProbes = nil
	if len(probes) > 0 {
		pp := v1alpha1.PodProbe{Name: f.pod.Name, Namespace: f.ns, UID: string(f.pod.UID), IP: "10.8.0.1"}
		for _, p := range probes {
			pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: p, ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"true"}}}}}})
		}
		npp.Spec.PodProbes = []v1alpha1.PodProbe{pp}
	}
	if err := env.Client.Update(ctx, npp); err != nil {
		f.t.Fatal(err)
	}
}

// status sets the pod's probe states in the NodePodProbe status, as the node service does.
func (f *fixture) status(states ...v1alpha1.ContainerProbeState) {
	f.t.Helper()
	npp := f.npp()
	npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{{Name: f.pod.Name, Namespace: f.ns, UID: string(f.pod.UID), ProbeStates: states}}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) npp() *v1alpha1.NodePodProbe {
	f.t.Helper()
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.node}, npp); err != nil {
		f.t.Fatal(err)
	}
	return npp
}

func (f *fixture) get() *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(f.pod), pod); err != nil {
		f.t.Fatal(err)
	}
	return pod
}

func state(name string, s v1alpha1.ProbeState, msg string, transition time.Time) v1alpha1.ContainerProbeState {
	return v1alpha1.ContainerProbeState{Name: name, State: s, Message: msg,
		LastProbeTime: metav1.NewTime(transition), LastTransitionTime: metav1.NewTime(transition)}
}

// expect is what the pod should show: labels and annotations (value "" = absent) and
// conditions by type (status "" = absent; message checked too).
type expect struct {
	labels, annotations map[string]string
	conditions          map[string][2]string // type → {status, message}
}

func (f *fixture) is(e expect) func() error {
	return func() error {
		pod := f.get()
		for k, v := range e.labels {
			if got, ok := pod.Labels[k]; got != v || (v == "") == ok {
				return fmt.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
			}
		}
		for k, v := range e.annotations {
			if got, ok := pod.Annotations[k]; got != v || (v == "") == ok {
				return fmt.Errorf("annotation %s = %q (present %v), want %q", k, got, ok, v)
			}
		}
		for typ, want := range e.conditions {
			var got *corev1.PodCondition
			for i := range pod.Status.Conditions {
				if string(pod.Status.Conditions[i].Type) == typ {
					got = &pod.Status.Conditions[i]
				}
			}
			switch {
			case want[0] == "" && got != nil:
				return fmt.Errorf("condition %s present: %+v", typ, *got)
			case want[0] == "":
			case got == nil:
				return fmt.Errorf("condition %s missing", typ)
			case string(got.Status) != want[0] || got.Message != want[1]:
				return fmt.Errorf("condition %s = %s %q, want %s %q", typ, got.Status, got.Message, want[0], want[1])
			}
		}
		return nil
	}
}

// podWrites counts the manager's writes to the fixture's pod since mark.
func (f *fixture) podWrites(mark int) (meta, status int) {
	for _, w := range env.Writes.Since(mark) {
		if w.Kind == "Pod" && w.Namespace == f.ns && w.Name == f.pod.Name {
			if w.Subresource == "status" {
				status++
			} else {
				meta++
			}
		}
	}
	return meta, status
}

// settle waits until the pod matches e, then checks it keeps matching a little longer, so that
// late writes are counted.
func (f *fixture) settle(e expect) {
	f.t.Helper()
	poll.Eventually(f.t, wait, f.is(e))
	poll.Consistently(f.t, 300*time.Millisecond, f.is(e))
}

func TestStatesBecomeConditionsLabelsAnnotations(t *testing.T) {
	f := setup(t, marker("m", execProbe("idle", "game.io/idle", idlePolicy()...)))
	base := time.Now().Truncate(time.Second)
	f.spec("m#idle")

	mark := env.Writes.Len()
	f.status(state("m#idle", v1alpha1.ProbeSucceeded, "players: 0", base))
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": "true", "app": "game"},
		annotations: map[string]string{cost: "-10", "owner": "me"},
		conditions:  map[string][2]string{"game.io/idle": {"True", "players: 0"}},
	})
	if meta, status := f.podWrites(mark); meta != 1 || status != 1 {
		t.Errorf("writes for one change: %d metadata + %d status, want 1 + 1", meta, status)
	}
	pod := f.get()
	for _, c := range pod.Status.Conditions {
		if c.Type == "game.io/idle" && !c.LastTransitionTime.Time.Equal(base) {
			t.Errorf("lastTransitionTime = %v, want %v", c.LastTransitionTime, base)
		}
	}
	if got, want := pod.Annotations[RecordAnnotation], `{"labels":["gameserver-idle"],"annotations":["`+cost+`"],"conditions":["game.io/idle"]}`; got != want {
		t.Errorf("record = %s, want %s", got, want)
	}

	mark = env.Writes.Len()
	f.status(state("m#idle", v1alpha1.ProbeFailed, "players: 3", base.Add(time.Second)))
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": ""},
		annotations: map[string]string{cost: "10"},
		conditions:  map[string][2]string{"game.io/idle": {"False", "players: 3"}},
	})
	if meta, status := f.podWrites(mark); meta != 1 || status != 1 {
		t.Errorf("writes for one change: %d metadata + %d status, want 1 + 1", meta, status)
	}

	// Message only: one status write.
	mark = env.Writes.Len()
	f.status(state("m#idle", v1alpha1.ProbeFailed, "players: 4", base.Add(time.Second)))
	f.settle(expect{conditions: map[string][2]string{"game.io/idle": {"False", "players: 4"}}})
	if meta, status := f.podWrites(mark); meta != 0 || status != 1 {
		t.Errorf("writes for a message change: %d metadata + %d status, want 0 + 1", meta, status)
	}

	// Unknown (a restarted container) is Unknown, and clears both states' marks.
	f.status(state("m#idle", v1alpha1.ProbeUnknown, "", base.Add(2*time.Second)))
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": "", "app": "game"},
		annotations: map[string]string{cost: "", "owner": "me"},
		conditions:  map[string][2]string{"game.io/idle": {"Unknown", ""}},
	})

	// Unknown because the probe could not run: the condition's reason says why; a result clears it.
	const notFound = `probe error (CommandNotFound): exec: "idle": executable file not found in $PATH`
	f.status(state("m#idle", v1alpha1.ProbeUnknown, notFound, base.Add(2*time.Second)))
	f.settle(expect{conditions: map[string][2]string{"game.io/idle": {"Unknown", notFound}}})
	if r := conditionReason(f.get(), "game.io/idle"); r != "CommandNotFound" {
		t.Errorf("reason of a probe that could not run = %q, want CommandNotFound", r)
	}

	// A lastProbeTime refresh, an unrelated pod change: no write.
	f.status(state("m#idle", v1alpha1.ProbeSucceeded, "", base.Add(3*time.Second)))
	f.settle(expect{labels: map[string]string{"gameserver-idle": "true"}, conditions: map[string][2]string{"game.io/idle": {"True", ""}}})
	if r := conditionReason(f.get(), "game.io/idle"); r != "" {
		t.Errorf("reason after a result = %q, want none", r)
	}
	mark = env.Writes.Len()
	s := state("m#idle", v1alpha1.ProbeSucceeded, "", base.Add(3*time.Second))
	s.LastProbeTime = metav1.NewTime(base.Add(time.Minute))
	f.status(s)
	pod = f.get()
	pod.Labels["unrelated"] = "x"
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	poll.Consistently(t, time.Second, func() error {
		if meta, status := f.podWrites(mark); meta+status != 0 {
			return fmt.Errorf("%d metadata + %d status writes although nothing changed", meta, status)
		}
		return nil
	})
}

func conditionReason(pod *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Reason
		}
	}
	return ""
}

func TestMarkerDeletedRemovesWhatItSet(t *testing.T) {
	m := marker("m", execProbe("idle", "game.io/idle", idlePolicy()...))
	f := setup(t, m)
	// The user's own label that happens to have the name of one the marker sets on Failed.
	pod := f.get()
	pod.Labels["gameserver-busy"] = "mine"
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.spec("m#idle")
	f.status(state("m#idle", v1alpha1.ProbeSucceeded, "", time.Now()))
	f.settle(expect{labels: map[string]string{"gameserver-idle": "true"}, conditions: map[string][2]string{"game.io/idle": {"True", ""}}})

	// The marker goes; its NodePodProbe entries are still there (the mapping has not caught up).
	if err := env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": "", "gameserver-busy": "mine", "app": "game", "team": "blue"},
		annotations: map[string]string{cost: "", RecordAnnotation: "", "owner": "me"},
		conditions:  map[string][2]string{"game.io/idle": {"", ""}, string(corev1.PodInitialized): {"True", ""}},
	})
}

func TestProbeRemovedFromSpecRemovesWhatItSet(t *testing.T) {
	f := setup(t, marker("m",
		execProbe("idle", "game.io/idle", idlePolicy()...),
		execProbe("alive", "game.io/alive", v1alpha1.ProbeMarkerPolicy{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"alive": "yes"}})))
	now := time.Now()
	f.spec("m#idle", "m#alive")
	f.status(state("m#idle", v1alpha1.ProbeSucceeded, "", now), state("m#alive", v1alpha1.ProbeSucceeded, "", now))
	f.settle(expect{labels: map[string]string{"gameserver-idle": "true", "alive": "yes"},
		conditions: map[string][2]string{"game.io/idle": {"True", ""}, "game.io/alive": {"True", ""}}})

	// "idle" leaves the spec; the node service has not dropped its state yet.
	f.spec("m#alive")
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": "", "alive": "yes"},
		annotations: map[string]string{cost: "", RecordAnnotation: `{"labels":["alive"],"conditions":["game.io/alive"]}`},
		conditions:  map[string][2]string{"game.io/idle": {"", ""}, "game.io/alive": {"True", ""}},
	})
}

func TestTwoMarkersNeverInterfere(t *testing.T) {
	idle := marker("idle", execProbe("check", "game.io/idle", v1alpha1.ProbeMarkerPolicy{
		State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"idle": "true"}}))
	healthy := marker("healthy", execProbe("check", "game.io/healthy", v1alpha1.ProbeMarkerPolicy{
		State: v1alpha1.ProbeFailed, Annotations: map[string]string{"sick": "yes"}}))
	f := setup(t, idle, healthy)
	now := time.Now()
	f.spec("idle#check", "healthy#check", v1alpha1.LivenessProbeName("main"))
	f.status(state("idle#check", v1alpha1.ProbeSucceeded, "idle", now), state("healthy#check", v1alpha1.ProbeFailed, "sick", now),
		state(v1alpha1.LivenessProbeName("main"), v1alpha1.ProbeFailed, "liveness is the decider's", now))
	f.settle(expect{
		labels:      map[string]string{"idle": "true"},
		annotations: map[string]string{"sick": "yes"},
		conditions:  map[string][2]string{"game.io/idle": {"True", "idle"}, "game.io/healthy": {"False", "sick"}},
	})
	pod := f.get()
	if len(pod.Status.Conditions) != 4 { // Initialized, PodScheduled and the two probes'
		t.Errorf("conditions = %+v; the liveness state must not make one", pod.Status.Conditions)
	}

	if err := env.Client.Delete(ctx, healthy); err != nil {
		t.Fatal(err)
	}
	f.settle(expect{
		labels:      map[string]string{"idle": "true"},
		annotations: map[string]string{"sick": ""},
		conditions:  map[string][2]string{"game.io/idle": {"True", "idle"}, "game.io/healthy": {"", ""}},
	})
}

// A pod recreated under the same name (new UID) must never get the old pod's marks.
func TestPatchesAreRefusedForAnotherUID(t *testing.T) {
	f := setup(t)
	v := "x"
	ch := change{labels: map[string]*string{"stolen": &v},
		setConditions: []corev1.PodCondition{{Type: "game.io/stolen", Status: corev1.ConditionTrue}}}
	pod := f.get()
	if err := env.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, ch.metadataPatch("other-uid"))); err == nil {
		t.Error("metadata patch with another UID accepted")
	} else {
		t.Logf("metadata patch refused: %v", err)
	}
	if err := env.Client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, ch.statusPatch("other-uid"))); err == nil {
		t.Error("status patch with another UID accepted")
	} else {
		t.Logf("status patch refused: %v", err)
	}
	poll.Consistently(t, 200*time.Millisecond, f.is(expect{labels: map[string]string{"stolen": ""},
		conditions: map[string][2]string{"game.io/stolen": {"", ""}}}))
}

// A marker stored before the reserved-key rule (or written past the webhook) and a forged record
// of what the controller set: it writes no reserved key or owned condition, and removes none of
// Ready, OpenKruise's readiness gate or another controller's label.
func TestReservedKeysNeverWrittenNorRemoved(t *testing.T) {
	m := marker("old", execProbe("p", "Ready", v1alpha1.ProbeMarkerPolicy{State: v1alpha1.ProbeSucceeded,
		Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", "mine": "x"},
		Labels:      map[string]string{"apps.kruise.io/gate": "open"}}))
	f := setup(t, m)
	pod := f.get()
	pod.Status.Conditions = append(pod.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
		corev1.PodCondition{Type: "KruisePodReady", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels["apps.kruise.io/gate"] = "held"
	pod.Annotations[RecordAnnotation] = `{"labels":["apps.kruise.io/gate"],"annotations":["apps.kruise.io/container-probe-context"],"conditions":["KruisePodReady","Ready"]}`
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.spec("old#p")
	f.status(state("old#p", v1alpha1.ProbeSucceeded, "", time.Now()))
	f.settle(expect{
		labels:      map[string]string{"apps.kruise.io/gate": "held"},
		annotations: map[string]string{"mine": "x", v1alpha1.AnnotationUsingEnhancedLiveness: ""},
		conditions:  map[string][2]string{string(corev1.PodReady): {"False", ""}, "KruisePodReady": {"True", ""}},
	})
}

func TestDryRunWritesNothingUntilLive(t *testing.T) {
	m := marker("m", execProbe("idle", "game.io/idle", idlePolicy()...))
	m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "true"}
	f := setup(t, m)
	mark := env.Writes.Len()
	f.spec("m#idle")
	f.status(state("m#idle", v1alpha1.ProbeSucceeded, "players: 0", time.Now()))
	none := expect{
		labels:      map[string]string{"gameserver-idle": "", "app": "game"},
		annotations: map[string]string{cost: "", RecordAnnotation: "", "owner": "me"},
		conditions:  map[string][2]string{"game.io/idle": {"", ""}},
	}
	poll.Consistently(t, 2*time.Second, func() error {
		if meta, status := f.podWrites(mark); meta+status != 0 {
			return fmt.Errorf("%d metadata + %d status writes on the pod of a marker in dry run", meta, status)
		}
		return f.is(none)()
	})

	// Flipped live: the result the node reported meanwhile is written.
	setDryRun(t, m, "false")
	f.settle(expect{
		labels:      map[string]string{"gameserver-idle": "true"},
		annotations: map[string]string{cost: "-10"},
		conditions:  map[string][2]string{"game.io/idle": {"True", "players: 0"}},
	})

	// Back to dry run: what it wrote while live goes, as for a deleted marker.
	setDryRun(t, m, "true")
	f.settle(none)
}

func setDryRun(t *testing.T, m *v1alpha1.PodProbeMarker, v string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationDryRun, v)
	if err := env.Client.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
