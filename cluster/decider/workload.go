// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/kruiseapi"
	"github.com/probeshim/probeshim/cluster/internal/readiness"
)

// ownerIndex indexes pods and ReplicaSets by their controller, as "<Kind>/<name>" (a bare pod
// by "Pod/<its name>"), so a workload's pods are found without a scan of the namespace.
const ownerIndex = "probeshim.decider.controller"

var replicaSetGVK = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func replicaSetMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(replicaSetGVK)
	return m
}

func controllerKey(o client.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.Kind + "/" + ref.Name
	}
	if _, ok := o.(*corev1.Pod); ok {
		return "Pod/" + o.GetName()
	}
	return ""
}

func indexOwners(ctx context.Context, indexer client.FieldIndexer) error {
	index := func(o client.Object) []string {
		if k := controllerKey(o); k != "" {
			return []string{k}
		}
		return nil
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, ownerIndex, index); err != nil {
		return err
	}
	return indexer.IndexField(ctx, replicaSetMeta(), ownerIndex, index)
}

// nodeIndex indexes NodePodProbes by name (their node's): a cache List on it can skip the deep
// copy that a Get always makes.
const nodeIndex = "probeshim.decider.node"

func indexNodes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.NodePodProbe{}, nodeIndex, func(o client.Object) []string {
		return []string{o.GetName()}
	})
}

// requestPodIndex indexes ContainerRecreateRequests by their pod's UID (the label
// LabelCRRPodUID), so finding a pod's requests is no scan of its namespace's requests.
const requestPodIndex = "probeshim.decider.pod-uid"

func indexRequests(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ContainerRecreateRequest{}, requestPodIndex, func(o client.Object) []string {
		if uid := o.GetLabels()[v1alpha1.LabelCRRPodUID]; uid != "" {
			return []string{uid}
		}
		return nil
	})
}

// request encodes a workload as the work queue's key.
func request(w Workload) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Kind + "/" + w.Name}}
}

func workloadOf(req reconcile.Request) (Workload, error) {
	kind, name, ok := strings.Cut(req.Name, "/")
	if !ok || kind == "" || name == "" {
		return Workload{}, fmt.Errorf("work item %q is not a workload", req.Name)
	}
	return Workload{Kind: kind, Namespace: req.Namespace, Name: name}, nil
}

// workloads finds the workload of pods through owner references: a ReplicaSet's Deployment, any
// other controller by its kind (StatefulSet, DaemonSet, apps.kruise.io's CloneSet, ...), else
// the pod itself.
type workloads struct {
	reader client.Reader
}

func (w workloads) of(ctx context.Context, pod *corev1.Pod) Workload {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Workload{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
	}
	if ref.Kind == "ReplicaSet" {
		rs := replicaSetMeta()
		if err := w.reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, rs); err == nil {
			if dep := metav1.GetControllerOf(rs); dep != nil && dep.Kind == "Deployment" {
				return Workload{Kind: "Deployment", Namespace: pod.Namespace, Name: dep.Name}
			}
		}
	}
	return Workload{Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name}
}

// pods lists the workload's pods that are not being deleted: the cache's own objects, to be
// read only (copy one before changing it; the reconcile copies the few it may write to). It
// counts the ones being deleted: unavailable until they are gone.
func (w workloads) pods(ctx context.Context, wl Workload) (pods []*corev1.Pod, terminating int, err error) {
	owners := []string{wl.Kind + "/" + wl.Name}
	if wl.Kind == "Deployment" {
		var sets metav1.PartialObjectMetadataList
		sets.SetGroupVersionKind(replicaSetGVK.GroupVersion().WithKind("ReplicaSetList"))
		if err := w.reader.List(ctx, &sets, client.InNamespace(wl.Namespace), client.MatchingFields{ownerIndex: owners[0]},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, 0, fmt.Errorf("listing the ReplicaSets of %s: %w", wl, err)
		}
		owners = owners[:0]
		for i := range sets.Items {
			owners = append(owners, "ReplicaSet/"+sets.Items[i].Name)
		}
	}
	for _, owner := range owners {
		var list corev1.PodList
		if err := w.reader.List(ctx, &list, client.InNamespace(wl.Namespace), client.MatchingFields{ownerIndex: owner},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, 0, fmt.Errorf("listing the pods of %s: %w", wl, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			switch {
			case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			case p.DeletionTimestamp != nil:
				terminating++
			default:
				pods = append(pods, p)
			}
		}
	}
	return pods, terminating, nil
}

// defaultBudget is the workload's maxUnavailable for its pods that no disruption budget selects:
// the configured default, scaled to its total pods.
func defaultBudget(s *Settings, total int) Budget {
	return Budget{
		MaxUnavailable: MaxUnavailable(s.DefaultMaxUnavailable, total, false, 1),
		Source:         "default " + s.DefaultMaxUnavailable.String() + " of " + fmt.Sprint(total) + " pods",
	}
}

// recreatingFunc says whether a restart of pod is in flight (anyone's request, or the decider's
// own not yet in the cache).
type recreatingFunc func(ctx context.Context, pod *corev1.Pod) (bool, error)

// disruptionBudgets are the PodDisruptionBudgets (and, when pubs, OpenKruise's
// PodUnavailableBudgets) that select any of pods, each counted over every pod it selects.
func (w workloads) disruptionBudgets(ctx context.Context, wl Workload, pods []*corev1.Pod, pubs bool, recreating recreatingFunc) ([]DisruptionBudget, error) {
	var pdbs policyv1.PodDisruptionBudgetList // read only
	if err := w.reader.List(ctx, &pdbs, client.InNamespace(wl.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets in %s: %w", wl.Namespace, err)
	}
	var out []DisruptionBudget
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue // the disruption controller ignores these too
		}
		mine := selected(pods, sel)
		if len(mine) == 0 {
			continue
		}
		all, err := w.selectedPods(ctx, wl.Namespace, sel)
		if err != nil {
			return nil, err
		}
		st := &pdb.Status
		healthy, inflight, err := countHealthy(ctx, all, recreating, st.DisruptedPods)
		if err != nil {
			return nil, err
		}
		b := DisruptionBudget{
			Kind: "PodDisruptionBudget", Name: pdb.Namespace + "/" + pdb.Name, Pods: mine,
			Allowed: min(int(st.DisruptionsAllowed)-inflight, healthy-int(st.DesiredHealthy)),
			Healthy: min(int(st.CurrentHealthy)-inflight, healthy), Desired: int(st.DesiredHealthy),
			AlwaysAllowUnhealthy: pdb.Spec.UnhealthyPodEvictionPolicy != nil &&
				*pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		}
		switch c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); {
		case st.ObservedGeneration < pdb.Generation:
			b.Stale = fmt.Sprintf("its status is behind its spec (observed generation %d of %d): the disruption controller of kube-controller-manager has not counted it yet",
				st.ObservedGeneration, pdb.Generation)
		case c != nil && c.Status == metav1.ConditionFalse && c.Reason == policyv1.SyncFailedReason:
			b.Stale = "the disruption controller could not count it: " + c.Message
		}
		out = append(out, b)
	}
	if !pubs {
		return out, nil
	}
	var list kruiseapi.PodUnavailableBudgetList // read only
	if err := w.reader.List(ctx, &list, client.InNamespace(wl.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing PodUnavailableBudgets in %s: %w", wl.Namespace, err)
	}
	for i := range list.Items {
		pub := &list.Items[i]
		all, err := w.pubPods(ctx, pub)
		if err != nil {
			return nil, err
		}
		covered := make(map[types.UID]bool, len(all))
		for _, p := range all {
			covered[p.UID] = true
		}
		mine := map[types.UID]bool{}
		for _, p := range pods {
			if covered[p.UID] {
				mine[p.UID] = true
			}
		}
		if len(mine) == 0 {
			continue
		}
		st := &pub.Status
		gone := make(map[string]metav1.Time, len(st.DisruptedPods)+len(st.UnavailablePods))
		maps.Copy(gone, st.DisruptedPods)
		maps.Copy(gone, st.UnavailablePods)
		healthy, inflight, err := countHealthy(ctx, all, recreating, gone)
		if err != nil {
			return nil, err
		}
		b := DisruptionBudget{
			Kind: kruiseapi.PodUnavailableBudgetKind, Name: pub.Namespace + "/" + pub.Name, Pods: mine,
			Allowed: min(int(st.UnavailableAllowed)-inflight, healthy-int(st.DesiredAvailable)),
			Healthy: min(int(st.CurrentAvailable)-inflight, healthy), Desired: int(st.DesiredAvailable),
			// OpenKruise lets a pod that is already unavailable go without taking from the budget.
			AlwaysAllowUnhealthy: true,
		}
		if st.ObservedGeneration < pub.Generation {
			b.Stale = fmt.Sprintf("its status is behind its spec (observed generation %d of %d): OpenKruise's controller has not counted it yet",
				st.ObservedGeneration, pub.Generation)
		}
		out = append(out, b)
	}
	return out, nil
}

// selected are the UIDs of pods that sel matches.
func selected(pods []*corev1.Pod, sel labels.Selector) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out[p.UID] = true
		}
	}
	return out
}

// selectedPods are the namespace's pods that sel matches: the cache's own objects, read only.
func (w workloads) selectedPods(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := w.reader.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pods of a disruption budget in %s: %w", ns, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// pubPods are the pods a PodUnavailableBudget covers: by its selector, else its target
// workload's.
func (w workloads) pubPods(ctx context.Context, pub *kruiseapi.PodUnavailableBudget) ([]*corev1.Pod, error) {
	if pub.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
		if err != nil || sel.Empty() {
			return nil, nil
		}
		return w.selectedPods(ctx, pub.Namespace, sel)
	}
	if ref := pub.Spec.TargetReference; ref != nil && ref.Kind != "" && ref.Name != "" {
		pods, _, err := w.pods(ctx, Workload{Kind: ref.Kind, Namespace: pub.Namespace, Name: ref.Name})
		return pods, err
	}
	return nil, nil
}

// countHealthy counts the healthy pods of all as a budget's owner does (ready, not being
// deleted, not let go already by gone), with the ones the decider knows are being recreated
// apart: inflight, which the budget's status may still count as healthy.
func countHealthy(ctx context.Context, all []*corev1.Pod, recreating recreatingFunc, gone map[string]metav1.Time) (healthy, inflight int, err error) {
	for _, p := range all {
		if _, ok := gone[p.Name]; ok || p.DeletionTimestamp != nil || !readiness.Pod(p) {
			continue
		}
		r, err := recreating(ctx, p)
		if err != nil {
			return 0, 0, err
		}
		if r {
			inflight++
		} else {
			healthy++
		}
	}
	return healthy, inflight, nil
}
