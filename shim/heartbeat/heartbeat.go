// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package heartbeat renews the node service's Lease (coordination.k8s.io/v1)
// while the service is healthy, so that the cluster part can tell a node
// service that probes, watches and writes from one that went silent.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
	"github.com/probeshim/probeshim/shim/kube"
)

// Defaults, agreed with the cluster part, which reads the lease.
const (
	DefaultNamespace     = "probeshim-node-lease"
	DefaultLeaseDuration = 40 * time.Second
	DefaultRenewInterval = 10 * time.Second
)

// KubeClient is what the heartbeat needs of the API server: shim/kube's clients (or
// kubetest.Adapt of a fake clientset).
type KubeClient interface {
	Nodes() kube.Getter[*corev1.Node]
	ConfigMaps(namespace string) kube.Getter[*corev1.ConfigMap]
	Services(namespace string) kube.Getter[*corev1.Service]
	Leases(namespace string) kube.LeaseClient
}

// Config wires a Heartbeat.
type Config struct {
	// Node is this node's name: the lease's name and holder.
	Node      string
	Namespace string
	Client    KubeClient
	// LeaseDuration is written as spec.leaseDurationSeconds; RenewInterval
	// is how often spec.renewTime is renewed (and a failed renewal retried).
	LeaseDuration time.Duration
	RenewInterval time.Duration
	// Healthy returns nil while the node service does its work (engine,
	// runtime, NodePodProbe watch and writes), else why not: the lease is
	// not renewed then.
	Healthy func(ctx context.Context) error
	// ProbesLate says which probes start late now ("" when none; nil: never): the lease's
	// annotation v1alpha1.AnnotationProbesLate, so that a live node whose probes run behind
	// says so.
	ProbesLate func() string
	// Relay renews the lease through the cluster deployment's heartbeat endpoint once the API
	// server refuses this identity the lease itself (the kubelet's, NodeRestriction); nil: never.
	Relay      Relay
	Registerer prometheus.Registerer
	Log        logrus.FieldLogger
	Clock      clock.WithTicker
}

// Status is the lease's state, for `probeshim status`.
type Status struct {
	Namespace string
	Name      string
	// LastRenew is the last successful renewal (zero: none yet).
	LastRenew time.Time
	// Renewing is true when the last attempt renewed the lease.
	Renewing bool
	// Reason says why the last attempt did not renew: the service is not
	// healthy, or the API server refused or did not answer.
	Reason string
	// Path is how the lease is renewed: "direct" (this identity writes it) or "endpoint <url>"
	// (the cluster deployment's heartbeat endpoint renews it for the node); empty before the
	// first attempt.
	Path string
}

// Heartbeat renews one node's lease.
type Heartbeat struct {
	cfg       Config
	lastRenew prometheus.Gauge
	failures  prometheus.Counter
	skipped   prometheus.Counter

	// latest is the lease as last written, viaRelay whether the lease goes through the Relay
	// (the API server refused this identity the lease); only Step's goroutine uses them.
	latest   *coordinationv1.Lease
	viaRelay bool

	mu     sync.Mutex
	state  string // "renewing" or why not, for logging changes only
	status Status
}

// New returns a Heartbeat; Run renews until its context ends.
func New(cfg Config) *Heartbeat {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.Healthy == nil {
		cfg.Healthy = func(context.Context) error { return nil }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	cfg.Log = cfg.Log.WithFields(logrus.Fields{"component": "heartbeat", "lease": cfg.Namespace + "/" + cfg.Node})
	h := &Heartbeat{
		cfg: cfg,
		lastRenew: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probeshim_heartbeat_last_renew_timestamp_seconds",
			Help: "When the node service last renewed its lease (Unix time).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probeshim_heartbeat_renew_failures_total",
			Help: "Lease renewals the API server refused or did not answer.",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probeshim_heartbeat_renewals_skipped_total",
			Help: "Lease renewals skipped because the node service was not healthy.",
		}),
		status: Status{Namespace: cfg.Namespace, Name: cfg.Node, Reason: "not started"},
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(h.lastRenew, h.failures, h.skipped)
	}
	return h
}

// Status returns the lease's state.
func (h *Heartbeat) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// Run renews the lease at once and then every RenewInterval until ctx is
// done. It never gives up: a missing namespace or a refusal is logged and
// tried again on the next period.
func (h *Heartbeat) Run(ctx context.Context) error {
	t := h.cfg.Clock.NewTicker(h.cfg.RenewInterval)
	defer t.Stop()
	for {
		h.Step(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Step is one renewal: skipped when the service is not healthy, else the
// lease is renewed (created if missing).
func (h *Heartbeat) Step(ctx context.Context) {
	// One period bounds an attempt, so that a stuck check or a hung API
	// server delays no later renewal.
	actx, cancel := context.WithTimeout(ctx, h.cfg.RenewInterval)
	defer cancel()
	if err := h.cfg.Healthy(actx); err != nil {
		if ctx.Err() != nil {
			return
		}
		h.skipped.Inc()
		// No "not renewing" here: `probeshim status` says so before the reason.
		h.set("unhealthy", "the node service is not healthy: "+err.Error(), err)
		return
	}
	err := h.write(actx)
	h.mu.Lock()
	h.status.Path = "direct"
	if h.viaRelay {
		h.status.Path = "endpoint " + h.cfg.Relay.Endpoint()
		if h.cfg.Relay.Endpoint() == "" {
			h.status.Path = "endpoint (not found yet)"
		}
	}
	h.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		h.failures.Inc()
		state, advice := h.advice(err)
		h.set(state, advice, err)
		return
	}
	now := h.cfg.Clock.Now()
	h.lastRenew.Set(float64(now.UnixNano()) / 1e9)
	h.mu.Lock()
	h.status.LastRenew = now
	h.mu.Unlock()
	h.set("renewing", "", nil)
}

// write renews the lease: itself, or through the Relay once the API server refused this
// identity the lease (NodeRestriction refuses the kubelet's for as long as it runs as it).
func (h *Heartbeat) write(ctx context.Context) error {
	if !h.viaRelay {
		err := h.renew(ctx)
		if err == nil || h.cfg.Relay == nil || !nodeRestricted(err) {
			return err
		}
		h.viaRelay = true
		h.cfg.Log.Info("the kubelet's identity may not write the lease itself (NodeRestriction): renewing it through the cluster deployment's heartbeat endpoint")
	}
	return h.cfg.Relay.Renew(ctx, heartbeatapi.Request{Node: h.cfg.Node,
		LeaseDurationSeconds: int32(h.cfg.LeaseDuration / time.Second), ProbesLate: h.probesLate()})
}

// nodeRestricted tells the NodeRestriction admission plugin's refusal, which says so only in its
// message: a kubelet identity (system:node:<name>) may write no lease but its kubelet's own in
// kube-node-lease, whatever RBAC says.
func nodeRestricted(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `"kube-node-lease"`)
}

// set records the outcome of an attempt. state is "renewing" or a short
// word for why not; it is logged once per change of state, not on every
// period.
func (h *Heartbeat) set(state, reason string, err error) {
	h.mu.Lock()
	was := h.state
	h.state = state
	h.status.Renewing, h.status.Reason = state == "renewing", reason
	h.mu.Unlock()
	switch {
	case state == was:
	case state == "renewing":
		h.cfg.Log.Info("renewing the lease")
	case state == "unhealthy" && was == "":
		// Start-up: the NodePodProbe is not synced yet; start-up's own
		// status line says what it waits for.
		h.cfg.Log.WithError(err).Info("not renewing the lease: " + reason)
	case state == "unhealthy":
		h.cfg.Log.WithError(err).Warn("not renewing the lease: " + reason)
	default:
		h.cfg.Log.WithError(err).Warn(reason)
	}
}

// advice turns an API error into a kind and what to do about it.
func (h *Heartbeat) advice(err error) (string, string) {
	ns := h.cfg.Namespace
	var refused *RelayError
	switch {
	case h.viaRelay && errors.As(err, &refused) && (refused.Code == http.StatusUnauthorized || refused.Code == http.StatusForbidden):
		return "endpoint-refused", fmt.Sprintf("cannot renew the lease: the cluster deployment's heartbeat endpoint refused this node's client certificate "+
			"(it accepts system:node:%s in system:nodes from the API server's client CA): %v", h.cfg.Node, err)
	case h.viaRelay:
		return "endpoint-error", fmt.Sprintf("cannot renew the lease through the cluster deployment's heartbeat endpoint (the kubelet's identity may not write it itself); "+
			"check that probeshim-cluster runs and that this node reaches Services (kube-proxy): %v", err)
	case apierrors.IsNotFound(err):
		return "no-namespace", fmt.Sprintf("cannot create the lease: namespace %s does not exist; apply cluster/deploy (namespace.yaml) or `kubectl create namespace %s`: %v", ns, ns, err)
	case nodeRestricted(err):
		// Only without a Relay: the kubeconfig has no client certificate to authenticate with.
		return "node-restriction", fmt.Sprintf("cannot write the lease: the kubelet's identity (system:node:%s) may write leases only in kube-node-lease "+
			"(the NodeRestriction admission plugin), and the heartbeat endpoint needs the kubeconfig's client certificate; use a kubeconfig with one, "+
			"or a dedicated identity (probeshim:node:%s, group probeshim:nodes; see docs/install/node.md, \"The kubeconfig it uses\"): %v", h.cfg.Node, h.cfg.Node, err)
	case apierrors.IsForbidden(err):
		return "forbidden", fmt.Sprintf("cannot write the lease: forbidden; apply the Role and RoleBinding in namespace %s from cluster/deploy/rbac-nodes.yaml (groups system:nodes, probeshim:nodes): %v", ns, err)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", fmt.Sprintf("cannot renew the lease: the API server did not answer within %s: %v", h.cfg.RenewInterval, err)
	default:
		return "api-error", "cannot renew the lease: " + err.Error()
	}
}

// renew writes renewTime (and the rest of the spec) to the lease: one
// update of the lease last written, as the kubelet renews its own; a get
// (and a create when it is missing) only at first or after a conflict. The
// node's object becomes the lease's owner when it can be read, so that
// deleting the node deletes its lease.
func (h *Heartbeat) renew(ctx context.Context) error {
	leases := h.cfg.Client.Leases(h.cfg.Namespace)
	now := metav1.NewMicroTime(h.cfg.Clock.Now())
	if h.latest != nil {
		lease := h.latest.DeepCopy()
		h.fill(ctx, lease, now)
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if err == nil {
			h.latest = updated
			return nil
		}
		h.latest = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		// Changed or deleted by someone else: read it again.
	}
	lease, err := leases.Get(ctx, h.cfg.Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: h.cfg.Node, Namespace: h.cfg.Namespace}}
		h.fill(ctx, lease, now)
		if lease, err = leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			return err
		}
		h.cfg.Log.Info("lease created")
	case err != nil:
		return err
	default:
		h.fill(ctx, lease, now)
		if lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	h.latest = lease
	return nil
}

// fill sets the spec, and the owner when the lease has none yet.
func (h *Heartbeat) fill(ctx context.Context, l *coordinationv1.Lease, now metav1.MicroTime) {
	l.Spec.HolderIdentity = ptr.To(h.cfg.Node)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	if len(l.OwnerReferences) == 0 {
		l.OwnerReferences = h.owner(ctx)
	}
	v1alpha1.SetProbesLate(l, h.probesLate())
}

func (h *Heartbeat) probesLate() string {
	if h.cfg.ProbesLate == nil {
		return ""
	}
	return v1alpha1.TruncateProbesLate(h.cfg.ProbesLate())
}

// owner is the reference to this node's Node object, nil when it cannot be
// read (a dedicated identity without that right): the lease then outlives a
// deleted node until someone removes it.
func (h *Heartbeat) owner(ctx context.Context) []metav1.OwnerReference {
	node, err := h.cfg.Client.Nodes().Get(ctx, h.cfg.Node, metav1.GetOptions{})
	if err != nil {
		h.cfg.Log.WithError(err).Debug("lease without owner: the Node object cannot be read")
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.String(),
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
	}}
}
