// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package heartbeat watches the node services' heartbeats and says which are silent.
//
// Each node service renews a coordination.k8s.io Lease named after its node in LeaseNamespace
// while it is healthy (probing, watching and able to write). Per node, this controller compares
// the Lease's renewTime with the grace and records the outcome on the node's NodePodProbe
// (v1alpha1.AnnotationNodeService and AnnotationNodeServiceSince), only when it changes. The
// pod status controller and the liveness decider read it from there: a silent node's results are
// Unknown, and its liveness restarts are held. Being on the object they already watch, the state
// survives a leader change, and `kubectl get npp` shows it. A node whose service is live carries
// the label v1alpha1.LabelNodeServed, by which pods opted in to enhanced liveness are scheduled.
//
// A missing Lease means silence only for a node known to heartbeat (recorded Live or Silent): once
// the grace has passed since this controller first saw it missing, its results are Unknown, so a
// Lease deleted by hand or by a broken node has a grace to come back. A node that never renewed a
// Lease keeps NoLease and its results count as they are: older node services renew none. (A node
// service on the kubelet's identity, which NodeRestriction keeps out of LeaseNamespace, has its
// Lease renewed by the deployment's heartbeat relay, cluster/leaserelay: the same Lease to this
// controller.)
//
// The reconcile is level-based: it runs when a Lease appears, disappears or is renewed after it
// had expired, when a NodePodProbe gains or loses results or its record is changed, when a Node is
// deleted, and at the moment a Lease would expire; a renewal in time wakes nothing.
package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
)

const (
	// ControllerName names the controller in logs, metrics and events.
	ControllerName = "node-service-heartbeat"
	// LeaseNamespace holds one Lease per node, named after it, renewed by its node service.
	LeaseNamespace = "probeshim-node-lease"
	// DefaultGrace is how old a Lease may be before its node service counts as silent: four
	// renew periods of 10 s.
	DefaultGrace = 40 * time.Second
)

// Event reasons on the pods of a node whose node service turns silent or comes back.
const (
	EventReasonSilent  = "NodeServiceSilent"
	EventReasonResumed = "NodeServiceResumed"
)

// The Leases are read and deleted through a Role in LeaseNamespace (cluster/deploy/rbac.yaml).
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodepodprobes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options configure the controller.
type Options struct {
	// Grace is how old a Lease may be (DefaultGrace when zero).
	Grace time.Duration
	// Registry gets the gauge probeshim_node_service_silent (controller-runtime's by default).
	Registry prometheus.Registerer
	// Clock is for tests; the real clock by default.
	Clock clock.PassiveClock
	// Hold, while it says why, keeps the controller from recording on NodePodProbes (another
	// actor, OpenKruise, owns them); Leases are still looked after.
	Hold hold.Func
}

// CacheOptions restrict the manager's cache of Leases to LeaseNamespace, the only namespace the
// deployment may read them in.
func CacheOptions() cache.ByObject {
	return cache.ByObject{Namespaces: map[string]cache.Config{LeaseNamespace: {}}}
}

// SetupWithManager adds the controller to mgr; it runs on the elected leader only.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.NodePodProbe{}, nameIndex,
		func(o client.Object) []string { return []string{o.GetName()} }); err != nil {
		return fmt.Errorf("indexing NodePodProbes by name: %w", err)
	}
	silent := newSilent()
	if err := o.Registry.Register(silent); err != nil {
		return fmt.Errorf("registering probeshim_node_service_silent: %w", err)
	}
	r := &reconciler{hold: o.Hold, client: mgr.GetClient(), recorder: mgr.GetEventRecorder(ControllerName),
		clock: o.Clock, grace: o.Grace, silent: silent, missing: map[string]time.Time{}}
	if err := setupPending(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			// Its coming and going matter, and its served label (someone else changing it is put right).
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetLabels()[v1alpha1.LabelNodeServed] != e.ObjectNew.GetLabels()[v1alpha1.LabelNodeServed]
			},
		})).
		// Keyed by the node's name alone, like the Node and the NodePodProbe: one reconcile per node.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(leaseToNode), builder.WithPredicates(r.leaseChanged())).
		Watches(&v1alpha1.NodePodProbe{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(nppChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

func newSilent() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "probeshim_node_service_silent",
		Help: "1 while the node service of the node has not renewed its Lease within the grace (its results count as Unknown, its liveness restarts are held), 0 while it has.",
	}, []string{"node"})
}

// RegisterMetrics registers the controller's gauge on reg as SetupWithManager does, on a collector
// of its own: for the metrics reference (hack/metricsdoc).
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(newSilent()) }

// nameIndex indexes NodePodProbes by name, for a read of the cached object without a copy.
const nameIndex = "probeshim.heartbeat.name"

type reconciler struct {
	hold     hold.Func
	client   client.Client
	recorder events.EventRecorder
	clock    clock.PassiveClock
	grace    time.Duration
	silent   *prometheus.GaugeVec

	mu sync.Mutex
	// missing is when each node was first seen without a Lease: from then on the grace counts down.
	missing map[string]time.Time
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := r.clock.Now()
	name := req.Name
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	} else if err != nil || node.DeletionTimestamp != nil {
		// Like the NodePodProbe: the owner reference the node service sets lets the garbage
		// collector do this too, but it may be missing (a node service that could not read its
		// Node), and the Lease of a gone node must not outlive it.
		r.silent.DeleteLabelValues(name)
		r.missingSince(name, false, now)
		return reconcile.Result{}, r.deleteLease(ctx, name)
	}

	var renewed *time.Time
	late := "" // the Lease's probes-late note
	lease := &coordinationv1.Lease{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: LeaseNamespace, Name: name}, lease); err == nil {
		t := renewTime(lease)
		renewed = &t
		late = lease.Annotations[v1alpha1.AnnotationProbesLate]
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	// The cached object itself, read only (record patches through an object of its own): a Get would
	// deep-copy the node's whole NodePodProbe once per node and grace.
	var list v1alpha1.NodePodProbeList
	if err := r.client.List(ctx, &list, client.MatchingFields{nameIndex: name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	var npp *v1alpha1.NodePodProbe
	if len(list.Items) > 0 && list.Items[0].DeletionTimestamp == nil {
		npp = &list.Items[0]
	}

	var silentSince time.Time // as recorded: a Lease going away does not end a silence
	heartbeats := false       // recorded Live or Silent: the node service is known to renew
	if npp != nil {
		if since, silent := v1alpha1.NodeServiceSilence(npp); silent {
			silentSince = since
		}
		rec := npp.Annotations[v1alpha1.AnnotationNodeService]
		heartbeats = rec == v1alpha1.NodeServiceLive || rec == v1alpha1.NodeServiceSilent
	}
	st, recheck := assess(renewed, npp != nil && hasResults(npp), heartbeats,
		r.missingSince(name, renewed == nil, now), silentSince, now, r.grace)
	if st.value == v1alpha1.NodeServiceSilent {
		r.silent.WithLabelValues(name).Set(1)
	} else {
		r.silent.WithLabelValues(name).Set(0)
	}
	if err := r.labelServed(ctx, node, st.value == v1alpha1.NodeServiceLive); err != nil {
		return reconcile.Result{}, err
	}
	if st.value != v1alpha1.NodeServiceLive {
		late = "" // a silent node's note is as stale as its results
	}
	if npp != nil && (r.hold == nil || r.hold() == "") {
		if err := r.record(ctx, npp, st, late); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: recheck}, nil
}

// labelServed sets v1alpha1.LabelNodeServed on node while its node service is live and removes
// it otherwise, when it is not so already: the scheduler places pods opted in to enhanced
// liveness by it.
func (r *reconciler) labelServed(ctx context.Context, node *corev1.Node, served bool) error {
	value, has := node.Labels[v1alpha1.LabelNodeServed]
	if served == has && (!served || value == "true") {
		return nil
	}
	var v any // nil: a merge patch removes the label
	if served {
		v = "true"
	}
	body := map[string]any{"metadata": map[string]any{"labels": map[string]any{v1alpha1.LabelNodeServed: v}}}
	if err := r.client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}, client.RawPatch(types.MergePatchType, mustJSON(body))); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("labelling node %s %s=%v: %w", node.Name, v1alpha1.LabelNodeServed, served, err)
	}
	if served {
		logf.FromContext(ctx).Info("node served: pods opted in to enhanced liveness may be scheduled here", "label", v1alpha1.LabelNodeServed)
	} else {
		logf.FromContext(ctx).Info("node not served: pods opted in to enhanced liveness are not scheduled here", "label", v1alpha1.LabelNodeServed)
	}
	return nil
}

// missingSince is when node was first seen without a Lease, while missing; it forgets the node
// once its Lease is there.
func (r *reconciler) missingSince(node string, missing bool, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !missing {
		delete(r.missing, node)
		return time.Time{}
	}
	since, ok := r.missing[node]
	if !ok {
		since = now
		r.missing[node] = now
	}
	return since
}

// state is a node service's heartbeat state and since when.
type state struct {
	value string // v1alpha1.NodeServiceLive, NodeServiceSilent or NodeServiceNoLease
	since time.Time
}

// assess is the heartbeat state at now of a node service that last renewed its Lease at renewed
// (nil: no Lease, missing since missing; heartbeats: known to renew one; silent since silentSince
// when that is recorded), and how long until it must be assessed again without any other change
// (0: only a change brings it back).
func assess(renewed *time.Time, results, heartbeats bool, missing, silentSince, now time.Time, grace time.Duration) (state, time.Duration) {
	switch {
	case renewed != nil:
		if left := renewed.Add(grace).Sub(now); left >= 0 {
			// A moment past the deadline, so that the next look sees it passed.
			return state{v1alpha1.NodeServiceLive, *renewed}, left + time.Millisecond
		}
		return state{v1alpha1.NodeServiceSilent, *renewed}, 0
	case !results && !heartbeats:
		// Nothing a silence would make stale; the first result or Lease brings it back.
		return state{value: v1alpha1.NodeServiceNoLease}, 0
	case !silentSince.IsZero():
		// Only a renewal ends a silence; a stale Lease deleted (by hand, or by the node) does not.
		return state{v1alpha1.NodeServiceSilent, silentSince}, 0
	case !heartbeats:
		// Never renewed one (an older node service, or the kubelet's identity): not expected to.
		return state{value: v1alpha1.NodeServiceNoLease}, 0
	}
	if left := missing.Add(grace).Sub(now); left >= 0 {
		// Still Live, as recorded, so that its going missing is not forgotten.
		return state{value: v1alpha1.NodeServiceLive}, left + time.Millisecond
	}
	return state{v1alpha1.NodeServiceSilent, missing}, 0
}

// renewTime is the Lease's last renewal: renewTime, else acquireTime, else its creation.
func renewTime(l *coordinationv1.Lease) time.Time {
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

func hasResults(npp *v1alpha1.NodePodProbe) bool { return len(npp.Status.PodProbeStatuses) > 0 }

// record writes st on npp when it changed: its value, and since when (for Live the renewal that
// brought the node back: the time of a transition, not of every renewal, so a renewal writes
// nothing), and the Lease's probes-late note. A change between silent and not is told on each of
// the node's pods.
func (r *reconciler) record(ctx context.Context, npp *v1alpha1.NodePodProbe, st state, late string) error {
	prev := npp.Annotations[v1alpha1.AnnotationNodeService]
	since := ""
	switch {
	case st.value == v1alpha1.NodeServiceLive && prev == v1alpha1.NodeServiceLive:
		since = npp.Annotations[v1alpha1.AnnotationNodeServiceSince] // live all along
	case !st.since.IsZero():
		since = st.since.UTC().Format(time.RFC3339)
	}
	late = v1alpha1.TruncateProbesLate(late) // written by the node: bounded here too
	wasLate := npp.Annotations[v1alpha1.AnnotationProbesLate]
	if prev == st.value && npp.Annotations[v1alpha1.AnnotationNodeServiceSince] == since && wasLate == late {
		return nil
	}
	rv := npp.ResourceVersion
	orNull := func(s string) any {
		if s == "" {
			return nil // merge patch: removes the annotation
		}
		return s
	}
	body := map[string]any{"metadata": map[string]any{"uid": npp.UID, "annotations": map[string]any{
		v1alpha1.AnnotationNodeService: st.value, v1alpha1.AnnotationNodeServiceSince: orNull(since),
		v1alpha1.AnnotationProbesLate: orNull(late)}}}
	if err := r.client.Patch(ctx, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: npp.Name}}, client.RawPatch(types.MergePatchType, mustJSON(body))); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile
		}
		return fmt.Errorf("recording the node service's heartbeat state on NodePodProbe %s: %w", npp.Name, err)
	}
	// The next reconcile must not see the record as it was and write it again.
	cachewait.Until(ctx, r.client, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: npp.Name}}, rv)
	logger := logf.FromContext(ctx)
	switch {
	case late != "" && wasLate == "":
		logger.Info("the node's probes start late: its results are older than their periods say", "probesLate", late)
	case late == "" && wasLate != "":
		logger.Info("the node's probes start on time again")
	}
	wasSilent, isSilent := prev == v1alpha1.NodeServiceSilent, st.value == v1alpha1.NodeServiceSilent
	if wasSilent == isSilent {
		return nil
	}
	if isSilent {
		logger.Info("node service silent: its results count as Unknown", "since", since, "grace", r.grace)
	} else {
		logger.Info("node service renews its heartbeat again", "state", st.value)
	}
	r.tellPods(npp, isSilent, st.since)
	return nil
}

// tellPods records an event on each pod with probes in npp.
func (r *reconciler) tellPods(npp *v1alpha1.NodePodProbe, silent bool, since time.Time) {
	seen := map[string]bool{}
	for _, pp := range npp.Spec.PodProbes {
		if seen[pp.UID] {
			continue
		}
		seen[pp.UID] = true
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pp.Namespace, Name: pp.Name, UID: types.UID(pp.UID)}}
		if silent {
			r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonSilent, "Heartbeat",
				"%s (no Lease renewal within %s): the pod's probe results count as Unknown and its liveness restarts are held",
				v1alpha1.SilentMessage(npp.Name, since), r.grace)
		} else {
			r.recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventReasonResumed, "Heartbeat",
				"the probeshim node service on node %s renews its heartbeat again: the pod's probe results are current", npp.Name)
		}
	}
}

func (r *reconciler) deleteLease(ctx context.Context, name string) error {
	lease := &coordinationv1.Lease{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: LeaseNamespace, Name: name}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the node service Lease of deleted node %s: %w", name, err)
	}
	logf.FromContext(ctx).Info("deleted the node service Lease of a deleted node")
	return nil
}

func leaseToNode(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
}

// leaseChanged passes the Leases of LeaseNamespace that appear or go, the renewals of a Lease
// that had expired (the node service is back) and changes of its probes-late note; a renewal in
// time changes nothing else, and the
// reconcile already waits for the moment the Lease would expire.
func (r *reconciler) leaseChanged() predicate.Predicate {
	inNamespace := func(o client.Object) bool { return o.GetNamespace() == LeaseNamespace }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return inNamespace(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return inNamespace(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*coordinationv1.Lease)
			cur, ok2 := e.ObjectNew.(*coordinationv1.Lease)
			if !ok1 || !ok2 || !inNamespace(cur) {
				return false
			}
			return !renewTime(old).Add(r.grace).After(r.clock.Now()) || renewTime(cur).Before(renewTime(old)) ||
				old.Annotations[v1alpha1.AnnotationProbesLate] != cur.Annotations[v1alpha1.AnnotationProbesLate]
		},
	}
}

// nppChanged passes NodePodProbes that appear, gain or lose their results, or whose heartbeat
// record changed (anyone but this controller changing it is put right).
func nppChanged() predicate.Predicate {
	return predicate.Funcs{
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*v1alpha1.NodePodProbe)
			cur, ok2 := e.ObjectNew.(*v1alpha1.NodePodProbe)
			if !ok1 || !ok2 {
				return false
			}
			return hasResults(old) != hasResults(cur) ||
				old.Annotations[v1alpha1.AnnotationNodeService] != cur.Annotations[v1alpha1.AnnotationNodeService] ||
				old.Annotations[v1alpha1.AnnotationNodeServiceSince] != cur.Annotations[v1alpha1.AnnotationNodeServiceSince] ||
				old.Annotations[v1alpha1.AnnotationProbesLate] != cur.Annotations[v1alpha1.AnnotationProbesLate]
		},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings only
	}
	return b
}
