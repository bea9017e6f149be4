// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/probeshim/probeshim/internal/heartbeatapi"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
	"github.com/probeshim/probeshim/shim/kube/kubetest"
)

// fakeRelay records renewals and answers err.
type fakeRelay struct {
	mu     sync.Mutex
	calls  []time.Duration
	notes  []string // each call's ProbesLate
	err    error
	target string
}

func (f *fakeRelay) Renew(_ context.Context, r heartbeatapi.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Node != node {
		return errors.New("wrong node " + r.Node)
	}
	f.calls = append(f.calls, time.Duration(r.LeaseDurationSeconds)*time.Second)
	f.notes = append(f.notes, r.ProbesLate)
	return f.err
}

func (f *fakeRelay) Endpoint() string { return f.target }

// nodeRestriction makes the API server refuse every lease write as NodeRestriction does for a
// kubelet's identity, and counts the attempts.
func nodeRestriction(x *harness) *int {
	n := new(int)
	for _, verb := range []string{"create", "update"} {
		x.client.PrependReactor(verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			*n++
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, node,
				errors.New(`can only access leases in the "kube-node-lease" system namespace`))
		})
	}
	return n
}

// On the kubelet's identity the lease goes through the endpoint: after NodeRestriction's first
// refusal every renewal is the relay's (the API server is not asked again), only while healthy,
// and the status says which path renews.
func TestFallsBackToRelay(t *testing.T) {
	x := newHarness(t, nodeObject())
	relay := &fakeRelay{target: "https://10.96.0.9:443"}
	x.h.cfg.Relay = relay
	direct := nodeRestriction(x)

	x.h.Step(context.Background())
	st := x.h.Status()
	if !st.Renewing || st.Path != "endpoint https://10.96.0.9:443" || !st.LastRenew.Equal(x.clock.Now()) {
		t.Fatalf("status = %+v", st)
	}
	for range 2 {
		x.clock.Step(DefaultRenewInterval)
		x.h.Step(context.Background())
	}
	if len(relay.calls) != 3 || relay.calls[0] != DefaultLeaseDuration {
		t.Fatalf("relay renewals = %v, want 3 of %s", relay.calls, DefaultLeaseDuration)
	}
	if *direct != 1 {
		t.Fatalf("%d direct writes, want the one NodeRestriction refused", *direct)
	}

	x.healthy = errors.New("container runtime: containerd gone")
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if len(relay.calls) != 3 {
		t.Fatalf("renewed through the relay while unhealthy: %d", len(relay.calls))
	}
	x.healthy = nil

	relay.err = &RelayError{Code: http.StatusForbidden, Message: "user system:node:node-a (groups [system:authenticated]) is no node identity"}
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if st := x.h.Status(); st.Renewing || !strings.Contains(st.Reason, "refused this node's client certificate") || !strings.HasPrefix(st.Path, "endpoint ") {
		t.Fatalf("status after a refusal = %+v", st)
	}
	relay.err = errors.New("dial tcp 10.96.0.9:443: connect: connection refused")
	x.clock.Step(DefaultRenewInterval)
	x.h.Step(context.Background())
	if st := x.h.Status(); st.Renewing || !strings.Contains(st.Reason, "reaches Services (kube-proxy)") {
		t.Fatalf("status when unreachable = %+v", st)
	}
}

// An identity that may write its lease never uses the relay.
func TestDirectNeverRelays(t *testing.T) {
	x := newHarness(t, nodeObject())
	relay := &fakeRelay{}
	x.h.cfg.Relay = relay
	x.h.Step(context.Background())
	if st := x.h.Status(); !st.Renewing || st.Path != "direct" || len(relay.calls) != 0 {
		t.Fatalf("status = %+v, relay calls %d", st, len(relay.calls))
	}
}

// ---- RelayClient against a TLS server ----

// testCA issues kubelet client certificates (group system:nodes) and server certificates.
type testCA struct{ *testpki.CA }

func newTestCA(t *testing.T) *testCA { return &testCA{testpki.NewCA(t)} }

// issue returns PEM certificate and key for cn, a server certificate for dns when given.
func (c *testCA) issue(t *testing.T, cn string, dns ...string) (certPEM, keyPEM []byte) {
	l := c.Issue(t, testpki.Leaf{CN: cn, Orgs: []string{"system:nodes"}, DNS: dns, NotBefore: time.Now().Add(-time.Hour)})
	return l.CertPEM, l.KeyPEM
}

// The client finds the endpoint from the published ConfigMap and Service, verifies it with the
// published CA and server name, authenticates with the kubeconfig's certificate file — read
// again for every heartbeat, so a rotated certificate is used at once — and reports refusals.
func TestRelayClient(t *testing.T) {
	serverCA, clientCA := newTestCA(t), newTestCA(t)
	const serverName = "probeshim-webhook.probeshim-system.svc"
	sc, sk := serverCA.issue(t, "server", serverName)
	serving, err := tls.X509KeyPair(sc, sk)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string  // the client certificates' CNs, per request
	var notes []string // the probes-late notes, per request the server took
	answer := http.StatusOK
	oldServer := false // answers as an endpoint older than ProbesLate
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body heartbeatapi.Request
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		strict := oldServer
		mu.Unlock()
		if strict { // the Request as it was before ProbesLate
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var before struct {
				Node                 string `json:"node"`
				LeaseDurationSeconds int32  `json:"leaseDurationSeconds"`
			}
			if err := dec.Decode(&before); err != nil {
				http.Error(w, "the body is no heartbeat request: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		if err := json.Unmarshal(raw, &body); r.URL.Path != heartbeatapi.Path || err != nil || body.Node != node || body.LeaseDurationSeconds != 40 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		notes = append(notes, body.ProbesLate)
		code := answer
		mu.Unlock()
		if code != http.StatusOK {
			http.Error(w, "no node identity", code)
			return
		}
		_ = json.NewEncoder(w).Encode(heartbeatapi.Response{RenewTime: time.Now().Format(time.RFC3339Nano)})
	}))
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	kube := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: heartbeatapi.ConfigMapName}, Data: map[string]string{
			heartbeatapi.KeyCA: string(serverCA.PEM), heartbeatapi.KeyService: "probeshim-system/probeshim-webhook:" + port, heartbeatapi.KeyServerName: serverName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "probeshim-system", Name: "probeshim-webhook"}, Spec: corev1.ServiceSpec{ClusterIP: host,
			Ports: []corev1.ServicePort{{Port: int32(p)}}}})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "kubelet-client-current.pem"), filepath.Join(dir, "key.pem")
	writeCert := func(cn string) {
		c, k := clientCA.issue(t, cn)
		if err := os.WriteFile(certFile, c, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCert("system:node:node-a")
	cert, err := ClientCertFromConfig(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: certFile, KeyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewRelayClient(RelayConfig{Kube: kubetest.Adapt(kube), Namespace: DefaultNamespace, ClientCert: cert})
	ctx := context.Background()
	renewal := heartbeatapi.Request{Node: node, LeaseDurationSeconds: 40}
	if err := c.Renew(ctx, renewal); err != nil {
		t.Fatal(err)
	}
	if want := "https://" + srv.Listener.Addr().String(); c.Endpoint() != want {
		t.Fatalf("endpoint %q, want %q", c.Endpoint(), want)
	}
	writeCert("system:node:node-a-rotated")
	if err := c.Renew(ctx, renewal); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != "system:node:node-a" || seen[1] != "system:node:node-a-rotated" {
		t.Fatalf("client certificates seen: %v", seen)
	}
	mu.Unlock()

	// The note goes along; an endpoint older than it (unknown field) still renews, without it.
	late := renewal
	late.ProbesLate = "exec probes start late"
	if err := c.Renew(ctx, late); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	oldServer = true
	mu.Unlock()
	for range 2 {
		if err := c.Renew(ctx, late); err != nil {
			t.Fatalf("renewal with a note through an older endpoint: %v", err)
		}
	}
	mu.Lock()
	if want := []string{"", "", "exec probes start late", "", ""}; !slices.Equal(notes, want) {
		t.Errorf("notes received %q, want %q", notes, want)
	}
	answer = http.StatusForbidden
	mu.Unlock()
	var refused *RelayError
	if err := c.Renew(ctx, renewal); !errors.As(err, &refused) || refused.Code != http.StatusForbidden || !strings.Contains(err.Error(), "no node identity") {
		t.Fatalf("refusal = %v", err)
	}

	// A server the published CA did not sign is not trusted.
	other := NewRelayClient(RelayConfig{Kube: kubetest.Adapt(kube), Namespace: DefaultNamespace, ClientCert: cert, CAFile: writeFile(t, dir, "other.crt", newTestCA(t).PEM)})
	if err := other.Renew(ctx, renewal); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("renewal with a server of another CA: %v", err)
	}
	// Without the ConfigMap (no cluster deployment yet) there is nothing to send to.
	none := NewRelayClient(RelayConfig{Kube: kubetest.Adapt(fake.NewClientset()), Namespace: DefaultNamespace, ClientCert: cert})
	if err := none.Renew(ctx, renewal); err == nil || !strings.Contains(err.Error(), heartbeatapi.ConfigMapName) {
		t.Fatalf("renewal without the ConfigMap: %v", err)
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A kubeconfig without a client certificate cannot use the endpoint.
func TestClientCertFromConfig(t *testing.T) {
	if _, err := ClientCertFromConfig(&rest.Config{BearerToken: "x"}); err == nil {
		t.Fatal("a token kubeconfig gave a client certificate")
	}
}
