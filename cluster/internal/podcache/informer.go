// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewInformer is the cache's informer constructor (cache.Options.NewInformer). Informers of other
// types are client-go's. The pod informer stores each pod packed (compactPod: a few hundred bytes
// where the slim *corev1.Pod takes several KB) and hands out the slim *corev1.Pod everywhere the
// cache's users look: its store and indexer (the cache's Get and List), its index functions and
// its event handlers. The controllers keep reading *corev1.Pod, equal to what Slim returns.
//
// Each read unpacks the pod anew (a few hundred nanoseconds and one slim pod's allocations, which
// the cache's deep copy of a read cost before), so the cache's reads are copies even with
// UnsafeDisableDeepCopy.
//
// The pods are slimmed by the informer itself: the cache's transform for pods (ByObject,
// DefaultTransform) is not applied to them.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*corev1.Pod); !ok {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	inner := toolscache.NewSharedIndexInformer(lw, obj, resync, unpackingIndexers(indexers))
	i := &informer{SharedIndexInformer: inner}
	_ = inner.SetTransform(i.transform(nil)) // not started: cannot fail
	return i
}

// informer is a SharedIndexInformer whose store holds compactPods.
type informer struct {
	toolscache.SharedIndexInformer
}

// transform packs pods and passes anything else (tombstones, packed pods coming through again on
// a relist) to next, as the informer requires of a transform: idempotent.
func (i *informer) transform(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *compactPod:
			return o, nil
		case *corev1.Pod:
			return compact(Slim(o)), nil
		}
		if next == nil {
			return obj, nil
		}
		return next(obj)
	}
}

func (i *informer) SetTransform(t toolscache.TransformFunc) error {
	return i.SharedIndexInformer.SetTransform(i.transform(t))
}

func (i *informer) AddIndexers(indexers toolscache.Indexers) error {
	return i.SharedIndexInformer.AddIndexers(unpackingIndexers(indexers))
}

func (i *informer) GetStore() toolscache.Store { return indexer{i.SharedIndexInformer.GetIndexer()} }

func (i *informer) GetIndexer() toolscache.Indexer {
	return indexer{i.SharedIndexInformer.GetIndexer()}
}

func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(handler{h})
}

func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(handler{h}, resync)
}

func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(handler{h}, o)
}

// unpack returns the pod a stored item stands for; other items unchanged.
func unpack(obj any) any {
	switch o := obj.(type) {
	case *compactPod:
		return o.pod()
	case toolscache.DeletedFinalStateUnknown:
		o.Obj = unpack(o.Obj)
		return o
	}
	return obj
}

func unpackAll(objs []any) []any {
	for i, o := range objs {
		objs[i] = unpack(o) // the store's List and ByIndex return a new slice
	}
	return objs
}

// pack is the transform for items written to the store directly (not through the informer).
func pack(obj any) any {
	if p, ok := obj.(*corev1.Pod); ok {
		return compact(Slim(p))
	}
	return obj
}

func unpackingIndexers(in toolscache.Indexers) toolscache.Indexers {
	out := make(toolscache.Indexers, len(in))
	for name, f := range in {
		if name == toolscache.NamespaceIndex {
			out[name] = f // meta.Accessor: compactPod has its metadata
			continue
		}
		out[name] = func(obj any) ([]string, error) { return f(unpack(obj)) }
	}
	return out
}

// handler hands the pods of the informer's events to h unpacked.
type handler struct {
	h toolscache.ResourceEventHandler
}

func (h handler) OnAdd(obj any, initial bool) { h.h.OnAdd(unpack(obj), initial) }
func (h handler) OnUpdate(old, cur any)       { h.h.OnUpdate(unpack(old), unpack(cur)) }
func (h handler) OnDelete(obj any)            { h.h.OnDelete(unpack(obj)) }

// indexer is the informer's store seen as holding slim pods.
type indexer struct{ toolscache.Indexer }

func (x indexer) Add(obj any) error    { return x.Indexer.Add(pack(obj)) }
func (x indexer) Update(obj any) error { return x.Indexer.Update(pack(obj)) }
func (x indexer) Delete(obj any) error { return x.Indexer.Delete(pack(obj)) }
func (x indexer) List() []any          { return unpackAll(x.Indexer.List()) }

func (x indexer) Get(obj any) (any, bool, error) {
	item, ok, err := x.Indexer.Get(pack(obj))
	return unpack(item), ok, err
}

func (x indexer) GetByKey(key string) (any, bool, error) {
	item, ok, err := x.Indexer.GetByKey(key)
	return unpack(item), ok, err
}

func (x indexer) Replace(objs []any, rv string) error {
	packed := make([]any, len(objs))
	for i, o := range objs {
		packed[i] = pack(o)
	}
	return x.Indexer.Replace(packed, rv)
}

func (x indexer) Index(name string, obj any) ([]any, error) {
	items, err := x.Indexer.Index(name, pack(obj))
	return unpackAll(items), err
}

func (x indexer) ByIndex(name, value string) ([]any, error) {
	items, err := x.Indexer.ByIndex(name, value)
	return unpackAll(items), err
}

func (x indexer) AddIndexers(indexers toolscache.Indexers) error {
	return x.Indexer.AddIndexers(unpackingIndexers(indexers))
}

// Packed is the pod the pod informer hands out for pod: Slim(pod), packed and unpacked. The
// controllers' tests prove their decisions on it.
func Packed(pod *corev1.Pod) *corev1.Pod { return compact(Slim(pod)).pod() }
