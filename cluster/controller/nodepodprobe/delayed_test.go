// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// Many NodePodProbe changes for one marker within the delay become one recompute of its status;
// an update maps both the old and the new object.
func TestDelayedFoldsChanges(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := delayed(nppToMarkers, 200*time.Millisecond)
	npp := func(marker string) *v1alpha1.NodePodProbe {
		return &v1alpha1.NodePodProbe{Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{
			Namespace: "ns", Name: "p", UID: "u", Probes: []v1alpha1.ContainerProbe{{Name: marker + "#idle", ContainerName: "main"}}}}}}
	}
	ctx := context.Background()
	for range 100 {
		h.Update(ctx, event.UpdateEvent{ObjectOld: npp("old"), ObjectNew: npp("new")}, q)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests queued at once, want them delayed", n)
	}
	poll.Eventually(t, 5*time.Second, func() error {
		if n := q.Len(); n != 2 {
			return fmt.Errorf("%d requests queued, want 2 (old and new marker)", n)
		}
		return nil
	})
	got := map[types.NamespacedName]bool{}
	for q.Len() > 0 {
		r, _ := q.Get()
		got[r.NamespacedName] = true
		q.Done(r)
	}
	for _, want := range []string{"old", "new"} {
		if !got[types.NamespacedName{Namespace: "ns", Name: want}] {
			t.Errorf("marker %s not queued: %v", want, got)
		}
	}
}
