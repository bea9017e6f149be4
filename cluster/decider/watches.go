// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/kruiseapi"
	"github.com/probeshim/probeshim/cluster/internal/readiness"
)

// What wakes a workload up: a liveness state of one of its pods changing (NodePodProbe status),
// its pods changing readiness, switches or records, a restart request coming or going, a
// PodDisruptionBudget or the namespace's switch changing, or the configuration changing.

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// enqueuePod adds the workload of the pod named ns/name, when it still is the pod with uid
// (any uid when empty) and, if optedIn, uses the enhanced liveness probe.
func (d *decider) enqueuePod(ctx context.Context, q queue, ns, name string, uid types.UID, optedIn bool) {
	pod := &corev1.Pod{}
	if err := d.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		return
	}
	if (uid == "" || pod.UID == uid) && (!optedIn || v1alpha1.UsesEnhancedLiveness(pod)) {
		q.Add(request(d.workloads.of(ctx, pod)))
	}
}

// statusKey is a pod of a NodePodProbe status.
type statusKey struct {
	namespace, name string
	uid             types.UID
}

// livenessStates summarises the liveness states of each pod of a NodePodProbe status, with the
// node service's heartbeat state: a node service turning silent or back changes every pod's.
func livenessStates(npp *v1alpha1.NodePodProbe) map[statusKey]string {
	out := map[statusKey]string{}
	_, silent := v1alpha1.NodeServiceSilence(npp)
	for i := range npp.Status.PodProbeStatuses {
		st := &npp.Status.PodProbeStatuses[i]
		var sig string
		if silent {
			sig = "silent;"
		}
		for _, ps := range st.ProbeStates {
			if _, ok := v1alpha1.ParseLivenessProbeName(ps.Name); ok {
				sig += fmt.Sprintf("%s=%s@%d;", ps.Name, ps.State, ps.LastTransitionTime.Unix())
			}
		}
		if sig != "" && sig != "silent;" {
			out[statusKey{st.Namespace, st.Name, types.UID(st.UID)}] = sig
		}
	}
	return out
}

func nodePodProbeHandler(d *decider) handler.EventHandler {
	enqueueChanged := func(ctx context.Context, q queue, old, cur map[statusKey]string) {
		for k, sig := range cur {
			if old[k] != sig {
				d.enqueuePod(ctx, q, k.namespace, k.name, k.uid, true)
			}
		}
		for k := range old {
			if _, ok := cur[k]; !ok {
				d.enqueuePod(ctx, q, k.namespace, k.name, k.uid, true)
			}
		}
	}
	// The counts are forgotten before any workload is queued, so its reconcile counts anew.
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			d.totals.changed()
			enqueueChanged(ctx, q, nil, livenessStates(e.Object.(*v1alpha1.NodePodProbe)))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			d.totals.changed()
			enqueueChanged(ctx, q, livenessStates(e.ObjectOld.(*v1alpha1.NodePodProbe)), livenessStates(e.ObjectNew.(*v1alpha1.NodePodProbe)))
		},
		DeleteFunc: func(context.Context, event.DeleteEvent, queue) { d.totals.changed() },
	}
}

// nodeHandler decides again for the pods with liveness results on a node whose Ready condition
// changed: a node that is not Ready holds their restarts, one that is Ready again releases them.
func nodeHandler(d *decider) handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if readiness.Node(e.ObjectOld.(*corev1.Node)) == readiness.Node(e.ObjectNew.(*corev1.Node)) {
				return
			}
			var list v1alpha1.NodePodProbeList
			if err := d.client.List(ctx, &list, client.MatchingFields{nodeIndex: e.ObjectNew.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
				return // the periodic resync decides again
			}
			for i := range list.Items {
				for k := range livenessStates(&list.Items[i]) {
					d.enqueuePod(ctx, q, k.namespace, k.name, k.uid, true)
				}
			}
		},
	}
}

func podHandler(d *decider) handler.EventHandler {
	add := func(ctx context.Context, q queue, o client.Object) {
		if v1alpha1.UsesEnhancedLiveness(o) {
			q.Add(request(d.workloads.of(ctx, o.(*corev1.Pod))))
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, q, e.Object) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			old, cur := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			if podChanged(old, cur) {
				add(ctx, q, old)
				add(ctx, q, cur)
			}
		},
	}
}

// podChanged: a change that can change a decision of the pod's workload.
func podChanged(old, cur *corev1.Pod) bool {
	annotation := func(p *corev1.Pod, k string) string { return p.Annotations[k] }
	for _, k := range []string{AnnotationRestarts, AnnotationRestartDisabled, v1alpha1.AnnotationUsingEnhancedLiveness} {
		if annotation(old, k) != annotation(cur, k) {
			return true
		}
	}
	return readiness.Pod(old) != readiness.Pod(cur) || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		old.Status.Phase != cur.Status.Phase || !maps.Equal(old.Labels, cur.Labels) ||
		(v1alpha1.UsesEnhancedLiveness(cur) && instancesChanged(old, cur))
}

// instancesChanged: a container exited or restarted, so a liveness failure may be stale now.
func instancesChanged(old, cur *corev1.Pod) bool {
	same := func(a, b []corev1.ContainerStatus) bool {
		return slices.EqualFunc(a, b, func(x, y corev1.ContainerStatus) bool {
			return x.Name == y.Name && x.ContainerID == y.ContainerID && x.RestartCount == y.RestartCount &&
				(x.State.Running == nil) == (y.State.Running == nil)
		})
	}
	return !same(old.Status.ContainerStatuses, cur.Status.ContainerStatuses) ||
		!same(old.Status.InitContainerStatuses, cur.Status.InitContainerStatuses)
}

func requestHandler(d *decider) handler.EventHandler {
	add := func(ctx context.Context, q queue, o client.Object) {
		crr := o.(*v1alpha1.ContainerRecreateRequest)
		// Any pod's request: it uses the budget of its workload's pods that do opt in.
		d.enqueuePod(ctx, q, crr.Namespace, crr.Spec.PodName, types.UID(crr.Labels[v1alpha1.LabelCRRPodUID]), false)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, q, e.Object) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if finished(e.ObjectOld.(*v1alpha1.ContainerRecreateRequest)) != finished(e.ObjectNew.(*v1alpha1.ContainerRecreateRequest)) {
				add(ctx, q, e.ObjectNew)
			}
		},
	}
}

// enqueueNamespace adds the workloads of the namespace's pods that use the enhanced liveness
// probe and match sel (every pod when sel is nil).
func (d *decider) enqueueNamespace(ctx context.Context, q queue, ns string, sel *metav1.LabelSelector) {
	var pods corev1.PodList
	opts := []client.ListOption{client.InNamespace(ns)}
	if sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: s})
	}
	if err := d.client.List(ctx, &pods, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "listing pods to decide again", "namespace", ns)
		return
	}
	seen := map[Workload]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; v1alpha1.UsesEnhancedLiveness(p) {
			if w := d.workloads.of(ctx, p); !seen[w] {
				seen[w] = true
				q.Add(request(w))
			}
		}
	}
}

// budgetHandler decides again the workloads whose pods a PodDisruptionBudget selects.
func budgetHandler(d *decider) handler.EventHandler {
	return everyVersion(func(ctx context.Context, q queue, o client.Object) {
		pdb := o.(*policyv1.PodDisruptionBudget)
		d.enqueueNamespace(ctx, q, pdb.Namespace, pdb.Spec.Selector)
	})
}

// pubHandler decides again the workloads whose pods a PodUnavailableBudget selects (by label,
// or as its target).
func pubHandler(d *decider) handler.EventHandler {
	return everyVersion(func(ctx context.Context, q queue, o client.Object) {
		pub := o.(*kruiseapi.PodUnavailableBudget)
		if ref := pub.Spec.TargetReference; pub.Spec.Selector == nil && ref != nil {
			q.Add(request(Workload{Kind: ref.Kind, Namespace: pub.Namespace, Name: ref.Name}))
			return
		}
		if pub.Spec.Selector != nil {
			d.enqueueNamespace(ctx, q, pub.Namespace, pub.Spec.Selector)
		}
	})
}

// everyVersion calls add with each version of an object an event is about: the created, the
// deleted, and both sides of an update (what it selected before and after).
func everyVersion(add func(context.Context, queue, client.Object)) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, q, e.Object) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, q, e.Object) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			add(ctx, q, e.ObjectOld)
			add(ctx, q, e.ObjectNew)
		},
	}
}

func namespaceMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

func namespaceHandler(d *decider) handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			k := AnnotationRestartDisabled
			if e.ObjectOld.GetAnnotations()[k] != e.ObjectNew.GetAnnotations()[k] {
				d.enqueueNamespace(ctx, q, e.ObjectNew.GetName(), nil)
			}
		},
	}
}

// failingWorkloads are the workloads with a pod whose liveness state is Failed: the ones a
// configuration change can decide differently.
func (d *decider) failingWorkloads(ctx context.Context) []reconcile.Request {
	var npps v1alpha1.NodePodProbeList
	if err := d.client.List(ctx, &npps); err != nil {
		logf.FromContext(ctx).Error(err, "listing NodePodProbes to decide again")
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range npps.Items {
		for _, st := range npps.Items[i].Status.PodProbeStatuses {
			for _, ps := range st.ProbeStates {
				if _, ok := v1alpha1.ParseLivenessProbeName(ps.Name); !ok || ps.State != v1alpha1.ProbeFailed {
					continue
				}
				pod := &corev1.Pod{}
				if err := d.client.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Name}, pod); err != nil ||
					string(pod.UID) != st.UID {
					break
				}
				if r := request(d.workloads.of(ctx, pod)); !seen[r] {
					seen[r] = true
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

// resync is a source through which the decider queues work of its own (after a configuration
// change).
type resync struct {
	mu sync.Mutex
	q  queue
}

func (r *resync) source() source.Source {
	return source.Func(func(_ context.Context, q queue) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.q = q
		return nil
	})
}

func (r *resync) all(reqs []reconcile.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.q == nil {
		return // not started: the first reconciles read the configuration anyway
	}
	for _, req := range reqs {
		r.q.Add(req)
	}
}
