// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package podstatus carries PodProbeMarker probe results from NodePodProbe status to the pods:
// the probe's pod condition (Succeeded True, Failed False, Unknown Unknown) and the labels and
// annotations of its markerPolicy. While the node service of the pod's node is silent (its
// NodePodProbe says so, see package heartbeat) every result counts as Unknown: the condition says
// why and since when, and the markerPolicy's marks go unless the marker keeps them
// (v1alpha1.AnnotationOnNodeServiceSilent). A marker in dry run (v1alpha1.AnnotationDryRun) writes
// nothing on pods. It reconciles per pod and is level-based: the pod's marks are
// recomputed from its NodePodProbe entry and the markers, compared with the pod, and only the
// difference is written. What it set is recorded on the pod (RecordAnnotation), so that when a
// probe or a marker goes away exactly that is removed.
//
// A change costs at most two writes, because labels and annotations live in the pod object and
// conditions in its status subresource: a merge patch of the changed metadata keys, then a
// strategic merge patch of the changed conditions; each is sent only when it has something in it.
package podstatus

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "podprobemarker-podstatus"

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodepodprobes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=podprobemarkers,verbs=get;list;watch

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers int
	hold    hold.Func
}

// WithHold makes the controller stand aside while f says why (another actor does the work).
func WithHold(f hold.Func) Option { return func(o *options) { o.hold = f } }

// WithWorkers sets how many pods are reconciled at once (default 4).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// SetupWithManager adds the controller to mgr; it only runs on the elected leader.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{workers: 4}
	for _, opt := range opts {
		opt(&o)
	}
	c := mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Pod{}, builder.WithPredicates(podMarksChanged())).
		Watches(&v1alpha1.NodePodProbe{}, nppHandler()).
		Watches(&v1alpha1.PodProbeMarker{}, handler.EnqueueRequestsFromMapFunc(markerToPods(c)),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, onSilentChanged(), dryRunChanged()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(&reconciler{hold: o.hold, client: c})
}

type reconciler struct {
	hold   hold.Func
	client client.Client
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // going away: not worth a write
	}
	results, err := r.results(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	ch := plan(pod, wanted(results))
	if ch.empty() {
		return reconcile.Result{}, nil
	}
	uid := string(pod.UID)
	seen := []string{pod.ResourceVersion} // versions older than what this reconcile leaves behind
	// Metadata first: it carries the record, which must cover a condition before it is set.
	if body := ch.metadataPatch(uid); body != nil {
		if err := r.client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, body)); err != nil {
			return reconcile.Result{}, ignoreGone(fmt.Errorf("patching pod labels/annotations: %w", err))
		}
		seen = append(seen, pod.ResourceVersion)
	}
	if body := ch.statusPatch(uid); body != nil {
		if err := r.client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, body)); err != nil {
			return reconcile.Result{}, ignoreGone(fmt.Errorf("patching pod conditions: %w", err))
		}
	}
	// The next reconcile of this pod must not plan from a version before these writes.
	seen = slices.DeleteFunc(seen, func(rv string) bool { return rv == pod.ResourceVersion })
	cachewait.Until(ctx, r.client, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, seen...)
	logf.FromContext(ctx).V(1).Info("updated pod probe marks", "labels", len(ch.labels),
		"annotations", len(ch.annotations), "conditions", len(ch.setConditions)+len(ch.removeConditions))
	return reconcile.Result{}, nil
}

// ignoreGone drops the error of a pod deleted meanwhile. A pod recreated under the same name
// refuses the patch (its metadata.uid differs, and uid is immutable): retried, the reconcile
// reads the new pod from the cache.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// results collects the states of the pod's marker probes: those in its NodePodProbe status
// whose probe is still in the spec (the status may lag behind it) and still in a live marker.
func (r *reconciler) results(ctx context.Context, pod *corev1.Pod) ([]result, error) {
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	npp := &v1alpha1.NodePodProbe{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, npp); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	uid := string(pod.UID)
	inSpec := map[string]bool{}
	for _, pp := range npp.Spec.PodProbes {
		if pp.UID == uid {
			for _, p := range pp.Probes {
				inSpec[p.Name] = true
			}
		}
	}
	if len(inSpec) == 0 {
		return nil, nil
	}
	silentSince, silent := v1alpha1.NodeServiceSilence(npp)
	markers := map[string]*v1alpha1.PodProbeMarker{}
	var out []result
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.UID != uid {
			continue
		}
		for _, st := range ps.ProbeStates {
			mName, pName, ok := v1alpha1.SplitProbeName(st.Name)
			if !ok || !inSpec[st.Name] {
				continue
			}
			m, seen := markers[mName]
			if !seen {
				m = &v1alpha1.PodProbeMarker{}
				if err := r.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: mName}, m); err != nil {
					if !apierrors.IsNotFound(err) {
						return nil, err
					}
					m = nil
				} else if m.DeletionTimestamp != nil || v1alpha1.DryRun(m) {
					// A marker in dry run writes nothing on pods: its results count only in
					// NodePodProbe status and its own counts. What it wrote while live goes, as
					// for a deleted marker.
					m = nil
				}
				markers[mName] = m
			}
			if m == nil {
				continue
			}
			for i := range m.Spec.Probes {
				if m.Spec.Probes[i].Name == pName {
					r := result{name: st.Name, probe: &m.Spec.Probes[i], state: st, marks: st.State}
					if silent {
						r.silence(pod.Spec.NodeName, silentSince, v1alpha1.KeepsMarksWhenSilent(m))
					}
					out = append(out, r)
					break
				}
			}
		}
	}
	return out, nil
}

// podMarksChanged passes pod creations and the updates that touch what this controller writes or
// reads: labels, annotations, conditions, node. Deletions need no work.
func podMarksChanged() predicate.Predicate {
	return predicate.Funcs{
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*corev1.Pod)
			cur, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			return old.Spec.NodeName != cur.Spec.NodeName || !maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
				!equality.Semantic.DeepEqual(old.Status.Conditions, cur.Status.Conditions)
		},
	}
}

// onSilentChanged passes marker updates that change what happens to its marks while a node
// service is silent (an annotation: no new generation).
func onSilentChanged() predicate.Predicate {
	return nppspec.UpdatesWhere(func(old, cur client.Object) bool {
		return v1alpha1.KeepsMarksWhenSilent(old) != v1alpha1.KeepsMarksWhenSilent(cur)
	})
}

// dryRunChanged passes marker updates that flip its dry run (an annotation: no new generation).
func dryRunChanged() predicate.Predicate {
	return nppspec.UpdatesWhere(func(old, cur client.Object) bool {
		return v1alpha1.DryRun(old) != v1alpha1.DryRun(cur)
	})
}

// markerToPods maps a marker to the pods of its namespace its selector matches (the selector is
// immutable, so these are the pods it can have marked; pods whose labels changed since are
// reached through their NodePodProbe entries instead).
func markerToPods(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		m := o.(*v1alpha1.PodProbeMarker)
		var pods corev1.PodList // read-only view of the cache
		if err := c.List(ctx, &pods, client.InNamespace(m.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		sel := nppspec.MarkerSelector(m)
		for i := range pods.Items {
			if sel.Matches(labels.Set(pods.Items[i].Labels)) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
			}
		}
		return reqs
	}
}

// podView is what this controller reads of one pod's NodePodProbe entries.
type podView struct {
	key    types.NamespacedName
	probes []string                       // probe names in the spec
	states []v1alpha1.ContainerProbeState // status, sorted by name
}

func (v *podView) equal(o *podView) bool {
	if o == nil || v.key != o.key || !slices.Equal(v.probes, o.probes) || len(v.states) != len(o.states) {
		return false
	}
	for i := range v.states {
		a, b := &v.states[i], &o.states[i]
		if a.Name != b.Name || a.State != b.State || a.Message != b.Message || !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
			return false
		}
	}
	return true
}

func podViews(npp *v1alpha1.NodePodProbe) map[string]*podView {
	views := map[string]*podView{}
	view := func(uid, ns, name string) *podView {
		v, ok := views[uid]
		if !ok {
			v = &podView{key: types.NamespacedName{Namespace: ns, Name: name}}
			views[uid] = v
		}
		return v
	}
	for _, pp := range npp.Spec.PodProbes {
		v := view(pp.UID, pp.Namespace, pp.Name)
		for _, p := range pp.Probes {
			v.probes = append(v.probes, p.Name)
		}
		slices.Sort(v.probes)
	}
	for _, ps := range npp.Status.PodProbeStatuses {
		v := view(ps.UID, ps.Namespace, ps.Name)
		v.states = append(v.states, ps.ProbeStates...)
		slices.SortFunc(v.states, func(a, b v1alpha1.ContainerProbeState) int { return cmp.Compare(a.Name, b.Name) })
	}
	return views
}

// heartbeatChanged: the node service's heartbeat record on the NodePodProbe changed (see the
// heartbeat controller), which changes every result of the node.
func heartbeatChanged(old, cur *v1alpha1.NodePodProbe) bool {
	oldSince, oldSilent := v1alpha1.NodeServiceSilence(old)
	curSince, curSilent := v1alpha1.NodeServiceSilence(cur)
	return oldSilent != curSilent || !oldSince.Equal(curSince)
}

// nppHandler enqueues the pods whose entries in a NodePodProbe changed: the probe names of the
// spec, or a state, message or transition time in the status; all of its pods when the node
// service's heartbeat record changed. A refresh of lastProbeTime alone enqueues nothing (it would
// change nothing on the pod).
func nppHandler() handler.EventHandler {
	all := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if npp, ok := o.(*v1alpha1.NodePodProbe); ok {
			for _, v := range podViews(npp) {
				q.Add(reconcile.Request{NamespacedName: v.key})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			all(e.Object, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			all(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, ok1 := e.ObjectOld.(*v1alpha1.NodePodProbe)
			cur, ok2 := e.ObjectNew.(*v1alpha1.NodePodProbe)
			if !ok1 || !ok2 {
				return
			}
			if heartbeatChanged(old, cur) {
				all(cur, q) // every result of the node turns Unknown, or current again
				return
			}
			before, after := podViews(old), podViews(cur)
			for uid, v := range after {
				if !v.equal(before[uid]) {
					q.Add(reconcile.Request{NamespacedName: v.key})
				}
			}
			for uid, v := range before {
				if _, ok := after[uid]; !ok {
					q.Add(reconcile.Request{NamespacedName: v.key})
				}
			}
		},
	}
}
