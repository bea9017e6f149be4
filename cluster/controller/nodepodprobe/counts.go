// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
)

// ResultsControllerName names the controller that counts a marker's results.
const ResultsControllerName = "podprobemarker-results"

// countResults counts, per probe of m, the pods in each state as the NodePodProbes that hold m's
// probes report them. A placed entry without a result yet is Unknown, and so is every result of a
// node whose node service is silent (its results are not current), as on the pods. Every probe of
// m's spec is in the answer, with zeros if nothing is placed: the counts say "none yet".
func countResults(m *v1alpha1.PodProbeMarker, npps []v1alpha1.NodePodProbe) v1alpha1.ResultCounts {
	out := v1alpha1.ResultCounts{}
	for _, p := range m.Spec.Probes {
		out[p.Name] = v1alpha1.StateCounts{}
	}
	for i := range npps {
		npp := &npps[i]
		_, silent := v1alpha1.NodeServiceSilence(npp)
		type key struct{ uid, probe string }
		states := map[key]*v1alpha1.ContainerProbeState{}
		for j := range npp.Status.PodProbeStatuses {
			ps := &npp.Status.PodProbeStatuses[j]
			if ps.Namespace != m.Namespace {
				continue
			}
			for k := range ps.ProbeStates {
				states[key{ps.UID, ps.ProbeStates[k].Name}] = &ps.ProbeStates[k]
			}
		}
		for _, pp := range npp.Spec.PodProbes {
			if pp.Namespace != m.Namespace {
				continue
			}
			for _, p := range pp.Probes {
				name, probe, ok := v1alpha1.SplitProbeName(p.Name)
				if !ok || name != m.Name {
					continue
				}
				c, known := out[probe]
				if !known {
					continue // a probe removed from the marker, still in this spec until the node is recomputed
				}
				switch st := states[key{pp.UID, p.Name}]; {
				case st == nil || silent:
					c.Add(v1alpha1.ProbeUnknown, "")
				default:
					c.Add(st.State, st.Message)
				}
				out[probe] = c
			}
		}
	}
	return out
}

// resultsReconciler writes a marker's result counts (v1alpha1.AnnotationResults and its summary)
// from the NodePodProbes that hold its probes, read from the cache through the marker index: it
// reads no pod, so recounting on every change of results costs no more than the NodePodProbes of
// the marker's nodes. It writes only when the counts change.
type resultsReconciler struct {
	hold   hold.Func
	client client.Client
}

func (r *resultsReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	m := &v1alpha1.PodProbeMarker{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil || m.DeletionTimestamp != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var npps v1alpha1.NodePodProbeList
	if err := r.client.List(ctx, &npps, client.MatchingFields{markerIndex: markerKey(m.Namespace, m.Name)}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	counts := countResults(m, npps.Items)
	results, summary := v1alpha1.MarshalResults(counts), counts.Total().String()
	a := m.GetAnnotations()
	if a[v1alpha1.AnnotationResults] == results && a[v1alpha1.AnnotationResultsSummary] == summary {
		return reconcile.Result{}, nil
	}
	if err := patchAnnotations(ctx, r.client, m, map[string]*string{
		v1alpha1.AnnotationResults: &results, v1alpha1.AnnotationResultsSummary: &summary,
	}); err != nil {
		return reconcile.Result{}, err
	}
	logf.FromContext(ctx).V(1).Info("updated PodProbeMarker result counts", "results", summary)
	return reconcile.Result{}, nil
}

// patchAnnotations merge-patches only the given annotation keys of m (nil removes one), with m's
// uid as a precondition: a marker deleted and created again under the same name is not counted
// for the old one. It goes through the marker's admission like any update; the spec is untouched.
func patchAnnotations(ctx context.Context, c client.Client, m *v1alpha1.PodProbeMarker, set map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": m.UID, "annotations": set}})
	if err != nil {
		return err
	}
	target := &v1alpha1.PodProbeMarker{}
	target.Namespace, target.Name = m.Namespace, m.Name
	if err := c.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone, or replaced: its own events bring it back
		}
		return fmt.Errorf("patching PodProbeMarker annotations: %w", err)
	}
	return nil
}

// resultsChanged passes NodePodProbe updates that change a count: the spec (a new generation), a
// probe's state or message, or the node service's heartbeat record; not a refresh of lastProbeTime.
func resultsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*v1alpha1.NodePodProbe)
			cur, ok2 := e.ObjectNew.(*v1alpha1.NodePodProbe)
			if !ok1 || !ok2 || old.Generation != cur.Generation {
				return true
			}
			_, oldSilent := v1alpha1.NodeServiceSilence(old)
			_, curSilent := v1alpha1.NodeServiceSilence(cur)
			return oldSilent != curSilent || stateDigest(old) != stateDigest(cur)
		},
	}
}

// stateDigest is what of npp's status the counts depend on, in order.
func stateDigest(npp *v1alpha1.NodePodProbe) string {
	b := make([]byte, 0, 64*len(npp.Status.PodProbeStatuses))
	for _, ps := range npp.Status.PodProbeStatuses {
		b = append(b, ps.UID...)
		for _, st := range ps.ProbeStates {
			b = append(b, 0)
			b = append(b, st.Name...)
			b = append(b, 0)
			b = append(b, st.State...)
			if _, _, isErr := v1alpha1.ParseProbeError(st.Message); isErr && st.State == v1alpha1.ProbeUnknown {
				b = append(b, '!')
			}
		}
		b = append(b, 1)
	}
	return string(b)
}

// virtualNode reports whether node is a virtual node (virtual-kubelet and the serverless
// offerings built on it), where no node service can run: they carry the label type=virtual-kubelet
// or a taint virtual-kubelet.io/provider.
func virtualNode(node *corev1.Node) bool {
	if node.Labels["type"] == "virtual-kubelet" {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == "virtual-kubelet.io/provider" {
			return true
		}
	}
	return false
}

// UnprobedReason says why no node service probes a matched pod on node (nil: no Node in the
// cache), or "" when one does. npp is the node's NodePodProbe (nil: none); leftOut: the node
// leaves the marker out over its budget.
func UnprobedReason(node *corev1.Node, npp *v1alpha1.NodePodProbe, leftOut bool) string {
	switch {
	case node != nil && virtualNode(node):
		return v1alpha1.UnprobedVirtualNode
	case npp == nil:
		return v1alpha1.UnprobedNoNodePodProbe
	case node == nil || node.Labels[v1alpha1.LabelNodeServed] != "true":
		return v1alpha1.UnprobedNodeNotServed
	case leftOut:
		return v1alpha1.UnprobedNodeBudget
	}
	return ""
}

// unprobedAnnotations returns the annotation changes that record reasons on m (nil: none).
func unprobedAnnotations(m *v1alpha1.PodProbeMarker, reasons map[string]int) map[string]*string {
	total := 0
	for _, n := range reasons {
		total += n
	}
	count, text := strconv.Itoa(total), v1alpha1.FormatUnprobed(reasons)
	a := m.GetAnnotations()
	_, hasReasons := a[v1alpha1.AnnotationUnprobedReasons]
	if a[v1alpha1.AnnotationUnprobed] == count && a[v1alpha1.AnnotationUnprobedReasons] == text && hasReasons == (text != "") {
		return nil
	}
	set := map[string]*string{v1alpha1.AnnotationUnprobed: &count, v1alpha1.AnnotationUnprobedReasons: nil}
	if text != "" {
		set[v1alpha1.AnnotationUnprobedReasons] = &text
	}
	return set
}
