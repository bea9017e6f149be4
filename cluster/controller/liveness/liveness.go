// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package liveness places the enhanced liveness probes of pods on their node's NodePodProbe.
//
// A pod opts in with the annotation apps.kruise.io/using-enhanced-liveness: "true"; the mutating
// webhook moved its containers' livenessProbes into apps.kruise.io/container-probe-context when
// the pod was created. Each container gets one NodePodProbe probe named
// "<container>-livenessProbe" (v1alpha1.LivenessProbeName) while the pod is probeable, and loses
// it when the pod goes away. The node service writes the results to the NodePodProbe status,
// where the liveness decider reads them.
//
// The reconcile is per node and level-based, like the PodProbeMarker mapping it shares the
// NodePodProbe with: each owns only its own probe names (see nppspec.Owner), so neither ever
// disturbs the other's entries. The NodePodProbe itself is created and deleted by the
// PodProbeMarker mapping (package nodepodprobe), which must run too.
package liveness

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "enhanced-liveness"

// EventReasonProbeSkipped on a pod: one of its enhanced liveness probes cannot be placed (the
// annotation does not parse, names no container of the pod, or a port name the container does
// not declare).
const EventReasonProbeSkipped = "LivenessProbeSkipped"

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodepodprobes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers int
	budget  int
	pods    *nppspec.PodIndex
	hold    hold.Func
}

// WithNodeBudget sets how many bytes the probes of one node may cost in its NodePodProbe (default
// nppspec.DefaultNodeBudget). Liveness probes come before markers' and stay within it: past it,
// the pods of the namespaces over their fair share lose theirs on that node, with an event.
func WithNodeBudget(bytes int) Option { return func(o *options) { o.budget = bytes } }

// WithHold makes the controller stand aside while f says why (another actor does the work).
func WithHold(f hold.Func) Option { return func(o *options) { o.hold = f } }

// WithPodIndex shares the index of pods by node with the other controllers of the manager
// (default: the controller adds it itself).
func WithPodIndex(idx *nppspec.PodIndex) Option { return func(o *options) { o.pods = idx } }

// WithWorkers sets how many nodes are reconciled at once (default 2).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// SetupWithManager adds the controller to mgr; it only runs on the elected leader.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{workers: 2, budget: nppspec.DefaultNodeBudget}
	for _, opt := range opts {
		opt(&o)
	}
	if o.pods == nil {
		o.pods = nppspec.NewPodIndex(mgr.GetFieldIndexer())
	}
	if err := o.pods.Ensure(context.Background()); err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(unprotectedPods); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return fmt.Errorf("registering probeshim_liveness_unprotected_pods: %w", err)
	}
	r := &reconciler{hold: o.hold, client: mgr.GetClient(), live: mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder(ControllerName), budget: o.budget}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// The spec, and the heartbeat state the deployment records in annotations (a pod's
		// LivenessProtected condition follows it).
		For(&v1alpha1.NodePodProbe{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToNode),
			builder.WithPredicates(optedIn(), predicate.Or(nppspec.PodPlacementChanged(
				v1alpha1.AnnotationUsingEnhancedLiveness, v1alpha1.AnnotationContainerProbeContext), nppspec.StartedChanged()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(r)
}

type reconciler struct {
	hold     hold.Func
	client   client.Client
	live     client.Reader
	recorder events.EventRecorder
	budget   int

	reported nppspec.Reported
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	npp := &v1alpha1.NodePodProbe{}
	if err := r.client.Get(ctx, req.NamespacedName, npp); err != nil || npp.DeletionTimestamp != nil {
		if apierrors.IsNotFound(err) {
			r.reported.Forget(req.Name)
			unprotectedPods.DeleteLabelValues(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err) // created later: its watch brings us back
	}
	pods, err := nppspec.PodsOnNode(ctx, r.client, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	desired, skipped := desiredEntries(pods)
	desired, over := fitBudget(desired, pods, req.Name, r.budget)
	skipped = append(skipped, over...)
	r.report(req.Name, skipped)
	wrote, err := nppspec.Apply(ctx, r.client, r.live, npp, nppspec.LivenessProbes, desired)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if wrote {
		logf.FromContext(ctx).V(1).Info("updated NodePodProbe liveness probes")
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	unprotected, err := r.protect(ctx, npp, pods, skipped)
	if err == nil {
		unprotectedPods.WithLabelValues(req.Name).Set(float64(unprotected))
	}
	return reconcile.Result{}, err
}

// skip is a pod's liveness probe that cannot be placed.
type skip struct {
	pod    *corev1.Pod
	reason string
}

func (s skip) key() string { return string(s.pod.UID) + "/" + s.reason }

// desiredEntries is the liveness part of a node's NodePodProbe spec, in canonical order.
func desiredEntries(pods []corev1.Pod) ([]v1alpha1.PodProbe, []skip) {
	var out []v1alpha1.PodProbe
	var skipped []skip
	for i := range pods {
		pod := &pods[i]
		raw, ok := pod.Annotations[v1alpha1.AnnotationContainerProbeContext]
		if !v1alpha1.UsesEnhancedLiveness(pod) || !ok || !nppspec.Probeable(pod) {
			continue
		}
		if len(raw) > v1alpha1.MaxContainerProbeContextBytes {
			// Admission refuses it; the annotation can be edited after.
			skipped = append(skipped, skip{pod: pod, reason: fmt.Sprintf("annotation %s is %d bytes, over the %d a pod's liveness probes may take in its node's NodePodProbe",
				v1alpha1.AnnotationContainerProbeContext, len(raw), v1alpha1.MaxContainerProbeContextBytes)})
			continue
		}
		probes, err := v1alpha1.ParseContainerProbeContext(raw)
		if err != nil {
			skipped = append(skipped, skip{pod: pod, reason: err.Error()})
			continue
		}
		entry := v1alpha1.PodProbe{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), IP: pod.Status.PodIP}
		for j := range probes {
			name := probes[j].Name
			c := v1alpha1.RestartableContainer(pod, name)
			if c == nil {
				skipped = append(skipped, skip{pod: pod, reason: fmt.Sprintf("annotation %s names container %q, which the pod does not have",
					v1alpha1.AnnotationContainerProbeContext, name)})
				continue
			}
			if nppspec.StartupHeld(pod, c) {
				// The kubelet runs no liveness probe before the container's startup probe has
				// succeeded: the entry comes once the kubelet reports started.
				continue
			}
			probe, err := nppspec.ResolvePorts(&probes[j].LivenessProbe, c)
			if err == nil && probe.Exec != nil {
				// $(VAR) as the kubelet expands it in the probes it runs.
				probe.Exec.Command = nppspec.ExpandCommand(probe.Exec.Command, c.Env)
			}
			if err == nil {
				// The annotation can be edited after the webhook checked it at CREATE.
				err = nppspec.CheckProbe(probe, pod.Status.PodIP, true, field.NewPath("livenessProbe"))
			}
			if err != nil {
				skipped = append(skipped, skip{pod: pod, reason: fmt.Sprintf("liveness probe of container %q: %v", name, err)})
				continue
			}
			entry.Probes = append(entry.Probes, v1alpha1.ContainerProbe{
				Name:          v1alpha1.LivenessProbeName(name),
				ContainerName: name,
				Probe:         v1alpha1.ContainerProbeSpec{Probe: *probe},
			})
		}
		if len(entry.Probes) > 0 {
			out = append(out, entry)
		}
	}
	return nppspec.Canonical(out), skipped
}

// fitBudget keeps a node's liveness entries within its budget: each pod is one load, and past the
// budget the pods of the namespaces over their fair share are left out, their largest first (max-min
// fairness, as for markers), so that no tenant's liveness crowds out another's and the object
// always fits. What it leaves out is reported on each pod.
func fitBudget(entries []v1alpha1.PodProbe, pods []corev1.Pod, node string, budget int) ([]v1alpha1.PodProbe, []skip) {
	loads := make([]nppspec.Load, len(entries))
	for i := range entries {
		loads[i] = nppspec.Load{Namespace: entries[i].Namespace, Name: entries[i].Name,
			Bytes: nppspec.EntriesCost(entries[i:i+1], nppspec.LivenessProbes)}
	}
	out := nppspec.Fit(loads, budget)
	if len(out) == 0 {
		return entries, nil
	}
	drop := map[string]nppspec.LeftOut{}
	for _, l := range out {
		drop[l.Key()] = l
	}
	byKey := map[string]*corev1.Pod{}
	for i := range pods {
		byKey[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
	}
	kept := entries[:0:0]
	var skipped []skip
	for _, e := range entries {
		l, ok := drop[e.Namespace+"/"+e.Name]
		if !ok {
			kept = append(kept, e)
			continue
		}
		if p := byKey[l.Key()]; p != nil {
			skipped = append(skipped, skip{pod: p, reason: fmt.Sprintf("node %s has no room for it: this pod's liveness probes would cost %d bytes "+
				"of the node's NodePodProbe, and namespace %s asks for %d bytes of liveness there, over its fair share of %d of the node budget "+
				"of %d bytes; the pod runs without liveness on this node: move it, use smaller probes, or ask the administrator to raise --node-probe-budget",
				node, l.Bytes, l.Namespace, l.NSBytes, l.Share, budget)})
		}
	}
	return kept, skipped
}

// report records an event on the pod for each skip not reported before for this node.
func (r *reconciler) report(node string, skipped []skip) {
	keys := make([]string, len(skipped))
	for i, s := range skipped {
		keys[i] = s.key()
	}
	for _, i := range r.reported.Fresh(node, keys) {
		r.recorder.Eventf(skipped[i].pod, nil, corev1.EventTypeWarning, EventReasonProbeSkipped, "PlaceProbe",
			"enhanced liveness probe not placed: %s", skipped[i].reason)
	}
}

// optedIn passes events of pods that use, or used before an update, the enhanced liveness probe.
func optedIn() predicate.Predicate {
	is := func(o client.Object) bool { return v1alpha1.UsesEnhancedLiveness(o) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return is(e.ObjectOld) || is(e.ObjectNew) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
	}
}

func podToNode(_ context.Context, o client.Object) []reconcile.Request {
	if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
	}
	return nil
}
