// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package crr

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
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
	// The tests share the controller's clock, so they run one after another and each starts by
	// setting it to the real time (creation timestamps come from the API server).
	fakeClock = testingclock.NewFakeClock(time.Now())
)

const (
	wait   = 10 * time.Second
	pickup = 30 * time.Second
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error {
		return SetupWithManager(mgr, WithClock(fakeClock), WithPickupTimeout(pickup))
	}, &env, &skipReason)
}

func start(t *testing.T) string {
	t.Helper()
	testenv.Require(t, env, skipReason)
	fakeClock.SetTime(time.Now())
	return env.Namespace(t)
}

func runningPod(t *testing.T, ns, name string, gate bool) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "main", Image: "busybox"}, {Name: "side", Image: "busybox"}}},
	}
	if gate {
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: ConditionKruisePodReady}}
	}
	pod = env.RunningPod(t, pod, "10.9.0.1")
	if gate {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: ConditionKruisePodReady, Status: corev1.ConditionTrue})
		if err := env.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	return pod
}

// newCRR creates a request as admission would have completed it.
func newCRR(t *testing.T, pod *corev1.Pod, name string, mut func(*v1alpha1.ContainerRecreateRequest)) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name, Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: string(pod.UID), v1alpha1.LabelCRRNodeName: pod.Spec.NodeName, v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}, {Name: "side"}},
			Strategy:   &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail}},
	}
	if mut != nil {
		mut(crr)
	}
	if err := env.Client.Create(ctx, crr); err != nil {
		t.Fatal(err)
	}
	return crr
}

// setStatus writes the status as the node would (the controller may write metadata meanwhile).
func setStatus(t *testing.T, crr *v1alpha1.ContainerRecreateRequest, st v1alpha1.ContainerRecreateRequestStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, crr)
		cur.Status = st
		return env.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, crr *v1alpha1.ContainerRecreateRequest) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	cur := &v1alpha1.ContainerRecreateRequest{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// poke makes the controller look again after the fake clock moved: an update of the request.
func poke(t *testing.T, crr *v1alpha1.ContainerRecreateRequest) {
	t.Helper()
	body := fmt.Sprintf(`{"metadata":{"annotations":{"test/poke":"%d"}}}`, time.Now().UnixNano())
	if err := env.Client.Patch(ctx, crr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body))); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// summary renders a request's lifecycle state compactly.
func summary(crr *v1alpha1.ContainerRecreateRequest) string {
	var cs []string
	for _, s := range crr.Status.ContainerRecreateStates {
		c := s.Name + "=" + string(s.Phase)
		if s.IsKilled {
			c += "(killed)"
		}
		if s.Message != "" && s.Message != crr.Status.Message {
			c += ":" + s.Message
		}
		cs = append(cs, c)
	}
	_, active := crr.Labels[v1alpha1.LabelCRRActive]
	return fmt.Sprintf("phase=%s active=%t done=%t msg=%q %s", crr.Status.Phase, active, crr.Status.CompletionTime != nil,
		crr.Status.Message, strings.Join(cs, " "))
}

func summaryIs(crr *v1alpha1.ContainerRecreateRequest, want string) func() error {
	return func() error {
		cur := &v1alpha1.ContainerRecreateRequest{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
			return err
		}
		if got := summary(cur); got != want {
			return fmt.Errorf("got  %s\nwant %s", got, want)
		}
		return nil
	}
}

func TestPodGone(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", false)
	deleted := newCRR(t, pod, "deleted", nil)
	setStatus(t, deleted, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "main", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true},
			{Name: "side", Phase: v1alpha1.ContainerRecreateRequestRecreating, IsKilled: true}}})
	poll.Consistently(t, time.Second, summaryIs(deleted,
		`phase=Recreating active=true done=false msg="" main=Succeeded(killed) side=Recreating(killed)`))

	env.ForceDelete(t, pod)
	poll.Eventually(t, wait, summaryIs(deleted,
		`phase=Completed active=false done=true msg="pod has gone" main=Succeeded(killed) side=Failed(killed)`))

	// A new pod of the same name is another pod: requests for the old one end.
	stale := newCRR(t, pod, "stale", nil)
	runningPod(t, ns, "web", false)
	poll.Eventually(t, wait, summaryIs(stale,
		`phase=Completed active=false done=true msg="pod has gone" main=Failed side=Failed`))

	// A request made a moment after its pod, before the controller's cache has the pod, is not
	// taken for one whose pod has gone.
	fresh := runningPod(t, ns, "fresh", false)
	early := newCRR(t, fresh, "early", nil)
	poll.Consistently(t, time.Second, summaryIs(early, `phase= active=true done=false msg="" `))
}

func TestPickupTimeout(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", false)
	ignored := newCRR(t, pod, "ignored", nil)
	queued := newCRR(t, pod, "queued", nil)
	setStatus(t, queued, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestPending})

	fakeClock.Step(pickup - time.Second)
	poke(t, ignored)
	poll.Consistently(t, time.Second, summaryIs(ignored, `phase= active=true done=false msg="" `))

	fakeClock.Step(2 * time.Second)
	poke(t, ignored)
	want := `node node-a has not picked up the request within 30s; is the probeshim node service running there?`
	poll.Eventually(t, wait, summaryIs(ignored, fmt.Sprintf(`phase=Completed active=false done=true msg=%q main=Failed side=Failed`, want)))
	// A request the node has seen (Pending behind another of the same pod) waits for its turn.
	poke(t, queued)
	poll.Consistently(t, time.Second, summaryIs(queued, `phase=Pending active=true done=false msg="" `))
}

func TestActiveDeadline(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", false)
	crr := newCRR(t, pod, "slow", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) })
	setStatus(t, crr, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "main", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true},
			{Name: "side", Phase: v1alpha1.ContainerRecreateRequestRecreating, Message: "running preStop hook"}}})
	fakeClock.Step(3 * time.Second)
	poke(t, crr)
	poll.Consistently(t, 500*time.Millisecond, summaryIs(crr,
		`phase=Recreating active=true done=false msg="" main=Succeeded(killed) side=Recreating:running preStop hook`))

	fakeClock.Step(3 * time.Second)
	poke(t, crr)
	poll.Eventually(t, wait, summaryIs(crr,
		`phase=Completed active=false done=true msg="recreating has exceeded the activeDeadlineSeconds (5s)" main=Succeeded(killed) side=Failed`))
	if got := get(t, crr).Status.CompletionTime.Time; !got.Equal(fakeClock.Now().Truncate(time.Second)) {
		t.Errorf("completionTime %v, want the controller's now %v", got, fakeClock.Now())
	}
}

func TestTTL(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", false)
	crr := newCRR(t, pod, "done", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.TTLSecondsAfterFinished = ptr.To[int32](10) })
	kept := newCRR(t, pod, "kept", nil)
	for _, c := range []*v1alpha1.ContainerRecreateRequest{crr, kept} {
		setStatus(t, c, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted,
			CompletionTime: &metav1.Time{Time: fakeClock.Now()},
			ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
				{Name: "main", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true},
				{Name: "side", Phase: v1alpha1.ContainerRecreateRequestSucceeded, IsKilled: true}}})
	}
	poll.Eventually(t, wait, summaryIs(crr, `phase=Completed active=false done=true msg="" main=Succeeded(killed) side=Succeeded(killed)`))

	fakeClock.Step(9 * time.Second)
	poke(t, crr)
	poll.Consistently(t, time.Second, func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(crr), crr) })

	fakeClock.Step(2 * time.Second)
	poke(t, crr)
	poll.Eventually(t, wait, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(crr), &v1alpha1.ContainerRecreateRequest{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	// Without a TTL a completed request stays.
	fakeClock.Step(time.Hour)
	poke(t, kept)
	poll.Consistently(t, time.Second, func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept) })
}

func readiness(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	c := podCondition(cur)
	if c == nil {
		return "none"
	}
	return string(c.Status) + " " + c.Message
}

func readinessIs(t *testing.T, pod *corev1.Pod, want string) func() error {
	return func() error {
		if got := readiness(t, pod); got != want {
			return fmt.Errorf("KruisePodReady %q, want %q", got, want)
		}
		return nil
	}
}

func acquired(t *testing.T, crr *v1alpha1.ContainerRecreateRequest) string {
	return get(t, crr).Annotations[v1alpha1.AnnotationCRRUnreadyAcquired]
}

func unready(grace int64) func(*v1alpha1.ContainerRecreateRequest) {
	return func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To(grace) }
}

func TestUnreadyGrace(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", true)
	// Another user holds the pod too; its entry is never touched.
	cur := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	other := `[{"userAgent":"Lifecycle","key":"pre-update"}]`
	podCondition(cur).Status, podCondition(cur).Message = corev1.ConditionFalse, other
	if err := env.Client.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	a := newCRR(t, pod, "a", unready(3))
	b := newCRR(t, pod, "b", unready(3))
	plain := newCRR(t, pod, "plain", nil)
	// Not before the node starts on it.
	poll.Consistently(t, time.Second, readinessIs(t, pod, "False "+other))

	before := fakeClock.Now()
	setStatus(t, a, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating})
	setStatus(t, plain, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating})
	held := `False [{"userAgent":"ContainerRecreateRequest","key":"` + ns + `/a"},{"userAgent":"Lifecycle","key":"pre-update"}]`
	poll.Eventually(t, wait, readinessIs(t, pod, held))
	poll.Eventually(t, wait, func() error {
		v := acquired(t, a)
		at, err := time.Parse(time.RFC3339, v)
		if err != nil || !at.Equal(before) {
			return fmt.Errorf("unready-acquired %q (%w), want %v", v, err, before)
		}
		return nil
	})
	if v := acquired(t, plain); v != "" {
		t.Errorf("a request without unreadyGracePeriodSeconds was stamped %q", v)
	}

	// The pod stays not ready while any request holds it.
	setStatus(t, b, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating})
	both := `False [{"userAgent":"ContainerRecreateRequest","key":"` + ns + `/a"},{"userAgent":"ContainerRecreateRequest","key":"` + ns +
		`/b"},{"userAgent":"Lifecycle","key":"pre-update"}]`
	poll.Eventually(t, wait, readinessIs(t, pod, both))
	setStatus(t, a, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted, CompletionTime: &metav1.Time{Time: fakeClock.Now()}})
	poll.Eventually(t, wait, readinessIs(t, pod, `False [{"userAgent":"ContainerRecreateRequest","key":"`+ns+`/b"},{"userAgent":"Lifecycle","key":"pre-update"}]`))
	// A deleted request lets go too (no finalizer needed: the pod is recomputed).
	if err := env.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, readinessIs(t, pod, "False "+other))

	// Idempotent: nothing more to write.
	n := env.Writes.Len()
	poke(t, plain)
	poll.Consistently(t, time.Second, func() error {
		if ws := env.Writes.Since(n); len(ws) > 0 {
			return fmt.Errorf("unexpected writes %+v", ws)
		}
		return nil
	})

	// Once the other user lets go too, the pod is ready again; and the condition is only ours
	// to change while we hold it.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		t.Fatal(err)
	}
	podCondition(cur).Status, podCondition(cur).Message = corev1.ConditionTrue, ""
	if err := env.Client.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	c := newCRR(t, pod, "c", unready(0))
	setStatus(t, c, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating})
	poll.Eventually(t, wait, readinessIs(t, pod, `False [{"userAgent":"ContainerRecreateRequest","key":"`+ns+`/c"}]`))
	setStatus(t, c, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted, CompletionTime: &metav1.Time{Time: fakeClock.Now()}})
	poll.Eventually(t, wait, readinessIs(t, pod, "True "))
}

// A pod without the readiness gate cannot be made not ready; the node is still told when to
// count the grace from, and the pod's conditions are left alone.
func TestUnreadyWithoutGate(t *testing.T) {
	ns := start(t)
	pod := runningPod(t, ns, "web", false)
	crr := newCRR(t, pod, "a", unready(2))
	setStatus(t, crr, v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating})
	poll.Eventually(t, wait, func() error {
		if acquired(t, crr) == "" {
			return fmt.Errorf("not stamped")
		}
		return nil
	})
	if got := readiness(t, pod); got != "none" {
		t.Errorf("KruisePodReady %q on a pod without the gate", got)
	}
}

func TestHolderMessageFormat(t *testing.T) {
	b, _ := json.Marshal([]holder{{UserAgent: readinessUserAgent, Key: "ns/a"}})
	if string(b) != `[{"userAgent":"ContainerRecreateRequest","key":"ns/a"}]` {
		t.Errorf("holder list %s; OpenKruise's readiness users parse exactly this", b)
	}
}
