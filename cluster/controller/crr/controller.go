// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package crr is the cluster side of the ContainerRecreateRequest lifecycle. The node service
// (shim/recreate) does the work on its node; this controller does what needs the cluster's view:
//
//   - completes a request whose pod went away or was replaced ("pod has gone"), whose
//     activeDeadlineSeconds passed, or that its node has not picked up within the pickup
//     timeout; every container not yet done is marked Failed with the reason;
//   - for a request with strategy.unreadyGracePeriodSeconds, once its node starts on it
//     (Recreating), makes the pod not ready through the KruisePodReady readiness gate (where the
//     pod has one) and then stamps the request with v1alpha1.AnnotationCRRUnreadyAcquired, the time from which
//     the node counts the grace before it runs any preStop or stop; and makes the pod ready again
//     once no request holds it any more (completed or deleted);
//   - removes the active label of completed requests, so nodes stop watching them, and deletes
//     them ttlSecondsAfterFinished after completionTime.
//
// It reconciles per pod (namespace and spec.podName): requests of one pod share the pod's
// readiness, and a pod's events are what ends its requests. Level-based: every reconcile
// recomputes from the cache, writes only differences and requeues for the next deadline.
package crr

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "containerrecreaterequest"

const (
	// ConditionKruisePodReady is the readiness gate through which pods are made not ready.
	ConditionKruisePodReady = v1alpha1.PodConditionKruisePodReady
	// readinessUserAgent names this controller among the holders of KruisePodReady.
	readinessUserAgent = "ContainerRecreateRequest"
	// DefaultPickupTimeout is how long a node may take to start on a request.
	DefaultPickupTimeout = time.Minute
	// podNameIndex indexes requests by spec.podName.
	podNameIndex = "spec.podName"
)

// Messages of requests the cluster completes.
const (
	MessagePodGone = "pod has gone"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=containerrecreaterequests,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=apps.kruise.io,resources=containerrecreaterequests/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers int
	clock   clock.PassiveClock
	pickup  time.Duration
	hold    hold.Func
}

// WithHold makes the controller stand aside while f says why (another actor does the work).
func WithHold(f hold.Func) Option { return func(o *options) { o.hold = f } }

// WithWorkers sets how many pods are reconciled at once (default 2).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithClock sets the clock deadlines are measured with (tests).
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// WithPickupTimeout sets how long a node may leave a request without any status before it is
// completed as never picked up (default DefaultPickupTimeout).
func WithPickupTimeout(d time.Duration) Option { return func(o *options) { o.pickup = d } }

// SetupWithManager adds the controller to mgr; it runs only on the elected leader.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{workers: 2, clock: clock.RealClock{}, pickup: DefaultPickupTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.ContainerRecreateRequest{}, podNameIndex,
		func(o client.Object) []string { return []string{o.(*v1alpha1.ContainerRecreateRequest).Spec.PodName} })
	if err != nil {
		return err
	}
	r := &reconciler{hold: o.hold, client: mgr.GetClient(), live: mgr.GetAPIReader(), clock: o.clock, pickup: o.pickup,
		recorder: mgr.GetEventRecorder(ControllerName)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(&v1alpha1.ContainerRecreateRequest{}, handler.EnqueueRequestsFromMapFunc(crrToPod)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podWithRequests),
			builder.WithPredicates(podChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(r)
}

func crrToPod(_ context.Context, o client.Object) []reconcile.Request {
	crr := o.(*v1alpha1.ContainerRecreateRequest)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: crr.Namespace, Name: crr.Spec.PodName}}}
}

// podWithRequests maps a pod to itself when any request names it; most pods have none.
func (r *reconciler) podWithRequests(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.ContainerRecreateRequestList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{podNameIndex: o.GetName()},
		client.UnsafeDisableDeepCopy); err != nil || len(list.Items) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// podChanged passes what can end or hold a request: creation (a new pod of the same name),
// deletion, the start of a graceful deletion, and changes of the KruisePodReady condition or
// the readiness gates.
func podChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*corev1.Pod)
			cur, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			oc, cc := podCondition(old), podCondition(cur)
			return old.UID != cur.UID || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
				hasGate(old) != hasGate(cur) || (oc == nil) != (cc == nil) ||
				(oc != nil && (oc.Status != cc.Status || oc.Message != cc.Message))
		},
	}
}

type reconciler struct {
	hold     hold.Func
	client   client.Client
	live     client.Reader
	clock    clock.PassiveClock
	pickup   time.Duration
	recorder events.EventRecorder
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	var list v1alpha1.ContainerRecreateRequestList
	if err := r.client.List(ctx, &list, client.InNamespace(req.Namespace), client.MatchingFields{podNameIndex: req.Name}); err != nil {
		return reconcile.Result{}, err
	}
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	crrs := list.Items
	slices.SortFunc(crrs, func(a, b v1alpha1.ContainerRecreateRequest) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})

	var next requeue
	err := r.reconcile(ctx, crrs, pod, &next)
	if apierrors.IsConflict(err) {
		// Someone (the node) wrote in between: start over from the cache.
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // SA1019: retry now, through the rate limiter; RequeueAfter would wait a fixed time
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: next.after()}, nil
}

//nolint:gocyclo // one pass over the pod's requests in creation order; each branch is a step of their state machine
func (r *reconciler) reconcile(ctx context.Context, crrs []v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, next *requeue) error {
	now := r.clock.Now()
	var stale []string // versions our writes made stale, to wait for in the cache

	// 1. End what must end.
	for i := range crrs {
		crr := &crrs[i]
		if crr.DeletionTimestamp != nil || completed(crr) {
			continue
		}
		msg, err := r.mustComplete(ctx, crr, pod, now, next)
		if err != nil {
			return err
		}
		if msg == "" {
			continue
		}
		rv := crr.ResourceVersion
		if err := r.complete(ctx, crr, now, msg); err != nil {
			return err
		}
		stale = append(stale, rv)
		logf.FromContext(ctx).Info("completed ContainerRecreateRequest", "crr", crr.Name, "message", msg)
	}

	// 2. The pod's readiness: not ready while a request holds it.
	var holders []string
	for i := range crrs {
		if holdsPod(&crrs[i]) {
			holders = append(holders, crrs[i].Namespace+"/"+crrs[i].Name)
		}
	}
	gated := pod != nil && pod.DeletionTimestamp == nil && hasGate(pod)
	if gated {
		if err := r.setHolders(ctx, pod, holders, now); err != nil {
			return err
		}
	}

	// 3. Tell the node of each new holder when the pod became not ready.
	for i := range crrs {
		crr := &crrs[i]
		if !holdsPod(crr) || crr.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired] != "" {
			continue
		}
		if !gated && pod != nil {
			r.recorder.Eventf(crr, pod, corev1.EventTypeWarning, "NoReadinessGate", "AcquireUnready",
				"pod %s has no %s readiness gate: it stays ready during the unready grace period", pod.Name, ConditionKruisePodReady)
		}
		rv := crr.ResourceVersion
		body := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}}}`,
			rv, v1alpha1.AnnotationCRRUnreadyAcquired, now.UTC().Format(time.RFC3339Nano))
		if err := r.client.Patch(ctx, crr, client.RawPatch(types.MergePatchType, body)); err != nil {
			return err
		}
		stale = append(stale, rv)
	}

	// 4. Completed requests: off the nodes' watch, and gone after their TTL.
	for i := range crrs {
		crr := &crrs[i]
		if crr.DeletionTimestamp != nil || !completed(crr) {
			continue
		}
		if crr.Status.CompletionTime == nil { // a writer that forgot it: the TTL needs it
			rv := crr.ResourceVersion
			crr.Status.CompletionTime = &metav1.Time{Time: now}
			if err := r.client.Status().Update(ctx, crr); err != nil {
				return err
			}
			stale = append(stale, rv)
		}
		if _, ok := crr.Labels[v1alpha1.LabelCRRActive]; ok {
			rv := crr.ResourceVersion
			body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, v1alpha1.LabelCRRActive)
			if err := r.client.Patch(ctx, crr, client.RawPatch(types.MergePatchType, body)); err != nil {
				return client.IgnoreNotFound(err)
			}
			stale = append(stale, rv)
		}
		if ttl := crr.Spec.TTLSecondsAfterFinished; ttl != nil {
			left := crr.Status.CompletionTime.Add(time.Duration(*ttl) * time.Second).Sub(now)
			if left > 0 {
				next.at(left)
				continue
			}
			uid := crr.UID
			if err := r.client.Delete(ctx, crr, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return err
			}
			logf.FromContext(ctx).V(1).Info("deleted ContainerRecreateRequest after its TTL", "crr", crr.Name)
		}
	}

	if len(stale) > 0 && len(crrs) > 0 {
		// One wait covers the common case of one request per pod; more are rare and at worst
		// cost a conflict and a retry.
		cachewait.Until(ctx, r.client, &v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{
			Namespace: crrs[0].Namespace, Name: crrs[0].Name}}, stale...)
	}
	return nil
}

// mustComplete says why the cluster completes crr now, or "" and when to look again.
func (r *reconciler) mustComplete(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, now time.Time, next *requeue) (string, error) {
	if gone(crr, pod) {
		// The cache may not have seen a pod created a moment ago: ask the API server.
		live := &corev1.Pod{}
		err := r.live.Get(ctx, types.NamespacedName{Namespace: crr.Namespace, Name: crr.Spec.PodName}, live)
		if apierrors.IsNotFound(err) {
			live = nil
		} else if err != nil {
			return "", err
		}
		if gone(crr, live) {
			return MessagePodGone, nil
		}
	}
	created := crr.CreationTimestamp.Time
	if d := crr.Spec.ActiveDeadlineSeconds; d != nil {
		left := created.Add(validation.SecondsDuration(*d)).Sub(now) // clamped: never overflows into "past"
		if left <= 0 {
			return fmt.Sprintf("recreating has exceeded the activeDeadlineSeconds (%ds)", *d), nil
		}
		next.at(left)
	}
	if crr.Status.Phase == "" {
		left := created.Add(r.pickup).Sub(now)
		if left <= 0 {
			return fmt.Sprintf("node %s has not picked up the request within %v; is the probeshim node service running there?",
				crr.Labels[v1alpha1.LabelCRRNodeName], r.pickup), nil
		}
		next.at(left)
	}
	return "", nil
}

// gone reports whether the request's pod no longer exists as the instance it was made for.
func gone(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) bool {
	return pod == nil || pod.DeletionTimestamp != nil || string(pod.UID) != crr.Labels[v1alpha1.LabelCRRPodUID]
}

// complete writes the Completed status, with every container not yet done Failed with msg. The
// update carries the resource version read, so a node's write in between makes it conflict and
// the decision is taken again on what the node wrote.
func (r *reconciler) complete(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, now time.Time, msg string) error {
	states := make([]v1alpha1.ContainerRecreateRequestContainerRecreateState, 0, len(crr.Spec.Containers))
	for _, c := range crr.Spec.Containers {
		st := v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: c.Name, Phase: v1alpha1.ContainerRecreateRequestPending}
		for _, s := range crr.Status.ContainerRecreateStates {
			if s.Name == c.Name {
				st = s
			}
		}
		if st.Phase != v1alpha1.ContainerRecreateRequestSucceeded && st.Phase != v1alpha1.ContainerRecreateRequestFailed {
			st.Phase, st.Message = v1alpha1.ContainerRecreateRequestFailed, msg
		}
		states = append(states, st)
	}
	crr.Status.Phase = v1alpha1.ContainerRecreateRequestCompleted
	crr.Status.CompletionTime = &metav1.Time{Time: now}
	crr.Status.Message = msg
	crr.Status.ContainerRecreateStates = states
	return r.client.Status().Update(ctx, crr)
}

func completed(crr *v1alpha1.ContainerRecreateRequest) bool {
	return crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || crr.Status.CompletionTime != nil
}

// holdsPod reports whether crr keeps its pod not ready: it asked for an unready grace, its node
// has started on it (or the pod was already made not ready for it), and it is not done.
func holdsPod(crr *v1alpha1.ContainerRecreateRequest) bool {
	if crr.DeletionTimestamp != nil || completed(crr) || crr.Spec.Strategy == nil || crr.Spec.Strategy.UnreadyGracePeriodSeconds == nil {
		return false
	}
	return crr.Status.Phase == v1alpha1.ContainerRecreateRequestRecreating || crr.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired] != ""
}

// holder is one entry of the KruisePodReady condition's message, in OpenKruise's format: the
// condition is False while the list is not empty, so several users can hold a pod not ready.
type holder struct {
	UserAgent string `json:"userAgent"`
	Key       string `json:"key"`
}

// setHolders makes this controller's holders of pod's KruisePodReady condition exactly keys,
// leaving other users' holders alone.
func (r *reconciler) setHolders(ctx context.Context, pod *corev1.Pod, keys []string, now time.Time) error {
	cond := podCondition(pod)
	var current []holder
	if cond != nil && cond.Message != "" {
		_ = json.Unmarshal([]byte(cond.Message), &current) // not ours, or not a list: treat as empty
	}
	var want []holder
	mine := 0
	for _, h := range current {
		if h.UserAgent != readinessUserAgent {
			want = append(want, h)
		} else {
			mine++
		}
	}
	if cond == nil && len(keys) == 0 {
		return nil // never held by us; cluster/controller/podready (or OpenKruise) creates it True
	}
	for _, k := range keys {
		want = append(want, holder{UserAgent: readinessUserAgent, Key: k})
	}
	slices.SortFunc(want, func(a, b holder) int { return cmp.Or(cmp.Compare(a.UserAgent, b.UserAgent), cmp.Compare(a.Key, b.Key)) })
	status := corev1.ConditionTrue
	if len(want) > 0 {
		status = corev1.ConditionFalse
	}
	msg := ""
	if len(want) > 0 {
		b, err := json.Marshal(want)
		if err != nil {
			return err
		}
		msg = string(b)
	}
	if cond != nil && cond.Status == status && (cond.Message == msg || (mine == 0 && len(keys) == 0)) {
		return nil
	}
	next := corev1.PodCondition{Type: ConditionKruisePodReady, Status: status, Message: msg,
		LastTransitionTime: metav1.Time{Time: now}}
	if cond != nil && cond.Status == status {
		next.LastTransitionTime = cond.LastTransitionTime
	}
	body, err := json.Marshal(map[string]any{
		// The holder list is read, changed and written: another user's write in between must
		// conflict rather than be lost.
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		// A map, not a PodCondition: an empty message must be sent to clear the old one.
		"status": map[string]any{"conditions": []map[string]any{{"type": next.Type, "status": next.Status,
			"message": next.Message, "lastTransitionTime": next.LastTransitionTime}}},
	})
	if err != nil {
		return err
	}
	rv := pod.ResourceVersion
	if err := r.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, body)); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("set pod readiness gate", "condition", ConditionKruisePodReady, "status", status, "holders", msg)
	cachewait.Until(ctx, r.client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, rv)
	return nil
}

func podCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == ConditionKruisePodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func hasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == ConditionKruisePodReady {
			return true
		}
	}
	return false
}

// requeue keeps the earliest time to look again.
type requeue struct{ d time.Duration }

func (q *requeue) at(d time.Duration) {
	if d > 0 && (q.d == 0 || d < q.d) {
		q.d = d
	}
}

func (q *requeue) after() time.Duration {
	if q.d == 0 {
		return 0
	}
	return q.d + 100*time.Millisecond // land after the deadline, not on it
}
