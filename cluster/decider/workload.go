// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
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
// read only (copy one before changing it; the reconcile copies the few it may write to).
func (w workloads) pods(ctx context.Context, wl Workload) ([]*corev1.Pod, error) {
	owners := []string{wl.Kind + "/" + wl.Name}
	if wl.Kind == "Deployment" {
		var sets metav1.PartialObjectMetadataList
		sets.SetGroupVersionKind(replicaSetGVK.GroupVersion().WithKind("ReplicaSetList"))
		if err := w.reader.List(ctx, &sets, client.InNamespace(wl.Namespace), client.MatchingFields{ownerIndex: owners[0]},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the ReplicaSets of %s: %w", wl, err)
		}
		owners = owners[:0]
		for i := range sets.Items {
			owners = append(owners, "ReplicaSet/"+sets.Items[i].Name)
		}
	}
	var out []*corev1.Pod
	for _, owner := range owners {
		var list corev1.PodList
		if err := w.reader.List(ctx, &list, client.InNamespace(wl.Namespace), client.MatchingFields{ownerIndex: owner},
			client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", wl, err)
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// budget is the workload's maxUnavailable: from the PodDisruptionBudgets that select its pods
// (the strictest when several do), else the configured default. total is the workload's pod
// count, the base of percentages.
func (w workloads) budget(ctx context.Context, s *Settings, wl Workload, pods []*corev1.Pod) (Budget, error) {
	var pdbs policyv1.PodDisruptionBudgetList // read only
	if err := w.reader.List(ctx, &pdbs, client.InNamespace(wl.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return Budget{}, fmt.Errorf("listing PodDisruptionBudgets in %s: %w", wl.Namespace, err)
	}
	total := len(pods)
	var b *Budget
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() {
			continue // the disruption controller ignores these too
		}
		selects := false
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) {
				selects = true
				break
			}
		}
		if !selects {
			continue
		}
		var n int
		switch {
		case pdb.Spec.MaxUnavailable != nil:
			n = MaxUnavailable(*pdb.Spec.MaxUnavailable, total, true, 0)
		case pdb.Spec.MinAvailable != nil:
			n = total - MaxUnavailable(*pdb.Spec.MinAvailable, total, true, 0)
		default:
			continue
		}
		n = max(n, 0)
		if b == nil || n < b.MaxUnavailable {
			b = &Budget{MaxUnavailable: n, Source: "PodDisruptionBudget " + pdb.Namespace + "/" + pdb.Name}
		}
	}
	if b != nil {
		return *b, nil
	}
	return Budget{
		MaxUnavailable: MaxUnavailable(s.DefaultMaxUnavailable, total, false, 1),
		Source:         "default " + s.DefaultMaxUnavailable.String() + " of " + fmt.Sprint(total) + " pods",
	}, nil
}
