// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// PendingControllerName names the controller that explains pods waiting for a served node.
const PendingControllerName = "served-node-wait"

// EventReasonNoServedNode is the Warning event on a pod opted in to enhanced liveness that no
// node with a live node service can take.
const EventReasonNoServedNode = "NoServedNode"

// pendingRecheck is how often a waiting pod is looked at again: the number of served nodes in
// its event may have changed.
const pendingRecheck = time.Minute

// setupPending adds the controller that tells a pod why it waits: admission required a node with
// v1alpha1.LabelNodeServed (policy require) and the scheduler found none that can take the pod.
// The scheduler's own event counts nodes that "didn't match Pod's node affinity/selector", which
// does not say that the nodes lack a node service nor what to do: this event does, once per pod
// and change of what it says.
func setupPending(mgr ctrl.Manager) error {
	r := &pendingReconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder(PendingControllerName), told: map[types.UID]string{}}
	waiting := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Spec.NodeName == "" && requiresServedNode(p)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(PendingControllerName).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return waiting(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool { return waiting(e.ObjectNew) || waiting(e.ObjectOld) },
			DeleteFunc: func(e event.DeleteEvent) bool {
				r.forget(e.Object.GetUID())
				return false
			},
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// requiresServedNode: the pod's enhanced liveness ties it to served nodes.
func requiresServedNode(p *corev1.Pod) bool {
	return v1alpha1.UsesEnhancedLiveness(p) && p.Annotations[v1alpha1.AnnotationServedNodeAffinity] == v1alpha1.ServedNodeRequire &&
		p.Annotations[v1alpha1.AnnotationContainerProbeContext] != ""
}

type pendingReconciler struct {
	client   client.Client
	recorder events.EventRecorder

	mu   sync.Mutex
	told map[types.UID]string // what each waiting pod was last told
}

func (r *pendingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !requiresServedNode(pod) || !unschedulable(pod) {
		r.forget(pod.UID)
		return reconcile.Result{}, nil
	}
	var served corev1.NodeList
	if err := r.client.List(ctx, &served, client.MatchingLabels{v1alpha1.LabelNodeServed: "true"}); err != nil {
		return reconcile.Result{}, err
	}
	msg := fmt.Sprintf("none of the %d nodes with a live probeshim node service (label %s=true) can take the pod "+
		"(see the scheduler's FailedScheduling event), and its enhanced liveness requires one (%s: %s)",
		len(served.Items), v1alpha1.LabelNodeServed, v1alpha1.AnnotationServedNodeAffinity, v1alpha1.ServedNodeRequire)
	if len(served.Items) == 0 {
		msg = fmt.Sprintf("no node has a live probeshim node service (label %s=true), which the pod's enhanced liveness requires "+
			"(%s: %s): start probeshim on the nodes (systemctl status probeshim; kubectl get npp shows each node's heartbeat), "+
			"or set the annotation to %s or %s to let the pod run where its liveness is not checked",
			v1alpha1.LabelNodeServed, v1alpha1.AnnotationServedNodeAffinity, v1alpha1.ServedNodeRequire,
			v1alpha1.ServedNodePrefer, v1alpha1.ServedNodeOff)
	}
	r.mu.Lock()
	told := r.told[pod.UID] == msg
	r.told[pod.UID] = msg
	r.mu.Unlock()
	if !told {
		r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonNoServedNode, "Schedule", "%s", msg)
	}
	return reconcile.Result{RequeueAfter: pendingRecheck}, nil
}

func (r *pendingReconciler) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.told, uid)
	r.mu.Unlock()
}

// unschedulable: the scheduler tried the pod and found no node for it.
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
