// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

func heartbeat(ns, name, holder string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now}}
}

// The heartbeat Lease policy: in probeshim-node-lease only the node a Lease is named after writes
// it, holding it itself; the cluster deployment deletes the Leases of deleted nodes.
func TestNodeLeasePolicy(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	// What rbac-nodes.yaml grants the node identities in the namespace (every Lease there).
	all := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "create", "update", "patch", "delete"}}
	for _, u := range []string{"system:node:lease-a", "system:node:lease-b", "probeshim:node:lease-c", clusterUser} {
		grant(t, nodeLeaseNamespace, u, all)
	}
	a, b := kubelet(t, "lease-a"), kubelet(t, "lease-b")
	denied := func(t *testing.T, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Fatalf("want a denial, got %v", err)
		}
		if want != "" && !strings.Contains(err.Error(), want) {
			t.Fatalf("denial lacks %q: %v", want, err)
		}
	}

	// RBAC and the policy take effect a moment after they are written.
	poll.Eventually(t, 15*time.Second, func() error { return b.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-b", "lease-b")) })
	poll.Eventually(t, 15*time.Second, func() error {
		err := a.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-b2", "lease-b2"))
		if err == nil || !strings.Contains(err.Error(), "may not write the heartbeat Lease") {
			_ = testEnv.admin.Delete(ctx, heartbeat(nodeLeaseNamespace, "lease-b2", ""))
			return err
		}
		return nil
	})

	t.Run("a node creates and renews its own Lease", func(t *testing.T) {
		own := heartbeat(nodeLeaseNamespace, "lease-a", "lease-a")
		if err := a.Create(ctx, own); err != nil {
			t.Fatal(err)
		}
		own.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(time.Second)))
		if err := a.Update(ctx, own); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not another node's Lease", func(t *testing.T) {
		denied(t, a.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-x", "lease-x")),
			"user system:node:lease-a may not write the heartbeat Lease probeshim-node-lease/lease-x: only node lease-x may (system:node:lease-x or probeshim:node:lease-x)")
		other := &coordinationv1.Lease{}
		if err := testEnv.admin.Get(ctx, client.ObjectKey{Namespace: nodeLeaseNamespace, Name: "lease-b"}, other); err != nil {
			t.Fatal(err)
		}
		other.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(time.Minute)))
		denied(t, a.Update(ctx, other), "may not write the heartbeat Lease probeshim-node-lease/lease-b: only node lease-b may")
	})
	t.Run("not a Lease held by another", func(t *testing.T) {
		own := &coordinationv1.Lease{}
		if err := a.Get(ctx, client.ObjectKey{Namespace: nodeLeaseNamespace, Name: "lease-a"}, own); err != nil {
			t.Fatal(err)
		}
		own.Spec.HolderIdentity = ptr.To("lease-b")
		denied(t, a.Update(ctx, own), "the heartbeat Lease probeshim-node-lease/lease-a must be held by its node: spec.holderIdentity lease-b is not lease-a")
	})
	t.Run("a dedicated node identity writes its own", func(t *testing.T) {
		c := as(t, "probeshim:node:lease-c", "probeshim:nodes")
		if err := c.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-c", "lease-c")); err != nil {
			t.Fatal(err)
		}
		denied(t, c.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-y", "lease-y")), "may not write the heartbeat Lease probeshim-node-lease/lease-y")
	})
	t.Run("the cluster deployment renews a Lease on its node's behalf", func(t *testing.T) {
		// The heartbeat relay (cluster/leaserelay), for nodes on the kubelet's identity.
		c := clusterClient(t)
		l := heartbeat(nodeLeaseNamespace, "lease-d", "lease-d")
		if err := c.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(time.Second)))
		if err := c.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		// Still held by the node it is named after.
		denied(t, c.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-e", "someone")), "must be held by its node")
	})
	t.Run("nobody else writes the spec", func(t *testing.T) {
		denied(t, testEnv.admin.Create(ctx, heartbeat(nodeLeaseNamespace, "lease-z", "lease-z")), "user ")
	})
	t.Run("a node deletes no other node's Lease", func(t *testing.T) {
		denied(t, a.Delete(ctx, heartbeat(nodeLeaseNamespace, "lease-b", "")), "node lease-a may not delete the heartbeat Lease of node lease-b")
	})
	t.Run("the cluster deployment deletes Leases", func(t *testing.T) {
		if err := clusterClient(t).Delete(ctx, heartbeat(nodeLeaseNamespace, "lease-b", "")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Leases elsewhere are not the policy's", func(t *testing.T) {
		if err := testEnv.admin.Create(ctx, heartbeat("games", "lease-a", "someone")); err != nil {
			t.Fatal(err)
		}
	})
}
