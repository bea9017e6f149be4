// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package leaserelay renews node services' heartbeat Leases on their behalf.
//
// A node service on the kubelet's identity (system:node:<name>, the default install) cannot write
// its Lease in the heartbeat namespace: the NodeRestriction admission plugin confines node users'
// Leases to kube-node-lease, whatever RBAC grants. It sends its heartbeat here instead: an HTTPS
// POST (heartbeatapi.Path) on the deployment's webhook server, with the client certificate of its
// kubeconfig. The relay verifies that certificate against the API server's own client CA — the
// bundle Kubernetes publishes for extension servers in kube-system/extension-apiserver-authentication
// (ClientCA), reloaded when it changes — accepts only node identities (system:node:<name> in
// system:nodes, or the dedicated <prefix><name> in its group), and renews the Lease named after
// that node and held by it, exactly as the node would. A node can renew only its own Lease through
// it; what it writes is bounded (one small body, a rate per node, a deadline per request).
package leaserelay

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
)

// Identities of the kubelets, as the API server's Node authorizer knows them.
const (
	kubeletUserPrefix = "system:node:"
	kubeletGroup      = "system:nodes"
)

// Defaults of Options.
const (
	// DefaultRate allows a renewal per second per node on average, far above the 10 s period,
	// with a burst of DefaultBurst for a node service that restarts or retries.
	DefaultRate  = rate.Limit(1)
	DefaultBurst = 5
	// DefaultMaxInFlight bounds the Lease writes waiting on the API server at once.
	DefaultMaxInFlight = 64
	// DefaultTimeout bounds one renewal, the API server's answers included.
	DefaultTimeout = 10 * time.Second
	// maxLeaseSeconds bounds leaseDurationSeconds: a node cannot make its Lease look valid for long.
	maxLeaseSeconds = 3600
)

// Options configure a Relay.
type Options struct {
	// Client writes the Leases (the deployment's identity) and reads the Nodes (owners).
	Client kubernetes.Interface
	// Namespace holds the heartbeat Leases.
	Namespace string
	// ClientCA gives the verify options of the API server's client CA; false while it is not
	// loaded (then every request is refused with 503).
	ClientCA func() (x509.VerifyOptions, bool)
	// NodeUserPrefix and NodeGroup name the dedicated node identities (e.g. probeshim:node: and
	// probeshim:nodes); empty: only kubelet identities are accepted.
	NodeUserPrefix, NodeGroup string
	Rate                      rate.Limit
	Burst                     int
	MaxInFlight               int
	Timeout                   time.Duration
	Clock                     clock.PassiveClock
	// Registry gets probeshim_heartbeat_relay_requests_total; nil: none.
	Registry prometheus.Registerer
	Log      logr.Logger
}

// Relay is the endpoint's http.Handler.
type Relay struct {
	o        Options
	auth     *x509request.Authenticator
	inFlight chan struct{}
	requests *prometheus.CounterVec

	mu    sync.Mutex
	nodes map[string]*nodeState
}

// nodeState is what the relay keeps per node: its rate limiter and the Lease as last written
// (an update of it needs no read; a conflict or a miss reads again).
type nodeState struct {
	limiter *rate.Limiter
	latest  *coordinationv1.Lease
	used    time.Time
}

// New returns a Relay.
func New(o Options) *Relay {
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	r := &Relay{
		o:        o,
		auth:     x509request.NewDynamic(o.ClientCA, x509request.CommonNameUserConversion),
		inFlight: make(chan struct{}, o.MaxInFlight),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probeshim_heartbeat_relay_requests_total",
			Help: "Heartbeats the relay was sent, by outcome (renewed, unauthenticated, forbidden, throttled, invalid, failed).",
		}, []string{"outcome"}),
		nodes: map[string]*nodeState{},
	}
	if o.Registry != nil {
		o.Registry.MustRegister(r.requests)
	}
	// Every outcome at zero from the start: a rate or an alert sees the first refusal.
	for _, outcome := range relayOutcomes {
		r.requests.WithLabelValues(outcome)
	}
	return r
}

// The outcomes of probeshim_heartbeat_relay_requests_total.
const (
	outcomeRenewed         = "renewed"
	outcomeUnauthenticated = "unauthenticated"
	outcomeForbidden       = "forbidden"
	outcomeThrottled       = "throttled"
	outcomeInvalid         = "invalid"
	outcomeFailed          = "failed"
)

var relayOutcomes = []string{outcomeRenewed, outcomeUnauthenticated, outcomeForbidden, outcomeThrottled, outcomeInvalid, outcomeFailed}

// refusal is an answer other than a renewal.
type refusal struct {
	code    int
	outcome string
	msg     string
}

func (e *refusal) Error() string { return e.msg }

func refuse(code int, outcome, format string, args ...any) *refusal {
	return &refusal{code: code, outcome: outcome, msg: fmt.Sprintf(format, args...)}
}

func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	resp, err := r.serve(req)
	var ref *refusal
	switch {
	case errors.As(err, &ref):
	case err != nil:
		ref = refuse(http.StatusServiceUnavailable, outcomeFailed, "renewing the Lease: %v", err)
	}
	if ref != nil {
		r.requests.WithLabelValues(ref.outcome).Inc()
		if ref.code != http.StatusTooManyRequests {
			r.o.Log.V(1).Info("heartbeat refused", "remote", req.RemoteAddr, "code", ref.code, "reason", ref.msg)
		}
		if ref.code == http.StatusTooManyRequests || ref.code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, ref.msg, ref.code)
		return
	}
	r.requests.WithLabelValues(outcomeRenewed).Inc()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp) // the client sees a short answer as a failure
}

func (r *Relay) serve(req *http.Request) (*heartbeatapi.Response, error) {
	if req.Method != http.MethodPost {
		return nil, refuse(http.StatusMethodNotAllowed, outcomeInvalid, "only POST")
	}
	node, err := r.Identify(req)
	if err != nil {
		return nil, err
	}
	var body heartbeatapi.Request
	dec := json.NewDecoder(http.MaxBytesReader(nil, req.Body, heartbeatapi.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, refuse(http.StatusBadRequest, outcomeInvalid, "the body is no heartbeat request: %v", err)
	}
	if body.Node != node {
		return nil, refuse(http.StatusForbidden, outcomeForbidden, "node %s may renew only its own Lease, not the Lease of node %q", node, body.Node)
	}
	if body.LeaseDurationSeconds < 1 || body.LeaseDurationSeconds > maxLeaseSeconds {
		return nil, refuse(http.StatusBadRequest, outcomeInvalid, "leaseDurationSeconds %d is not in [1, %d]", body.LeaseDurationSeconds, maxLeaseSeconds)
	}
	st := r.state(node)
	if !st.limiter.AllowN(r.o.Clock.Now(), 1) {
		return nil, refuse(http.StatusTooManyRequests, outcomeThrottled, "node %s renews too often", node)
	}
	select {
	case r.inFlight <- struct{}{}:
		defer func() { <-r.inFlight }()
	default:
		return nil, refuse(http.StatusTooManyRequests, outcomeThrottled, "too many renewals in flight")
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.o.Timeout)
	defer cancel()
	lease, err := r.renew(ctx, st, node, body.LeaseDurationSeconds, body.ProbesLate)
	if err != nil {
		return nil, err
	}
	return &heartbeatapi.Response{RenewTime: lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)}, nil
}

// Identify returns the node whose identity the request's client certificate carries, verified
// against the client CA; a refusal otherwise.
func (r *Relay) Identify(req *http.Request) (string, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return "", refuse(http.StatusUnauthorized, outcomeUnauthenticated, "no client certificate: send the one of the node's kubeconfig")
	}
	if _, loaded := r.o.ClientCA(); !loaded {
		return "", refuse(http.StatusServiceUnavailable, outcomeFailed, "the API server's client CA is not loaded yet")
	}
	resp, ok, err := r.auth.AuthenticateRequest(req)
	if err != nil || !ok {
		return "", refuse(http.StatusUnauthorized, outcomeUnauthenticated, "the client certificate is not one the API server accepts: %v", err)
	}
	name, groups := resp.User.GetName(), resp.User.GetGroups()
	node := ""
	switch {
	case strings.HasPrefix(name, kubeletUserPrefix) && slices.Contains(groups, kubeletGroup):
		node = strings.TrimPrefix(name, kubeletUserPrefix)
	case r.o.NodeUserPrefix != "" && r.o.NodeGroup != "" && strings.HasPrefix(name, r.o.NodeUserPrefix) && slices.Contains(groups, r.o.NodeGroup):
		node = strings.TrimPrefix(name, r.o.NodeUserPrefix)
	default:
		return "", refuse(http.StatusForbidden, outcomeForbidden, "user %s (groups %v) is no node identity", name, groups)
	}
	if msgs := validation.IsDNS1123Subdomain(node); len(msgs) > 0 {
		return "", refuse(http.StatusForbidden, outcomeForbidden, "user %s names no valid node: %s", name, strings.Join(msgs, "; "))
	}
	return node, nil
}

// state returns node's state, forgetting nodes not heard from for ten minutes (deleted ones).
func (r *Relay) state(node string) *nodeState {
	now := r.o.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.nodes[node]
	if !ok {
		for n, s := range r.nodes {
			if now.Sub(s.used) > 10*time.Minute {
				delete(r.nodes, n)
			}
		}
		st = &nodeState{limiter: rate.NewLimiter(r.o.Rate, r.o.Burst)}
		r.nodes[node] = st
	}
	st.used = now
	return st
}

// renew writes the Lease of node as the node service would (shim/heartbeat): holder the node,
// renewTime now; one update of the Lease as last written, a read (and a create) only at first,
// after a conflict or when it is gone. A new Lease is owned by its Node.
func (r *Relay) renew(ctx context.Context, st *nodeState, node string, seconds int32, probesLate string) (*coordinationv1.Lease, error) {
	leases := r.o.Client.CoordinationV1().Leases(r.o.Namespace)
	now := metav1.NewMicroTime(r.o.Clock.Now())
	fill := func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = ptr.To(node)
		l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		l.Spec.RenewTime = &now
		v1alpha1.SetProbesLate(l, probesLate)
	}
	r.mu.Lock()
	latest := st.latest
	r.mu.Unlock()
	keep := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		r.mu.Lock()
		st.latest = l
		r.mu.Unlock()
		return l
	}
	if latest != nil {
		l := latest.DeepCopy()
		fill(l)
		updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			return keep(updated), nil
		}
		keep(nil)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: r.o.Namespace, OwnerReferences: r.owner(ctx, node)}}
		fill(l)
		if l, err = leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		r.o.Log.Info("created the heartbeat Lease on behalf of its node", "node", node)
	case err != nil:
		return nil, err
	default:
		fill(l)
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return keep(l), nil
}

// owner is the reference to node's Node object, so that deleting the node deletes its Lease; nil
// when it cannot be read (the heartbeat controller deletes a gone node's Lease anyway).
func (r *Relay) owner(ctx context.Context, node string) []metav1.OwnerReference {
	n, err := r.o.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Node", Name: n.Name, UID: n.UID}}
}
