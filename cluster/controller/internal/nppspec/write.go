// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/cachewait"
)

// Apply makes the probes owns accepts in npp's spec equal to desired, leaving every other probe
// as it is. npp is the object as last seen (normally from the informer cache). Nothing is
// written when the merged spec equals the current one. The write is a merge patch carrying
// npp's resourceVersion, so a concurrent writer (the other mapping controller) is never
// overwritten: on a conflict the object is read again through live (an uncached reader) and the
// merge redone. It reports whether it wrote, and returns a NotFound error if the object is gone.
func Apply(ctx context.Context, c client.Client, live client.Reader, npp *v1alpha1.NodePodProbe, owns Owner, desired []v1alpha1.PodProbe) (bool, error) {
	cur := npp
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		merged := Merge(cur.Spec.PodProbes, owns, desired)
		if Equal(merged, cur.Spec.PodProbes) {
			return nil
		}
		body, err := specPatch(cur.ResourceVersion, merged)
		if err != nil {
			return err
		}
		obj := &v1alpha1.NodePodProbe{}
		obj.Name = cur.Name
		err = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
		if apierrors.IsConflict(err) {
			fresh := &v1alpha1.NodePodProbe{}
			if gerr := live.Get(ctx, client.ObjectKey{Name: cur.Name}, fresh); gerr != nil {
				return gerr
			}
			cur = fresh
			return err
		}
		if err != nil {
			return err
		}
		wrote = true
		if obj.ResourceVersion != cur.ResourceVersion {
			// The next reconcile of this node must not merge into the version before this write.
			cachewait.Until(ctx, c, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: cur.Name}}, cur.ResourceVersion)
		}
		return nil
	})
	if err != nil {
		return wrote, fmt.Errorf("patching NodePodProbe %s spec: %w", npp.Name, err)
	}
	return wrote, nil
}

// specPatch is a JSON merge patch that replaces spec.podProbes as a whole (merge patches replace
// lists) under resourceVersion as an optimistic lock.
func specPatch(resourceVersion string, pods []v1alpha1.PodProbe) ([]byte, error) {
	var list any = pods
	if len(pods) == 0 {
		list = nil // null removes the field
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"podProbes": list},
	})
}
