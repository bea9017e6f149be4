// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/framework"
)

// leaseNamespace is cluster/deploy/namespace.yaml's (and the node service's
// default) home of the heartbeat leases.
const leaseNamespace = "probeshim-node-lease"

// The real node service and its lease, under both identities the rig gives
// it, with the RBAC of cluster/deploy:
//   - the kubelet's (system:node:<node>): Kubernetes' NodeRestriction
//     admission refuses every lease outside kube-node-lease, whatever RBAC
//     says; the service turns to the cluster deployment's heartbeat endpoint,
//     which this suite does not run: `probeshim status` says so, and the
//     service probes and is ready all the same (e2e/twonode covers the relay);
//   - a dedicated one (probeshim:node:<node>, group probeshim:nodes): the
//     service creates its lease, owned by its Node, and renews it,
//     renewTime advancing.
func TestHeartbeatLease(t *testing.T) {
	c := framework.Get(t)
	c.InstallCRDs(t) // also the lease namespace and the nodes' lease Role
	ctx := framework.Context(t, 3*time.Minute)
	node := c.Rig.NodeName()
	leases := c.Kube.CoordinationV1().Leases(leaseNamespace)
	if err := leases.Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	nodeObj, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const interval = 2 * time.Second
	renewEvery := []string{"--heartbeat-renew-interval-seconds", fmt.Sprint(int(interval / time.Second))}

	// StartNodeService has waited for /readyz: the refused lease held nothing back.
	kubelet := c.StartNodeService(t, renewEvery...)
	err = framework.WaitFor(ctx, 30*time.Second, "the NodeRestriction refusal in probeshim status", func(ctx context.Context) (bool, string, error) {
		st, err := kubelet.Status(ctx)
		if err != nil || st.Heartbeat == nil {
			return false, fmt.Sprint(err), nil
		}
		hb := st.Heartbeat
		// No cluster deployment runs in this suite: the fallback to its heartbeat endpoint finds none.
		return !hb.Renewing && strings.Contains(hb.Reason, "the kubelet's identity may not write it itself") &&
				strings.Contains(hb.Reason, "heartbeat endpoint"),
			fmt.Sprintf("%+v", *hb), nil
	})
	if err != nil {
		t.Fatalf("%v\nnode service log:\n%s", err, kubelet.Logs())
	}
	if _, err := leases.Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease under the kubelet's identity: %v, want none", err)
	}
	kubelet.Stop()

	dedicated, err := c.Rig.Kubeconfig("probeshim:node:"+node, "probeshim:nodes")
	if err != nil {
		t.Fatal(err)
	}
	svc := c.StartNodeService(t, append(renewEvery, "--kubeconfig", dedicated)...)

	var first *coordinationv1.Lease
	err = framework.WaitFor(ctx, 30*time.Second, "lease "+leaseNamespace+"/"+node, func(ctx context.Context) (bool, string, error) {
		l, err := leases.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		first = l
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("%v\nnode service log:\n%s", err, svc.Logs())
	}
	if h := first.Spec.HolderIdentity; h == nil || *h != node {
		t.Errorf("holderIdentity = %v, want %s", h, node)
	}
	if d := first.Spec.LeaseDurationSeconds; d == nil || *d != 40 {
		t.Errorf("leaseDurationSeconds = %v, want 40", d)
	}
	if refs := first.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != node || refs[0].UID != nodeObj.UID {
		t.Errorf("ownerReferences = %+v, want the Node %s (%s)", refs, node, nodeObj.UID)
	}

	// Renewed: renewTime advances, twice, about one interval apart.
	last := first.Spec.RenewTime.Time
	for range 2 {
		err = framework.WaitFor(ctx, 5*interval, "renewTime past "+last.Format(time.RFC3339Nano), func(ctx context.Context) (bool, string, error) {
			l, err := leases.Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if rt := l.Spec.RenewTime.Time; rt.After(last) {
				last = rt
				return true, "", nil
			}
			return false, "renewTime " + l.Spec.RenewTime.Format(time.RFC3339Nano), nil
		})
		if err != nil {
			t.Fatalf("%v\nnode service log:\n%s", err, svc.Logs())
		}
	}

	st, err := svc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hb := st.Heartbeat; hb == nil || !hb.Renewing || hb.Namespace != leaseNamespace || hb.Name != node || hb.LastRenew.IsZero() {
		t.Errorf("probeshim status heartbeat = %+v", hb)
	}
	metrics, err := svc.Get(ctx, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, "\nprobeshim_heartbeat_last_renew_timestamp_seconds ") ||
		!strings.Contains(metrics, "\nprobeshim_heartbeat_renew_failures_total 0") {
		t.Errorf("/metrics lacks the heartbeat's series or counts failures:\n%s", grepLines(metrics, "probeshim_heartbeat"))
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
