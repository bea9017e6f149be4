// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// ConfigMapName is the ConfigMap, in the deployment's namespace, that holds the decider's
// configuration under ConfigKey. It is read at run time: edits apply within seconds, without a
// restart. A ConfigMap missing at start means the defaults (DefaultConfig); one deleted after it
// was read holds every restart until it is back (deleting it never switches restarts back on).
const (
	ConfigMapName = "probeshim-liveness-decider"
	ConfigKey     = "config.yaml"
)

// Config is the decider's run-time configuration (the YAML document under ConfigKey). Every
// field is optional; what is left out keeps its default.
type Config struct {
	// Enabled is the global switch. false holds every restart (reason Disabled); probing and
	// reporting go on.
	Enabled *bool `json:"enabled,omitempty"`
	// DryRun decides and reports (events, metrics) but creates no ContainerRecreateRequest.
	DryRun bool `json:"dryRun,omitempty"`
	// RateLimit bounds the creation of ContainerRecreateRequests, cluster-wide, and in each
	// namespace (RateLimit.PerNamespace).
	RateLimit RateLimit `json:"rateLimit,omitempty"`
	// DefaultMaxUnavailable applies to a workload whose pods no PodDisruptionBudget selects:
	// an absolute number or a percentage of the workload's pods (rounded down, at least 1).
	DefaultMaxUnavailable *intstr.IntOrString `json:"defaultMaxUnavailable,omitempty"`
	// CircuitBreaker holds every restart of a workload when too many of its pods fail at once.
	CircuitBreaker CircuitBreaker `json:"circuitBreaker,omitempty"`
	// Backoff between restarts of one container, like the kubelet's crash-loop backoff.
	Backoff Backoff `json:"backoff,omitempty"`
	// RequestTTL is the ttlSecondsAfterFinished of the requests the decider creates: a backstop,
	// since the decider deletes its finished requests itself.
	RequestTTL *metav1.Duration `json:"requestTTL,omitempty"`
	// Blacklist names what the decider never restarts.
	Blacklist Blacklist `json:"blacklist,omitempty"`
}

// RateLimit is a token bucket.
type RateLimit struct {
	// QPS is the sustained rate of new requests per second.
	QPS *float64 `json:"qps,omitempty"`
	// Burst is how many requests may be created at once after a quiet time.
	Burst *int `json:"burst,omitempty"`
	// UnhealthyShare and UnhealthyQPS slow the cluster-wide rate while more than UnhealthyShare of
	// all pods with liveness results fail at once, and at least UnhealthyMinFailingPods: a cause
	// that large is not the containers', as the node lifecycle controller slows evictions in a
	// largely unhealthy zone (and leaves small clusters alone). Default: more than 55% and at
	// least 20 pods, then a tenth of qps.
	UnhealthyShare          *intstr.IntOrString `json:"unhealthyShare,omitempty"`
	UnhealthyMinFailingPods *int                `json:"unhealthyMinFailingPods,omitempty"`
	UnhealthyQPS            *float64            `json:"unhealthyQPS,omitempty"`
	// PerNamespace is each namespace's own bucket, taken from beside the cluster-wide one: its
	// rate must be below the cluster's, so that one namespace's failures always leave the others
	// some of it. Default: a quarter of the cluster's rate, burst 2.
	PerNamespace *NamespaceRateLimit `json:"perNamespace,omitempty"`
}

// NamespaceRateLimit is the token bucket of each namespace.
type NamespaceRateLimit struct {
	QPS   *float64 `json:"qps,omitempty"`
	Burst *int     `json:"burst,omitempty"`
}

// CircuitBreaker opens for a workload when more than FailingShare of its pods, and at least
// MinFailingPods of them, fail liveness at the same time: a cause that many pods share (a bad
// probe, a dependency down) is not cured by restarts. It closes when the share drops again.
//
// Window is how long the decider watches a new failure before it acts, so that failures with
// one cause, which the pods' probes find at different moments within a probe period, are
// counted together: unset, one period of the failing probe; 0s, no wait.
type CircuitBreaker struct {
	FailingShare   *intstr.IntOrString `json:"failingShare,omitempty"`
	MinFailingPods *int                `json:"minFailingPods,omitempty"`
	Window         *metav1.Duration    `json:"window,omitempty"`
	// Node opens for a node when more than its FailingShare of the node's pods with liveness
	// results, and at least MinFailingPods, fail at once while the other nodes' pods do not: the
	// node is the suspect (its disk, network or kernel), not its containers, as cluster-api's
	// MachineHealthCheck suspects the machine. Default: more than 50%, at least 3.
	Node *NodeBreaker `json:"node,omitempty"`
}

// NodeBreaker is CircuitBreaker.Node.
type NodeBreaker struct {
	FailingShare   *intstr.IntOrString `json:"failingShare,omitempty"`
	MinFailingPods *int                `json:"minFailingPods,omitempty"`
}

// Backoff is the wait before a container's next restart: Initial after the first, doubling up
// to Max; a container that ran ResetAfter without failing starts again from no wait.
type Backoff struct {
	Initial    *metav1.Duration `json:"initial,omitempty"`
	Max        *metav1.Duration `json:"max,omitempty"`
	ResetAfter *metav1.Duration `json:"resetAfter,omitempty"`
}

// Blacklist entries exclude pods from restarts.
type Blacklist struct {
	// Namespaces whose pods are never restarted.
	Namespaces []string `json:"namespaces,omitempty"`
	// Selectors in kubectl's syntax ("app=db,tier!=cache"); a pod any of them selects is never
	// restarted.
	Selectors []string `json:"selectors,omitempty"`
	// Workloads as "<Kind>/<namespace>/<name>", e.g. "Deployment/shop/cart"; a bare pod is
	// "Pod/<namespace>/<name>".
	Workloads []string `json:"workloads,omitempty"`
}

// settings fills in and checks the rate limits of s.
func (r RateLimit) settings(s *Settings, bad func(field, format string, args ...any)) {
	if s.QPS <= 0 {
		bad("rateLimit.qps", "must be greater than 0, got %v (to stop restarts set enabled: false)", s.QPS)
	}
	if s.Burst < 1 {
		bad("rateLimit.burst", "must be at least 1, got %d", s.Burst)
	}
	s.UnhealthyShare, s.UnhealthyQPS = orDefault(r.UnhealthyShare, intstr.FromString("55%")), orDefault(r.UnhealthyQPS, s.QPS/10)
	if err := checkIntOrPercent(s.UnhealthyShare, true); err != nil {
		bad("rateLimit.unhealthyShare", "%v", err)
	}
	if s.UnhealthyMinFailingPods = orDefault(r.UnhealthyMinFailingPods, 20); s.UnhealthyMinFailingPods < 1 {
		bad("rateLimit.unhealthyMinFailingPods", "must be at least 1, got %d", s.UnhealthyMinFailingPods)
	}
	if s.UnhealthyQPS <= 0 || s.UnhealthyQPS > s.QPS {
		bad("rateLimit.unhealthyQPS", "must be greater than 0 and at most rateLimit.qps (%v), got %v", s.QPS, s.UnhealthyQPS)
	}
	s.NamespaceQPS, s.NamespaceBurst = s.QPS/4, min(2, s.Burst)
	if ns := r.PerNamespace; ns != nil {
		s.NamespaceQPS, s.NamespaceBurst = orDefault(ns.QPS, s.NamespaceQPS), orDefault(ns.Burst, s.NamespaceBurst)
	}
	if s.NamespaceQPS <= 0 || (s.QPS > 0 && s.NamespaceQPS >= s.QPS) {
		bad("rateLimit.perNamespace.qps", "must be greater than 0 and less than rateLimit.qps (%v), got %v: "+
			"one namespace must always leave the others some of the cluster's rate", s.QPS, s.NamespaceQPS)
	}
	if s.NamespaceBurst < 1 || s.NamespaceBurst > s.Burst {
		bad("rateLimit.perNamespace.burst", "must be between 1 and rateLimit.burst (%d), got %d", s.Burst, s.NamespaceBurst)
	}
}

// settings fills in and checks the node breaker of s (n may be nil: the defaults).
func (n *NodeBreaker) settings(s *Settings, bad func(field, format string, args ...any)) {
	s.NodeFailingShare, s.NodeMinFailingPods = intstr.FromString("50%"), 3
	if n != nil {
		s.NodeFailingShare, s.NodeMinFailingPods = orDefault(n.FailingShare, s.NodeFailingShare), orDefault(n.MinFailingPods, s.NodeMinFailingPods)
	}
	if err := checkIntOrPercent(s.NodeFailingShare, true); err != nil {
		bad("circuitBreaker.node.failingShare", "%v", err)
	}
	if s.NodeMinFailingPods < 1 {
		bad("circuitBreaker.node.minFailingPods", "must be at least 1, got %d", s.NodeMinFailingPods)
	}
}

// minRequestTTL keeps requests well past requestGrace.
const minRequestTTL = 5 * time.Minute

// Settings is a validated Config with every default filled in: what the decision logic reads.
type Settings struct {
	Enabled                 bool
	DryRun                  bool
	QPS                     float64
	Burst                   int
	NamespaceQPS            float64
	NamespaceBurst          int
	UnhealthyShare          intstr.IntOrString
	UnhealthyMinFailingPods int
	UnhealthyQPS            float64
	DefaultMaxUnavailable   intstr.IntOrString
	FailingShare            intstr.IntOrString
	MinFailingPods          int
	NodeFailingShare        intstr.IntOrString
	NodeMinFailingPods      int
	// BreakerWindow is CircuitBreaker.Window; nil means one period of the failing probe.
	BreakerWindow     *time.Duration
	BackoffInitial    time.Duration
	BackoffMax        time.Duration
	BackoffResetAfter time.Duration
	RequestTTL        time.Duration

	blacklistNamespaces map[string]bool
	blacklistSelectors  []labels.Selector
	blacklistWorkloads  map[Workload]bool
}

// DefaultSettings are the settings without a ConfigMap: on, not dry-run, 1 request per second
// (burst 5), 25% unavailable, the breaker at more than 50% failing, the kubelet's backoff.
func DefaultSettings() *Settings {
	s, err := Config{}.Settings()
	if err != nil {
		panic(err) // the defaults are valid
	}
	return s
}

// ParseConfig reads the YAML document of the ConfigMap; unknown fields are errors, so a typo
// never silently leaves a switch at its default.
func ParseConfig(doc string) (*Settings, error) {
	var c Config
	if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigKey, err)
	}
	return c.Settings()
}

// Settings validates c and fills in the defaults; the error lists every problem at once.
func (c Config) Settings() (*Settings, error) {
	s := &Settings{
		Enabled:               c.Enabled == nil || *c.Enabled,
		DryRun:                c.DryRun,
		QPS:                   orDefault(c.RateLimit.QPS, 1.0),
		Burst:                 orDefault(c.RateLimit.Burst, 5),
		DefaultMaxUnavailable: orDefault(c.DefaultMaxUnavailable, intstr.FromString("25%")),
		FailingShare:          orDefault(c.CircuitBreaker.FailingShare, intstr.FromString("50%")),
		MinFailingPods:        orDefault(c.CircuitBreaker.MinFailingPods, 2),
		BackoffInitial:        durationOr(c.Backoff.Initial, 10*time.Second),
		BackoffMax:            durationOr(c.Backoff.Max, 5*time.Minute),
		BackoffResetAfter:     durationOr(c.Backoff.ResetAfter, 10*time.Minute),
		RequestTTL:            durationOr(c.RequestTTL, 10*time.Minute),
		blacklistNamespaces:   map[string]bool{},
		blacklistWorkloads:    map[Workload]bool{},
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	c.RateLimit.settings(s, bad)
	if err := checkIntOrPercent(s.DefaultMaxUnavailable, false); err != nil {
		bad("defaultMaxUnavailable", "%v", err)
	}
	if err := checkIntOrPercent(s.FailingShare, true); err != nil {
		bad("circuitBreaker.failingShare", "%v", err)
	}
	if w := c.CircuitBreaker.Window; w != nil {
		if w.Duration < 0 {
			bad("circuitBreaker.window", "must not be negative, got %s", w.Duration)
		}
		s.BreakerWindow = &w.Duration
	}
	if s.MinFailingPods < 1 {
		bad("circuitBreaker.minFailingPods", "must be at least 1, got %d", s.MinFailingPods)
	}
	c.CircuitBreaker.Node.settings(s, bad)
	if s.BackoffInitial <= 0 {
		bad("backoff.initial", "must be positive, got %s", s.BackoffInitial)
	}
	if s.BackoffMax < s.BackoffInitial {
		bad("backoff.max", "must be at least backoff.initial (%s), got %s", s.BackoffInitial, s.BackoffMax)
	}
	if s.BackoffResetAfter <= 0 {
		bad("backoff.resetAfter", "must be positive, got %s", s.BackoffResetAfter)
	}
	if s.RequestTTL < minRequestTTL {
		bad("requestTTL", "must be at least %s (the decider tells a request never created from one finished and deleted by the TTL by its age), got %s", minRequestTTL, s.RequestTTL)
	}
	for _, ns := range c.Blacklist.Namespaces {
		s.blacklistNamespaces[ns] = true
	}
	for i, sel := range c.Blacklist.Selectors {
		parsed, err := labels.Parse(sel)
		if err == nil && parsed.Empty() {
			err = errors.New("selects every pod; use enabled: false to stop all restarts")
		}
		if err != nil {
			bad(fmt.Sprintf("blacklist.selectors[%d]", i), "%q: %v", sel, err)
			continue
		}
		s.blacklistSelectors = append(s.blacklistSelectors, parsed)
	}
	for i, w := range c.Blacklist.Workloads {
		parts := strings.Split(w, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			bad(fmt.Sprintf("blacklist.workloads[%d]", i), "%q is not <Kind>/<namespace>/<name>", w)
			continue
		}
		s.blacklistWorkloads[Workload{Kind: parts[0], Namespace: parts[1], Name: parts[2]}] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// blacklisted says why the pod of workload w with labels lbls is excluded, or "".
func (s *Settings) blacklisted(w Workload, lbls map[string]string) string {
	switch {
	case s.blacklistNamespaces[w.Namespace]:
		return fmt.Sprintf("namespace %s is on the blacklist", w.Namespace)
	case s.blacklistWorkloads[w]:
		return fmt.Sprintf("workload %s is on the blacklist", w)
	}
	for _, sel := range s.blacklistSelectors {
		if sel.Matches(labels.Set(lbls)) {
			return fmt.Sprintf("the blacklist selector %q selects the pod", sel.String())
		}
	}
	return ""
}

func checkIntOrPercent(v intstr.IntOrString, percentOnlyUpTo100 bool) error {
	if v.Type == intstr.String {
		p, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false)
		if err != nil || !strings.HasSuffix(v.StrVal, "%") {
			return fmt.Errorf("%q is neither a number nor a percentage", v.StrVal)
		}
		if p < 0 || p > 100 {
			return fmt.Errorf("%q is not within 0%%..100%%", v.StrVal)
		}
		return nil
	}
	if percentOnlyUpTo100 {
		return fmt.Errorf("%d: give a percentage such as \"50%%\"", v.IntVal)
	}
	if v.IntVal < 0 {
		return fmt.Errorf("%d is negative", v.IntVal)
	}
	return nil
}

func orDefault[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
