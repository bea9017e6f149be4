// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/shim/kube/kubetest"
)

const node = "node-a"

type harness struct {
	late    string // what Config.ProbesLate says
	t       *testing.T
	client  *fake.Clientset
	clock   *clocktesting.FakeClock
	h       *Heartbeat
	healthy error
	logs    *logtest.Hook
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	x := &harness{t: t, client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), logs: hook}
	x.h = New(Config{
		Node:       node,
		Client:     kubetest.Adapt(x.client),
		Healthy:    func(context.Context) error { return x.healthy },
		ProbesLate: func() string { return x.late },
		Registerer: prometheus.NewRegistry(),
		Log:        logger,
		Clock:      x.clock,
	})
	return x
}

func (x *harness) lease() *coordinationv1.Lease {
	x.t.Helper()
	l, err := x.client.CoordinationV1().Leases(DefaultNamespace).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		x.t.Fatalf("lease: %v", err)
	}
	return l
}

func (x *harness) leaseMissing() bool {
	_, err := x.client.CoordinationV1().Leases(DefaultNamespace).Get(context.Background(), node, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (x *harness) warnings() int {
	n := 0
	for _, e := range x.logs.AllEntries() {
		if e.Level == logrus.WarnLevel {
			n++
		}
	}
	return n
}

func nodeObject() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-of-node-a"}}
}

// The first step creates the lease in the agreed shape, owned by the node.
func TestCreatesLease(t *testing.T) {
	x := newHarness(t, nodeObject())
	x.h.Step(context.Background())
	l := x.lease()
	if *l.Spec.HolderIdentity != node || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(x.clock.Now()) {
		t.Fatalf("spec = holder %v, duration %v, renew %v", *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds, l.Spec.RenewTime)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].Name != node ||
		l.OwnerReferences[0].UID != "uid-of-node-a" || l.OwnerReferences[0].APIVersion != "v1" {
		t.Fatalf("owner references = %+v", l.OwnerReferences)
	}
	st := x.h.Status()
	if !st.Renewing || !st.LastRenew.Equal(x.clock.Now()) || st.Namespace != DefaultNamespace || st.Name != node {
		t.Fatalf("status = %+v", st)
	}
	if got := testutil.ToFloat64(x.h.lastRenew); got != float64(x.clock.Now().Unix()) {
		t.Fatalf("last renew metric = %v", got)
	}
}

// Run renews at once and then every RenewInterval: renewTime advances with
// the clock.
func TestRunRenews(t *testing.T) {
	x := newHarness(t, nodeObject())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.h.Run(ctx) }()
	defer func() { cancel(); <-done }() //nolint:errcheck // Run ends with the context's error

	first := x.clock.Now()
	waitFor(t, "the first renewal", func() bool { return !x.leaseMissing() && x.lease().Spec.RenewTime.Time.Equal(first) })
	for i := 1; i <= 3; i++ {
		waitFor(t, "Run to wait on its ticker", func() bool { return x.clock.HasWaiters() })
		x.clock.Step(DefaultRenewInterval)
		want := first.Add(time.Duration(i) * DefaultRenewInterval)
		waitFor(t, "renewTime "+want.String(), func() bool { return x.lease().Spec.RenewTime.Time.Equal(want) })
	}
}

// After the first, a renewal is one update of the lease as last written; a
// lease changed or deleted by someone else is read (or created) again.
func TestRenewIsOneUpdate(t *testing.T) {
	x := newHarness(t, nodeObject())
	x.h.Step(context.Background())
	x.client.ClearActions()
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if acts := x.client.Actions(); len(acts) != 1 || acts[0].GetVerb() != "update" || acts[0].GetResource().Resource != "leases" {
		t.Fatalf("actions of a renewal = %v, want one lease update", acts)
	}

	if err := x.client.CoordinationV1().Leases(DefaultNamespace).Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if l := x.lease(); !l.Spec.RenewTime.Time.Equal(x.clock.Now()) || len(l.OwnerReferences) != 1 || !x.h.Status().Renewing {
		t.Fatalf("after a deletion: lease %+v, status %+v", l, x.h.Status())
	}
}

// While the service is unhealthy nothing is written, the status says why
// and the warning is logged once, not once per period.
func TestSkipsWhenUnhealthy(t *testing.T) {
	x := newHarness(t, nodeObject())
	x.h.Step(context.Background())
	renewed := x.lease().Spec.RenewTime.Time

	x.healthy = errors.New("container runtime: containerd gone")
	for range 3 {
		x.clock.Step(DefaultRenewInterval)
		x.h.Step(context.Background())
	}
	if got := x.lease().Spec.RenewTime.Time; !got.Equal(renewed) {
		t.Fatalf("renewed while unhealthy: %v, want %v", got, renewed)
	}
	st := x.h.Status()
	if st.Renewing || !strings.Contains(st.Reason, "containerd gone") || !st.LastRenew.Equal(renewed) {
		t.Fatalf("status = %+v", st)
	}
	// `probeshim status` prints "NOT renewing: <reason>": the reason must not say it again.
	if strings.Contains(strings.ToLower(st.Reason), "renewing") {
		t.Fatalf("reason %q repeats what `probeshim status` prints before it", st.Reason)
	}
	if n := x.warnings(); n != 1 {
		t.Fatalf("%d warnings for one state change, want 1", n)
	}
	if e := x.logs.LastEntry(); !strings.HasPrefix(e.Message, "not renewing the lease: ") {
		t.Fatalf("warning %q does not say the lease is not renewed", e.Message)
	}
	if got := testutil.ToFloat64(x.h.skipped); got != 3 {
		t.Fatalf("skipped = %v", got)
	}

	x.healthy = nil
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if got := x.lease().Spec.RenewTime.Time; !got.Equal(x.clock.Now()) {
		t.Fatalf("not renewed once healthy: %v", got)
	}
	if st := x.h.Status(); !st.Renewing || st.Reason != "" {
		t.Fatalf("status once healthy = %+v", st)
	}
}

// A node that cannot be read leaves the lease without an owner; the owner
// is added once the node can be read.
func TestOwnerWhenNodeReadable(t *testing.T) {
	x := newHarness(t)
	x.h.Step(context.Background())
	if refs := x.lease().OwnerReferences; len(refs) != 0 {
		t.Fatalf("owner references without a node: %+v", refs)
	}
	if !x.h.Status().Renewing {
		t.Fatalf("an unreadable node must not stop renewals: %+v", x.h.Status())
	}
	if err := x.client.Tracker().Add(nodeObject()); err != nil {
		t.Fatal(err)
	}
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if refs := x.lease().OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-of-node-a" {
		t.Fatalf("owner references once the node is readable: %+v", refs)
	}
}

// A missing namespace or a refusal is reported with what to do, counted,
// and retried on the next period; it never stops the heartbeat.
func TestAPIRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		advice string
	}{
		{"namespace missing", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, DefaultNamespace),
			"kubectl create namespace " + DefaultNamespace},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, node, errors.New("no RBAC")),
			"rbac-nodes.yaml"},
		// NodeRestriction's refusal for the kubelet's identity, as the API server words it.
		{"kubelet identity", apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, node,
			errors.New(`can only access leases in the "kube-node-lease" system namespace`)),
			"the heartbeat endpoint needs the kubeconfig's client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newHarness(t, nodeObject())
			refuse := true
			x.client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return refuse, nil, tc.err
			})
			for range 2 {
				x.h.Step(context.Background())
				x.clock.Step(DefaultRenewInterval)
			}
			st := x.h.Status()
			if st.Renewing || !strings.Contains(st.Reason, tc.advice) || !st.LastRenew.IsZero() {
				t.Fatalf("status = %+v, want the advice %q", st, tc.advice)
			}
			if got := testutil.ToFloat64(x.h.failures); got != 2 {
				t.Fatalf("failures = %v", got)
			}
			if n := x.warnings(); n != 1 {
				t.Fatalf("%d warnings, want 1", n)
			}
			refuse = false
			x.h.Step(context.Background())
			if x.leaseMissing() || !x.h.Status().Renewing {
				t.Fatalf("not created once allowed: %+v", x.h.Status())
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := poll.Until(context.Background(), 5*time.Second, what, func(context.Context) (bool, string, error) {
		return cond(), "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// While probes start late the lease says so (bounded), on the next renewal; once they are on time
// again the annotation goes; the relay carries the same note.
func TestLeaseSaysProbesStartLate(t *testing.T) {
	x := newHarness(t)
	ctx := context.Background()
	x.h.Step(ctx)
	if _, ok := x.lease().Annotations[v1alpha1.AnnotationProbesLate]; ok {
		t.Fatal("probes-late annotation while probes are on time")
	}
	x.late = "exec probes start late: " + strings.Repeat("x", 1000)
	x.h.Step(ctx)
	got := x.lease().Annotations[v1alpha1.AnnotationProbesLate]
	if !strings.HasPrefix(got, "exec probes start late: ") || len(got) > v1alpha1.MaxProbesLateBytes {
		t.Errorf("annotation %q (%d bytes), want the note within %d bytes", got, len(got), v1alpha1.MaxProbesLateBytes)
	}
	x.late = ""
	x.h.Step(ctx)
	if a, ok := x.lease().Annotations[v1alpha1.AnnotationProbesLate]; ok {
		t.Errorf("annotation %q left after probes are on time again", a)
	}
}
