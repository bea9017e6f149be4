// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package cachewait lets a reconciler wait, after a write, until the informer cache has seen it.
//
// Without it the next reconcile of the same object (queued by the write's own intermediate event,
// or by an unrelated one) may read the object as it was before the write and send the same change
// again: a redundant write, or a conflict.
package cachewait

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Timeout bounds the wait; past it the caller goes on (at worst one redundant write later).
const Timeout = 2 * time.Second

// Until polls cache for obj's key until its resourceVersion is none of stale (versions known to
// be older than the caller's last write), or the object is gone, or Timeout passes. obj is used
// as scratch space. Resource versions are only compared for equality, never ordered.
func Until(ctx context.Context, cache client.Reader, obj client.Object, stale ...string) {
	key := client.ObjectKeyFromObject(obj)
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	for {
		if err := cache.Get(ctx, key, obj); err != nil || !slices.Contains(stale, obj.GetResourceVersion()) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Created polls cache until obj's key exists there, or Timeout passes.
func Created(ctx context.Context, cache client.Reader, obj client.Object) {
	key := client.ObjectKeyFromObject(obj)
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	for {
		if err := cache.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
