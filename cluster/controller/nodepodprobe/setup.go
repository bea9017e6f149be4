// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package nodepodprobe turns PodProbeMarkers into NodePodProbe work: one NodePodProbe per Ready
// node, holding the probes of every marker for every probeable pod the marker selects on that
// node, with the pod's IP and named ports resolved. It also keeps each marker's status.
//
// The reconcile is per node and level-based: the node's marker entries are recomputed from the
// informer caches (markers and the node's pods) and written only when they differ from the
// NodePodProbe's, as one patch. Markers, pods and nodes only choose which nodes to recompute. So
// removing a probe, deleting a marker, or a pod leaving or changing UID removes exactly its
// entries, with no finalizer: whatever is not wanted is not in the next spec. Probes of the
// enhanced-liveness mapping in the same spec are never touched (see nppspec.Owner).
package nodepodprobe

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
	"github.com/probeshim/probeshim/cluster/internal/readiness"
)

// Names of the controllers, as they appear in logs and metrics.
const (
	ControllerName       = "nodepodprobe"
	StatusControllerName = "podprobemarker-status"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodepodprobes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps.kruise.io,resources=podprobemarkers,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=podprobemarkers/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers int
	pods    *nppspec.PodIndex
	budget  int
	hold    hold.Func
}

// WithHold makes the controller stand aside while f says why (another actor does the work).
func WithHold(f hold.Func) Option { return func(o *options) { o.hold = f } }

// WithPodIndex shares the index of pods by node with the other controllers of the manager
// (default: the controller adds it itself).
func WithPodIndex(idx *nppspec.PodIndex) Option { return func(o *options) { o.pods = idx } }

// WithWorkers sets how many nodes (and markers, for their status) are reconciled at once
// (default 2).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithNodeBudget sets how many bytes the probes of one node may cost in its NodePodProbe
// (default DefaultNodeBudget). Over it, markers of the namespaces over their fair share are left
// out on that node; enhanced liveness probes come first (package liveness keeps them within the budget).
func WithNodeBudget(bytes int) Option { return func(o *options) { o.budget = bytes } }

// SetupWithManager adds the NodePodProbe controller (per node) and the PodProbeMarker status
// controller (per marker) to mgr. Both only run on the elected leader.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{workers: 2, budget: DefaultNodeBudget}
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	if o.pods == nil {
		o.pods = nppspec.NewPodIndex(mgr.GetFieldIndexer())
	}
	if err := o.pods.Ensure(ctx); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.NodePodProbe{}, markerIndex, indexNPPByMarker); err != nil {
		return err
	}
	c := mgr.GetClient()

	left := &budgetBook{}
	changed := make(chan event.GenericEvent, 1024)
	nodes := &nodeReconciler{hold: o.hold, client: c, live: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder(ControllerName),
		budget: o.budget, left: left, changed: changed}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Node{}, builder.WithPredicates(nodeReadyChanged())).
		Watches(&v1alpha1.NodePodProbe{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A container's started flag places or holds the probes of a container with a startup probe.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToNode),
			builder.WithPredicates(predicate.Or(nppspec.PodPlacementChanged(), nppspec.StartedChanged()))).
		Watches(&v1alpha1.PodProbeMarker{}, handler.EnqueueRequestsFromMapFunc(markerToNodes(c)),
			builder.WithPredicates(markerChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(nodes)
	if err != nil {
		return err
	}

	err = ctrl.NewControllerManagedBy(mgr).
		Named(StatusControllerName).
		For(&v1alpha1.PodProbeMarker{}, builder.WithPredicates(markerChanged())).
		Watches(&corev1.Pod{}, delayed(podToMarkers(c), statusDelay),
			builder.WithPredicates(predicate.Or(nppspec.PodPlacementChanged(), nppspec.StartedChanged()))).
		Watches(&v1alpha1.NodePodProbe{}, delayed(nppToMarkers, statusDelay),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A node gaining or losing its node service changes which matched pods are unprobed.
		Watches(&corev1.Node{}, delayed(nodeToMarkers(c), statusDelay), builder.WithPredicates(nodeServedChanged())).
		WatchesRawSource(source.Channel(changed, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(&statusReconciler{hold: o.hold, client: c, left: left})
	if err != nil {
		return err
	}

	// Results change far more often than placement: counted apart, from the NodePodProbes alone,
	// so that a change of results never makes the status controller read the namespace's pods.
	return ctrl.NewControllerManagedBy(mgr).
		Named(ResultsControllerName).
		For(&v1alpha1.PodProbeMarker{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.NodePodProbe{}, delayed(nppToMarkers, statusDelay), builder.WithPredicates(resultsChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(&resultsReconciler{hold: o.hold, client: c})
}

// nodeServedChanged passes node updates that change whether a node service probes the node's pods.
func nodeServedChanged() predicate.Predicate {
	return nppspec.UpdatesWhere(func(o, c client.Object) bool {
		old, ok1 := o.(*corev1.Node)
		cur, ok2 := c.(*corev1.Node)
		return !ok1 || !ok2 || old.Labels[v1alpha1.LabelNodeServed] != cur.Labels[v1alpha1.LabelNodeServed] ||
			virtualNode(old) != virtualNode(cur)
	})
}

// nodeToMarkers maps a node to the markers that match pods on it (through the index of pods by node).
func nodeToMarkers(c client.Client) handler.MapFunc {
	toMarkers := podToMarkers(c)
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.MatchingFields{nppspec.PodNodeIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		seen := map[reconcile.Request]bool{}
		var reqs []reconcile.Request
		for i := range pods.Items {
			for _, req := range toMarkers(ctx, &pods.Items[i]) {
				if !seen[req] {
					seen[req] = true
					reqs = append(reqs, req)
				}
			}
		}
		return reqs
	}
}

// statusDelay is how long a pod or NodePodProbe change waits before the status of its markers is
// recomputed. A recompute reads every pod of the marker's namespace and every NodePodProbe that
// holds the marker, and a marker placed on thousands of nodes sees thousands of such changes in a
// few seconds: the queue keeps one entry per marker, so waiting folds them into one recompute per
// marker and delay instead of one per change (BenchmarkMarkerScale). The marker's own changes are
// not delayed.
const statusDelay = time.Second

// delayed enqueues what fn maps an object to (both objects of an update) after d.
func delayed(fn handler.MapFunc, d time.Duration) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			for _, req := range fn(ctx, o) {
				q.AddAfter(req, d)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}

// markerChanged passes marker creations, deletions, spec changes and changes of the exec-free
// annotation, which changes the NodePodProbe entries without a new generation.
func markerChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld != nil && e.ObjectNew != nil && v1alpha1.ExecFree(e.ObjectOld) != v1alpha1.ExecFree(e.ObjectNew)
		},
	})
}

// nodeReadyChanged passes node creations, deletions and changes of readiness: readiness only
// matters for creating the NodePodProbe.
func nodeReadyChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*corev1.Node)
			cur, ok2 := e.ObjectNew.(*corev1.Node)
			return !ok1 || !ok2 || readiness.Node(old) != readiness.Node(cur)
		},
	}
}

func podToNode(_ context.Context, o client.Object) []reconcile.Request {
	if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
	}
	return nil
}

// The map functions list with UnsafeDisableDeepCopy: they only read the cached objects.

// markerToNodes maps a marker to the nodes that run pods its selector matches and the nodes whose
// NodePodProbe holds its probes (for pods it no longer matches, or after it is deleted).
func markerToNodes(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		m := o.(*v1alpha1.PodProbeMarker)
		nodes := map[string]bool{}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(m.Namespace), client.UnsafeDisableDeepCopy); err == nil {
			sel := nppspec.MarkerSelector(m)
			for i := range pods.Items {
				if n := pods.Items[i].Spec.NodeName; n != "" && sel.Matches(labels.Set(pods.Items[i].Labels)) {
					nodes[n] = true
				}
			}
		}
		var npps v1alpha1.NodePodProbeList
		if err := c.List(ctx, &npps, client.MatchingFields{markerIndex: markerKey(m.Namespace, m.Name)}, client.UnsafeDisableDeepCopy); err == nil {
			for i := range npps.Items {
				nodes[npps.Items[i].Name] = true
			}
		}
		reqs := make([]reconcile.Request, 0, len(nodes))
		for n := range nodes {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
		}
		return reqs
	}
}

// podToMarkers maps a pod to the markers of its namespace whose selector matches it. The map
// function sees the old and the new object of an update, so a marker the pod stops matching is
// found too.
func podToMarkers(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		pod := o.(*corev1.Pod)
		var list v1alpha1.PodProbeMarkerList
		if err := c.List(ctx, &list, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if nppspec.SelectorMatches(&list.Items[i], pod) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	}
}

// nppToMarkers maps a NodePodProbe to the markers whose probes it holds (old and new spec).
func nppToMarkers(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, k := range indexNPPByMarker(o) {
		ns, name, _ := strings.Cut(k, "/")
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	}
	return reqs
}
