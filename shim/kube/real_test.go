// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kube

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// Every call of Interface, made by the REST clients against a real API server (envtest): the
// service's leases, events, pod list and watch and the reads of its heartbeat.
func TestCallsOnARealAPIServer(t *testing.T) {
	dir, err := kubebin.Dir()
	if err != nil {
		t.Skip("no Kubernetes binaries: ", err)
	}
	env := kubebin.Environment(dir)
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := NewForConfig(cfg, Options{QPS: 100, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kube
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A namespace and a node to read, through a client of their own (the service never writes them).
	core, err := NewForConfig(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc := core.Kube.(groups).core
	for _, o := range []struct {
		res string
		obj any
	}{
		{"namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}},
		{"nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}},
	} {
		if err := rc.Post().Resource(o.res).Body(o.obj).Do(ctx).Error(); err != nil {
			t.Fatalf("creating %s: %v", o.res, err)
		}
	}
	if n, err := k.Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil || n.Name != "node-a" || n.UID == "" {
		t.Fatalf("node: %+v, %v", n, err)
	}
	for _, o := range []struct {
		res string
		obj any
	}{
		{"configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}},
		{"services", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}},
	} {
		if err := rc.Post().Namespace("ns").Resource(o.res).Body(o.obj).Do(ctx).Error(); err != nil {
			t.Fatalf("creating %s: %v", o.res, err)
		}
	}
	if cm, err := k.ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
		t.Fatalf("configmap: %+v, %v", cm, err)
	}
	if s, err := k.Services("ns").Get(ctx, "svc", metav1.GetOptions{}); err != nil || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 443 {
		t.Fatalf("service: %+v, %v", s, err)
	}

	// Leases: create, get, update.
	leases := k.Leases("ns")
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-a"), LeaseDurationSeconds: ptr.To[int32](40)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := leases.Get(ctx, "node-a", metav1.GetOptions{}); err != nil || got.Spec.RenewTime == nil {
		t.Fatalf("lease after update: %+v, %v", got, err)
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
		t.Error("an update with a stale resourceVersion went through")
	}

	// Events: create, then patch the count as shim/events does.
	ev, err := k.Events("ns").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-0.1", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-0"}, Reason: "Example", Message: "m",
		Type: corev1.EventTypeNormal, Count: 1}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = k.Events("ns").Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{})
	if err != nil || ev.Count != 2 {
		t.Fatalf("patched event: %+v, %v", ev, err)
	}

	// Pods: list and watch all namespaces with a field selector, as the executor's informer does.
	pods := k.Pods(metav1.NamespaceAll)
	sel := fields.OneTermEqualSelector("spec.nodeName", "node-a").String()
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("pods: %+v, %v", list, err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](60)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, name := range []string{"elsewhere", "here"} {
		node := map[string]string{"elsewhere": "node-b", "here": "node-a"}[name]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}}}}
		if err := rc.Post().Namespace("ns").Resource("pods").Body(p).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case e := <-w.ResultChan():
		p, ok := e.Object.(*corev1.Pod)
		if e.Type != watch.Added || !ok || p.Name != "here" {
			t.Fatalf("watch event %s %T %+v, want the pod bound to node-a added", e.Type, e.Object, e.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
}
