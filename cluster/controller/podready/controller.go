// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package podready opens the KruisePodReady readiness gate: a pod that carries the gate and has
// no KruisePodReady condition gets it, True. The gate is added at admission (the opt-in, see
// cluster/webhook.ReadinessGateMutator), by OpenKruise's pod webhook, or by the pod's author;
// without the condition the pod would never become ready.
//
// Ownership: this controller only creates a missing condition, and only True; it never changes
// one that exists. Who holds the pod not ready is the condition's holder list, which the
// ContainerRecreateRequest lifecycle controller (cluster/controller/crr) edits for its own
// requests. OpenKruise's kruise-manager does exactly the same for pods with the gate (its
// pod-readiness controller creates the missing condition True), so the two never undo each
// other: whichever writes first wins, and the other's write conflicts on the resource version
// and then finds the condition there. So it needs no hold while OpenKruise is live.
package podready

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "kruisepodready"

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers int
	clock   clock.PassiveClock
}

// WithWorkers sets how many pods are reconciled at once (default 2).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithClock sets the clock of the condition's lastTransitionTime (tests).
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// SetupWithManager adds the controller to mgr; it runs only on the elected leader.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{workers: 2, clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	r := &reconciler{client: mgr.GetClient(), clock: o.clock}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			pod, ok := o.(*corev1.Pod)
			return ok && needsCondition(pod)
		}), predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(r)
}

type reconciler struct {
	client client.Client
	clock  clock.PassiveClock
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsCondition(pod) {
		return reconcile.Result{}, nil
	}
	body, err := json.Marshal(map[string]any{
		// Only if nobody wrote the pod since we read it: a condition added in between (by
		// OpenKruise, or a holder that made it False) must never be replaced by ours.
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status": map[string]any{"conditions": []corev1.PodCondition{{Type: v1alpha1.PodConditionKruisePodReady,
			Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(r.clock.Now().Truncate(time.Second))}}},
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	rv := pod.ResourceVersion
	err = r.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, body))
	if apierrors.IsConflict(err) {
		// Look again at what the other writer left.
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // SA1019: retry now, through the rate limiter
	}
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	logf.FromContext(ctx).Info("opened the readiness gate", "condition", v1alpha1.PodConditionKruisePodReady)
	cachewait.Until(ctx, r.client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, rv)
	return reconcile.Result{}, nil
}

// needsCondition reports whether pod carries the KruisePodReady gate without the condition (and
// is not being deleted: a terminating pod is on its way out of every endpoint anyway).
func needsCondition(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1alpha1.PodConditionKruisePodReady {
			return false
		}
	}
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1alpha1.PodConditionKruisePodReady {
			return true
		}
	}
	return false
}
