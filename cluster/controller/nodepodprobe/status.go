// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// markerIndex indexes NodePodProbes by the "<namespace>/<marker>" of each marker whose probes
// their spec holds, so a marker finds the nodes it is placed on without scanning them all.
const markerIndex = "probeshim.markers"

func markerKey(namespace, name string) string { return namespace + "/" + name }

func indexNPPByMarker(o client.Object) []string {
	npp := o.(*v1alpha1.NodePodProbe)
	seen := map[string]bool{}
	var keys []string
	for _, pp := range npp.Spec.PodProbes {
		for _, p := range pp.Probes {
			if m, _, ok := v1alpha1.SplitProbeName(p.Name); ok {
				k := markerKey(pp.Namespace, m)
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// statusReconciler writes a PodProbeMarker's status: matchedPods, the probeable pods its selector
// matches, and observedGeneration, raised to the marker's generation only once this generation's
// probes are placed on every node that has a NodePodProbe (no entry missing, none stale). A
// client that waits for observedGeneration == generation therefore knows the change is in place.
//
// It counts the matched pods no node service probes, by reason (v1alpha1.AnnotationUnprobed), from
// the pods and NodePodProbes it reads anyway and the Nodes in the cache.
//
// It also keeps the marker's NodeBudget condition: False, with the nodes, while some nodes leave
// the marker's probes out over their budget (a node that leaves them out counts as placed, so
// observedGeneration still moves on); True once a condition was set and no node leaves them out.
type statusReconciler struct {
	hold   hold.Func
	client client.Client
	left   *budgetBook
}

func (r *statusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if res, held := hold.Check(ctx, r.hold); held {
		return res, nil
	}
	m := &v1alpha1.PodProbeMarker{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil || m.DeletionTimestamp != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Read-only views of the cache (no copy): a namespace can hold many pods, and this runs on
	// their events. Nothing below modifies them.
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(m.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	var matched int64
	byNode := map[string][]*corev1.Pod{}
	sel := nppspec.MarkerSelector(m)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if nppspec.Probeable(pod) && sel.Matches(labels.Set(pod.Labels)) {
			matched++
			byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod)
		}
	}
	var npps v1alpha1.NodePodProbeList
	if err := r.client.List(ctx, &npps, client.MatchingFields{markerIndex: markerKey(m.Namespace, m.Name)}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	placed := true
	unprobed := map[string]int{}
	visit := func(node string, pods []*corev1.Pod, npp *v1alpha1.NodePodProbe) error {
		leftOut := r.left.leftOutOn(node, markerKey(m.Namespace, m.Name))
		if len(pods) > 0 {
			n := &corev1.Node{}
			if err := r.client.Get(ctx, client.ObjectKey{Name: node}, n); apierrors.IsNotFound(err) {
				n = nil
			} else if err != nil {
				return err
			}
			if why := UnprobedReason(n, npp, leftOut); why != "" {
				unprobed[why] += len(pods)
			}
		}
		if npp != nil && !placedOn(m, pods, npp, leftOut) {
			placed = false
		}
		return nil
	}
	for i := range npps.Items {
		npp := &npps.Items[i]
		if err := visit(npp.Name, byNode[npp.Name], npp); err != nil {
			return reconcile.Result{}, err
		}
		delete(byNode, npp.Name)
	}
	for node, pods := range byNode { // nodes the marker should be on but is not yet
		npp := &v1alpha1.NodePodProbe{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: node}, npp); apierrors.IsNotFound(err) {
			npp = nil // no NodePodProbe (node not Ready yet): nothing can be placed there
		} else if err != nil {
			return reconcile.Result{}, err
		}
		if err := visit(node, pods, npp); err != nil {
			return reconcile.Result{}, err
		}
	}
	// The pods no node service probes are recorded in annotations (see v1alpha1.AnnotationUnprobed:
	// Kruise's CRD would prune a status field), with a metadata patch of their own keys.
	if set := unprobedAnnotations(m, unprobed); set != nil {
		if err := patchAnnotations(ctx, r.client, m, set); err != nil {
			return reconcile.Result{}, err
		}
	}

	gen := m.Status.ObservedGeneration
	if placed {
		gen = m.Generation
	}
	conditions, condChanged := r.budgetCondition(m)
	if gen == m.Status.ObservedGeneration && matched == m.Status.MatchedPods && !condChanged {
		return reconcile.Result{}, nil
	}
	// Explicit fields: matchedPods is omitempty in the type, and 0 must still be written.
	status := map[string]any{"observedGeneration": gen, "matchedPods": matched}
	if condChanged {
		status["conditions"] = conditions
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.client.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, body)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating PodProbeMarker status: %w", err))
	}
	logf.FromContext(ctx).V(1).Info("updated PodProbeMarker status", "observedGeneration", gen, "matchedPods", matched)
	return reconcile.Result{}, nil
}

// budgetCondition returns m's conditions with NodeBudget as the budget book says, and whether that
// changed them.
func (r *statusReconciler) budgetCondition(m *v1alpha1.PodProbeMarker) ([]metav1.Condition, bool) {
	conds := slices.Clone(m.Status.Conditions)
	nodes, first := r.left.nodes(markerKey(m.Namespace, m.Name))
	c := metav1.Condition{Type: v1alpha1.PodProbeMarkerNodeBudget, ObservedGeneration: m.Generation}
	switch {
	case len(nodes) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonNodeBudgetExceeded, budgetMessage(nodes, first)
	case meta.FindStatusCondition(conds, c.Type) != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonWithinNodeBudget, "every node has room for the marker's probes"
	default:
		return conds, false // never left out: no condition to keep
	}
	return conds, meta.SetStatusCondition(&conds, c)
}

// placedOn reports whether npp holds exactly m's probes for pods (m's selected, probeable pods on
// that node) and none of m's probes for any other pod. A marker the node leaves out over its
// budget (leftOut) is placed when the node holds none of its probes.
func placedOn(m *v1alpha1.PodProbeMarker, pods []*corev1.Pod, npp *v1alpha1.NodePodProbe, leftOut bool) bool {
	want := map[string][]v1alpha1.ContainerProbe{}
	for _, pod := range pods {
		if leftOut {
			break
		}
		if probes, _ := markerProbes(m, pod); len(probes) > 0 {
			want[string(pod.UID)] = probes
		}
	}
	have := map[string][]v1alpha1.ContainerProbe{}
	for _, pp := range npp.Spec.PodProbes {
		if pp.Namespace != m.Namespace {
			continue
		}
		for _, p := range pp.Probes {
			if name, _, ok := v1alpha1.SplitProbeName(p.Name); ok && name == m.Name {
				have[pp.UID] = append(have[pp.UID], p)
			}
		}
	}
	if len(want) != len(have) {
		return false
	}
	for uid, probes := range want {
		got := nppspec.Canonical([]v1alpha1.PodProbe{{Probes: have[uid]}})
		exp := nppspec.Canonical([]v1alpha1.PodProbe{{Probes: probes}})
		if len(got) == 0 || !nppspec.Equal(got, exp) {
			return false
		}
	}
	return true
}
