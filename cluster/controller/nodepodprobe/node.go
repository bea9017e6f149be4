// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
	"github.com/probeshim/probeshim/cluster/internal/readiness"
)

// Event reasons on a PodProbeMarker.
const (
	// EventReasonProbeSkipped: a probe of the marker cannot run in a selected pod (no such
	// container, or a port name the container does not declare); the other probes still run.
	EventReasonProbeSkipped = "ProbeSkipped"
	// EventReasonNodeBudgetExceeded: a node leaves the marker's probes out because its namespace
	// asks for more than its share of the node's NodePodProbe budget.
	EventReasonNodeBudgetExceeded = "NodeBudgetExceeded"
)

// nodeReconciler keeps, for one node (the request name), a NodePodProbe that exists while the
// node does (created once the node is Ready) and whose marker probes are exactly those the
// markers ask for on the node's probeable pods.
type nodeReconciler struct {
	hold     hold.Func
	client   client.Client
	live     client.Reader // uncached, to re-read after a conflict
	recorder events.EventRecorder

	// budget is the most the probes of one node may cost in its NodePodProbe (see probeCost).
	budget int
	// left records the markers each node leaves out; changed tells the status controller.
	left    *budgetBook
	changed chan<- event.GenericEvent

	reported     nppspec.Reported
	reportedLeft nppspec.Reported
}

func (r *nodeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	name := req.Name
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	} else if err != nil || node.DeletionTimestamp != nil {
		// The owner reference lets the garbage collector do this too; deleting here makes it
		// immediate and independent of the collector.
		r.reported.Forget(name)
		r.reportedLeft.Forget(name)
		if err := r.notify(ctx, r.left.set(name, nil)); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.deleteNPP(ctx, name)
	}

	npp := &v1alpha1.NodePodProbe{}
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, npp)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	exists := err == nil && npp.DeletionTimestamp == nil
	if !exists && (!readiness.Node(node) || err == nil) {
		return reconcile.Result{}, nil // not Ready yet, or being deleted: its watch brings us back
	}

	desired, skipped, err := r.desired(ctx, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	r.report(name, skipped)
	// Enhanced liveness probes come first: they are what restarts a hung container, and one
	// tenant's markers must not starve another tenant's liveness. Only marker probes are left out.
	liveness := 0
	if exists {
		liveness = nppspec.EntriesCost(npp.Spec.PodProbes, nppspec.LivenessProbes)
	}
	out := nppspec.Fit(markerLoads(desired), r.budget-liveness)
	desired = without(desired, out)
	if err := r.reportLeftOut(ctx, name, out); err != nil {
		return reconcile.Result{}, err
	}

	if !exists {
		npp = &v1alpha1.NodePodProbe{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{nodeOwner(node)}},
			Spec:       v1alpha1.NodePodProbeSpec{PodProbes: nppspec.Merge(nil, nppspec.MarkerProbes, desired)},
		}
		if err := r.client.Create(ctx, npp); apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, nil // the cache was behind; the object's create event brings us back
		} else if err != nil {
			return reconcile.Result{}, fmt.Errorf("creating NodePodProbe %s: %w", name, err)
		}
		logf.FromContext(ctx).Info("created NodePodProbe", "pods", len(npp.Spec.PodProbes))
		cachewait.Created(ctx, r.client, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return reconcile.Result{}, nil
	}

	if err := r.ensureOwner(ctx, npp, node); err != nil {
		return reconcile.Result{}, err
	}
	wrote, err := nppspec.Apply(ctx, r.client, r.live, npp, nppspec.MarkerProbes, desired)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil // deleted meanwhile; its delete event brings us back
	}
	if wrote {
		logf.FromContext(ctx).V(1).Info("updated NodePodProbe marker probes")
	}
	return reconcile.Result{}, err
}

// desired computes the marker entries of node from the cache.
func (r *nodeReconciler) desired(ctx context.Context, node string) ([]v1alpha1.PodProbe, []skip, error) {
	pods, err := nppspec.PodsOnNode(ctx, r.client, node)
	if err != nil {
		return nil, nil, err
	}
	var markers []v1alpha1.PodProbeMarker
	listed := map[string]bool{}
	for i := range pods {
		ns := pods[i].Namespace
		if listed[ns] || !nppspec.Probeable(&pods[i]) {
			continue
		}
		listed[ns] = true
		var list v1alpha1.PodProbeMarkerList
		if err := r.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, nil, fmt.Errorf("listing PodProbeMarkers in %s: %w", ns, err)
		}
		markers = append(markers, list.Items...)
	}
	entries, skipped := desiredEntries(pods, markers)
	return entries, skipped, nil
}

// report records an event on the marker for each skip not reported before for this node, so a
// broken probe earns one event per pod rather than one per reconcile.
func (r *nodeReconciler) report(node string, skipped []skip) {
	keys := make([]string, len(skipped))
	for i, s := range skipped {
		keys[i] = s.key()
	}
	for _, i := range r.reported.Fresh(node, keys) {
		s := skipped[i]
		r.recorder.Eventf(s.marker, s.pod, corev1.EventTypeWarning, EventReasonProbeSkipped, "PlaceProbe", "%s",
			validation.TruncateMessage(fmt.Sprintf("probe %q not placed on pod %s: %s", s.probe, s.pod.Name, s.reason),
				validation.MaxProbeMessageBytes))
	}
}

// reportLeftOut records an event on each marker the node newly leaves out, remembers them all
// for the marker status, and wakes the status controller for every marker whose state changed.
func (r *nodeReconciler) reportLeftOut(ctx context.Context, node string, out []nppspec.LeftOut) error {
	reasons := make(map[string]string, len(out))
	keys := make([]string, len(out))
	for i, l := range out {
		reasons[l.Key()] = leftOutReason(l, node, r.budget)
		keys[i] = l.Key()
	}
	for _, i := range r.reportedLeft.Fresh(node, keys) {
		l := out[i]
		m := &v1alpha1.PodProbeMarker{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, m); err != nil {
			continue // gone meanwhile
		}
		// An event's note may not exceed 1 KiB.
		r.recorder.Eventf(m, nil, corev1.EventTypeWarning, EventReasonNodeBudgetExceeded, "PlaceProbe", "%s",
			validation.TruncateMessage("probes not placed: "+reasons[l.Key()], validation.MaxProbeMessageBytes))
		logf.FromContext(ctx).Info("left out a marker's probes over the node budget", "marker", l.Key(),
			"bytes", l.Bytes, "namespaceBytes", l.NSBytes, "share", l.Share, "available", l.Available)
	}
	return r.notify(ctx, r.left.set(node, reasons))
}

// notify wakes the status controller for the markers of keys ("<namespace>/<name>").
func (r *nodeReconciler) notify(ctx context.Context, keys []string) error {
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		m := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		select {
		case r.changed <- event.GenericEvent{Object: m}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *nodeReconciler) deleteNPP(ctx context.Context, name string) error {
	npp := &v1alpha1.NodePodProbe{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, npp); err != nil {
		return client.IgnoreNotFound(err)
	}
	if npp.DeletionTimestamp != nil {
		return nil
	}
	if err := r.client.Delete(ctx, npp, client.Preconditions{UID: &npp.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodePodProbe %s of a deleted node: %w", name, err)
	}
	logf.FromContext(ctx).Info("deleted NodePodProbe of a deleted node")
	return nil
}

// ensureOwner points the NodePodProbe's owner reference at the current Node object, e.g. after the
// node was deleted and registered again under the same name; a stale one would let the garbage
// collector delete the NodePodProbe of a live node.
func (r *nodeReconciler) ensureOwner(ctx context.Context, npp *v1alpha1.NodePodProbe, node *corev1.Node) error {
	want := nodeOwner(node)
	refs := make([]metav1.OwnerReference, 0, len(npp.OwnerReferences)+1)
	found := false
	for _, ref := range npp.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Node" {
			if ref.UID != node.UID || ref.Name != node.Name {
				continue
			}
			found = true
		}
		refs = append(refs, ref)
	}
	if found {
		return nil
	}
	refs = append(refs, want)
	patch := client.MergeFromWithOptions(npp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	npp.OwnerReferences = refs
	if err := r.client.Patch(ctx, npp, patch); err != nil {
		return fmt.Errorf("setting the owner of NodePodProbe %s: %w", npp.Name, err)
	}
	return nil
}

func nodeOwner(node *corev1.Node) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}
