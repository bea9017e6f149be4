// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingIndexer refuses a second index of the same name, as the manager's cache does.
type countingIndexer struct{ fields map[string]int }

func (c *countingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	c.fields[field]++
	if c.fields[field] > 1 {
		return errors.New("indexer conflict")
	}
	return nil
}

// One PodIndex per manager: the controllers sharing it index once; another manager's PodIndex
// indexes its own cache, untouched by the first (nothing is remembered process-wide).
func TestPodIndexOncePerManager(t *testing.T) {
	a, b := &countingIndexer{fields: map[string]int{}}, &countingIndexer{fields: map[string]int{}}
	ia := NewPodIndex(a)
	for range 2 {
		if err := ia.Ensure(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := NewPodIndex(b).Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.fields[PodNodeIndex] != 1 || b.fields[PodNodeIndex] != 1 {
		t.Errorf("indexed %d and %d times, want once each", a.fields[PodNodeIndex], b.fields[PodNodeIndex])
	}
}
