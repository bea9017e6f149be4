// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package leaserelay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

const ns = "probeshim-node-lease"

// ca issues the client certificates the relay is shown.
type ca struct{ *testpki.CA }

func newCA(t *testing.T) *ca { return &ca{testpki.NewCA(t)} }

// client issues a client certificate for cn in orgs, valid from notBefore to notAfter.
func (c *ca) client(t *testing.T, cn string, orgs []string, notBefore, notAfter time.Time) *x509.Certificate {
	return c.Issue(t, testpki.Leaf{CN: cn, Orgs: orgs, NotBefore: notBefore, NotAfter: notAfter}).Cert
}

func (c *ca) valid(t *testing.T, cn string, orgs ...string) *x509.Certificate {
	return c.Issue(t, testpki.Leaf{CN: cn, Orgs: orgs}).Cert
}

type harness struct {
	relay  *Relay
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	loaded bool
}

func newHarness(t *testing.T, trusted *ca) *harness {
	t.Helper()
	x := &harness{client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a"}}),
		clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), loaded: true}
	pool := x509.NewCertPool()
	pool.AddCert(trusted.Cert)
	x.relay = New(Options{
		Client: x.client, Namespace: ns, NodeUserPrefix: "probeshim:node:", NodeGroup: "probeshim:nodes",
		ClientCA: func() (x509.VerifyOptions, bool) {
			return x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, x.loaded
		},
		Clock: x.clock, Registry: prometheus.NewRegistry(), Log: logr.Discard(),
	})
	return x
}

// post sends a heartbeat for node with cert (nil: none) and returns the answer.
func (x *harness) post(cert *x509.Certificate, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, heartbeatapi.Path, strings.NewReader(body))
	if cert != nil {
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	}
	rec := httptest.NewRecorder()
	x.relay.ServeHTTP(rec, req)
	return rec
}

func heartbeat(node string) string {
	b, _ := json.Marshal(heartbeatapi.Request{Node: node, LeaseDurationSeconds: 40})
	return string(b)
}

// Every outcome's series is there at zero before the first heartbeat: a rate or an alert sees the
// first refusal.
func TestOutcomesAtZero(t *testing.T) {
	x := newHarness(t, newCA(t))
	if n := testutil.CollectAndCount(x.relay.requests); n != len(relayOutcomes) {
		t.Errorf("%d series, want one per outcome (%d)", n, len(relayOutcomes))
	}
	for _, o := range relayOutcomes {
		if got := testutil.ToFloat64(x.relay.requests.WithLabelValues(o)); got != 0 {
			t.Errorf("%s = %v, want 0", o, got)
		}
	}
}

// A kubelet's certificate from the API server's client CA renews that node's Lease: held by the
// node, owned by its Node, renewed at the relay's time.
func TestKubeletIdentityRenews(t *testing.T) {
	trusted := newCA(t)
	x := newHarness(t, trusted)
	rec := x.post(trusted.valid(t, "system:node:node-a", "system:nodes"), heartbeat("node-a"))
	if rec.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
	l, err := x.client.CoordinationV1().Leases(ns).Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "node-a" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(x.clock.Now()) {
		t.Fatalf("lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "uid-a" || l.OwnerReferences[0].Kind != "Node" {
		t.Fatalf("owner = %+v", l.OwnerReferences)
	}
	var resp heartbeatapi.Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.RenewTime == "" {
		t.Fatalf("response %q: %v", rec.Body, err)
	}
	// Renewed again: one update, renewTime follows the clock.
	x.clock.Step(10 * time.Second)
	if rec := x.post(trusted.valid(t, "system:node:node-a", "system:nodes"), heartbeat("node-a")); rec.Code != http.StatusOK {
		t.Fatalf("second renewal %d: %s", rec.Code, rec.Body)
	}
	l, _ = x.client.CoordinationV1().Leases(ns).Get(context.Background(), "node-a", metav1.GetOptions{})
	if !l.Spec.RenewTime.Time.Equal(x.clock.Now()) {
		t.Fatalf("renewTime %v, want %v", l.Spec.RenewTime, x.clock.Now())
	}
	if got := testutil.ToFloat64(x.relay.requests.WithLabelValues("renewed")); got != 2 {
		t.Fatalf("renewed = %v", got)
	}
}

// The node's probes-late note lands on its Lease, bounded, and goes when a renewal carries none.
func TestProbesLateNote(t *testing.T) {
	trusted := newCA(t)
	x := newHarness(t, trusted)
	cert := trusted.valid(t, "system:node:node-a", "system:nodes")
	note := func() (string, bool) {
		l, err := x.client.CoordinationV1().Leases(ns).Get(context.Background(), "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := l.Annotations[v1alpha1.AnnotationProbesLate]
		return v, ok
	}
	b, _ := json.Marshal(heartbeatapi.Request{Node: "node-a", LeaseDurationSeconds: 40, ProbesLate: "exec probes start late: " + strings.Repeat("x", 800)})
	if rec := x.post(cert, string(b)); rec.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
	if v, _ := note(); !strings.HasPrefix(v, "exec probes start late: ") || len(v) > v1alpha1.MaxProbesLateBytes {
		t.Errorf("annotation %q (%d bytes), want the note within %d bytes", v, len(v), v1alpha1.MaxProbesLateBytes)
	}
	x.clock.Step(10 * time.Second)
	if rec := x.post(cert, heartbeat("node-a")); rec.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
	if v, ok := note(); ok {
		t.Errorf("annotation %q left by a renewal without a note", v)
	}
}

// The dedicated identity works too.
func TestDedicatedIdentityRenews(t *testing.T) {
	trusted := newCA(t)
	x := newHarness(t, trusted)
	if rec := x.post(trusted.valid(t, "probeshim:node:node-b", "probeshim:nodes"), heartbeat("node-b")); rec.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
	if _, err := x.client.CoordinationV1().Leases(ns).Get(context.Background(), "node-b", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Everything that is not a node's own valid certificate naming itself is refused, and writes
// nothing.
func TestRefusals(t *testing.T) {
	trusted, other := newCA(t), newCA(t)
	now := time.Now()
	for _, c := range []struct {
		name string
		cert *x509.Certificate
		body string
		code int
	}{
		{"no certificate", nil, heartbeat("node-a"), http.StatusUnauthorized},
		{"another CA", other.valid(t, "system:node:node-a", "system:nodes"), heartbeat("node-a"), http.StatusUnauthorized},
		{"expired", trusted.client(t, "system:node:node-a", []string{"system:nodes"}, now.Add(-2*time.Hour), now.Add(-time.Hour)), heartbeat("node-a"), http.StatusUnauthorized},
		{"not yet valid", trusted.client(t, "system:node:node-a", []string{"system:nodes"}, now.Add(time.Hour), now.Add(2*time.Hour)), heartbeat("node-a"), http.StatusUnauthorized},
		{"node CN without the nodes group", trusted.valid(t, "system:node:node-a", "system:authenticated"), heartbeat("node-a"), http.StatusForbidden},
		{"nodes group, CN no node", trusted.valid(t, "alice", "system:nodes"), heartbeat("alice"), http.StatusForbidden},
		{"dedicated CN in the kubelets' group", trusted.valid(t, "probeshim:node:node-a", "system:nodes"), heartbeat("node-a"), http.StatusForbidden},
		{"kubelet CN in the dedicated group", trusted.valid(t, "system:node:node-a", "probeshim:nodes"), heartbeat("node-a"), http.StatusForbidden},
		{"a node naming another node", trusted.valid(t, "system:node:node-a", "system:nodes"), heartbeat("node-b"), http.StatusForbidden},
		{"an invalid node name", trusted.valid(t, "system:node:Node_A", "system:nodes"), heartbeat("Node_A"), http.StatusForbidden},
		{"no body", trusted.valid(t, "system:node:node-a", "system:nodes"), "", http.StatusBadRequest},
		{"a large body", trusted.valid(t, "system:node:node-a", "system:nodes"), `{"node":"node-a","leaseDurationSeconds":40,"x":"` + strings.Repeat("x", 4096) + `"}`, http.StatusBadRequest},
		{"a lease for a day", trusted.valid(t, "system:node:node-a", "system:nodes"), `{"node":"node-a","leaseDurationSeconds":86400}`, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newHarness(t, trusted)
			rec := x.post(c.cert, c.body)
			if rec.Code != c.code {
				t.Fatalf("answer %d (%s), want %d", rec.Code, strings.TrimSpace(rec.Body.String()), c.code)
			}
			if l, _ := x.client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
				t.Fatalf("leases written: %v", l.Items)
			}
		})
	}
}

// Until the client CA is loaded every request is refused, as unavailable rather than
// unauthenticated.
func TestCANotLoaded(t *testing.T) {
	trusted := newCA(t)
	x := newHarness(t, trusted)
	x.loaded = false
	if rec := x.post(trusted.valid(t, "system:node:node-a", "system:nodes"), heartbeat("node-a")); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("answer %d: %s", rec.Code, rec.Body)
	}
}

// A node that sends more than its burst at once is throttled; another node is not, and the
// throttled one is served again as time passes.
func TestRatePerNode(t *testing.T) {
	trusted := newCA(t)
	x := newHarness(t, trusted)
	a := trusted.valid(t, "system:node:node-a", "system:nodes")
	for i := range DefaultBurst {
		if rec := x.post(a, heartbeat("node-a")); rec.Code != http.StatusOK {
			t.Fatalf("renewal %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	if rec := x.post(a, heartbeat("node-a")); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("renewal past the burst: %d %s", rec.Code, rec.Body)
	}
	if rec := x.post(trusted.valid(t, "system:node:node-b", "system:nodes"), heartbeat("node-b")); rec.Code != http.StatusOK {
		t.Fatalf("another node: %d %s", rec.Code, rec.Body)
	}
	x.clock.Step(2 * time.Second)
	if rec := x.post(a, heartbeat("node-a")); rec.Code != http.StatusOK {
		t.Fatalf("after a while: %d %s", rec.Code, rec.Body)
	}
}
