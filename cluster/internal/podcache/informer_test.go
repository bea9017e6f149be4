// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestInformerStoresPackedHandsOutSlim: the pod informer's store holds compactPods, and its
// readers (store, indexer, index functions, event handlers) see the slim pods.
func TestInformerStoresPackedHandsOutSlim(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	inf := NewInformer(src, &corev1.Pod{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	// controller-runtime sets the ByObject transform; the informer packs pods still.
	if err := inf.SetTransform(Transform); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var indexed, seen []any
	if err := inf.AddIndexers(toolscache.Indexers{"node": func(o any) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		indexed = append(indexed, o)
		return []string{o.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	record := func(objs ...any) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, objs...)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o) },
		UpdateFunc: func(old, cur any) { record(old, cur) },
		DeleteFunc: func(o any) { record(o) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)

	pod := podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true, Node: "node-a"})
	pod.ResourceVersion = ""
	src.Add(pod.DeepCopy())
	poll(t, func() bool { return len(inf.GetStore().ListKeys()) == 1 })
	pod.Status.ContainerStatuses[0].RestartCount = 9
	src.Modify(pod.DeepCopy())

	want := Slim(pod)
	key := pod.Namespace + "/" + pod.Name
	poll(t, func() bool {
		got, ok, err := inf.GetIndexer().GetByKey(key)
		return err == nil && ok && got.(*corev1.Pod).Status.ContainerStatuses[0].RestartCount == 9
	})
	raw := inf.(*informer).SharedIndexInformer.GetIndexer().List()
	if _, ok := raw[0].(*compactPod); len(raw) != 1 || !ok {
		t.Fatalf("the store holds %T, want one *compactPod", raw[0])
	}
	same := func(what string, got any) {
		t.Helper()
		p, ok := got.(*corev1.Pod)
		if !ok {
			t.Fatalf("%s: %T, want *corev1.Pod", what, got)
		}
		w := want
		if p.ResourceVersion != w.ResourceVersion { // the fake source's resource versions
			w = w.DeepCopy()
			w.ResourceVersion = p.ResourceVersion
		}
		if p.Status.ContainerStatuses[0].RestartCount != 9 { // the added pod, not yet modified
			w = w.DeepCopy()
			w.Status.ContainerStatuses[0].RestartCount = p.Status.ContainerStatuses[0].RestartCount
		}
		if !equality.Semantic.DeepEqual(p, w) {
			t.Errorf("%s: the pod differs from Slim's", what)
		}
	}
	got, _, _ := inf.GetIndexer().GetByKey(key)
	same("GetByKey", got)
	got, _, _ = inf.GetStore().Get(pod)
	same("Get", got)
	for _, o := range inf.GetStore().List() {
		same("List", o)
	}
	byNode, err := inf.GetIndexer().ByIndex("node", "node-a")
	if err != nil || len(byNode) != 1 {
		t.Fatalf("ByIndex(node-a) = %d pods, %v; want 1", len(byNode), err)
	}
	same("ByIndex", byNode[0])
	byNS, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, "shop")
	if err != nil || len(byNS) != 1 {
		t.Fatalf("ByIndex(namespace shop) = %d pods, %v; want 1", len(byNS), err)
	}
	same("ByIndex namespace", byNS[0])

	src.Delete(pod.DeepCopy())
	poll(t, func() bool { return len(inf.GetStore().ListKeys()) == 0 })
	poll(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 4 }) // add, update (old and new), delete
	mu.Lock()
	defer mu.Unlock()
	for _, o := range seen {
		same("event", o)
	}
	for _, o := range indexed {
		if _, ok := o.(*corev1.Pod); !ok {
			t.Errorf("an index function got %T, want *corev1.Pod", o)
		}
	}
}

func TestInformerOfOtherTypes(t *testing.T) {
	inf := NewInformer(fcache.NewFakeControllerSource(), &corev1.Node{}, 0, toolscache.Indexers{})
	if _, ok := inf.(*informer); ok {
		t.Error("a Node informer packs")
	}
}

func TestUnpackTombstone(t *testing.T) {
	pod := podcachetest.Pod("shop", 1, podcachetest.Options{})
	got := unpack(toolscache.DeletedFinalStateUnknown{Key: "shop/x", Obj: compact(Slim(pod))})
	d, ok := got.(toolscache.DeletedFinalStateUnknown)
	if !ok || !equality.Semantic.DeepEqual(d.Obj, Slim(pod)) {
		t.Errorf("unpack(tombstone) = %#v, want the tombstone of the slim pod", got)
	}
}

func poll(t *testing.T, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatal("condition not met within 10 s")
	}
}
