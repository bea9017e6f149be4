// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package server serves the node service's local endpoints: /healthz,
// /readyz and /metrics over HTTP (on localhost by default), and a unix
// socket with what is being probed and each probe's last result, which
// `probeshim status` reads through FetchStatus.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Check is one named health or readiness condition; nil error means OK.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// ProbeStatus is one probe and its last result.
type ProbeStatus struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	Probe     string `json:"probe"`
	// Type is the handler: exec, httpGet, tcpSocket or grpc.
	Type string `json:"type,omitempty"`
	// Result is the probe's state as in NodePodProbe status: Succeeded, Failed or Unknown.
	Result             string    `json:"result"`
	Message            string    `json:"message,omitempty"`
	LastProbeTime      time.Time `json:"lastProbeTime,omitzero"`
	LastTransitionTime time.Time `json:"lastTransitionTime,omitzero"`
}

// HeartbeatStatus is the state of the node service's lease.
type HeartbeatStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// LastRenew is the last successful renewal; zero when there was none.
	LastRenew time.Time `json:"lastRenew,omitzero"`
	// Renewing is true when the last attempt renewed the lease.
	Renewing bool `json:"renewing"`
	// Reason says why the lease is not being renewed.
	Reason string `json:"reason,omitempty"`
	// Path is how the lease is renewed: "direct", or "endpoint <url>" when the cluster
	// deployment's heartbeat endpoint renews it for the node (the kubelet's identity).
	Path string `json:"path,omitempty"`
}

// Status is the document on the status socket.
type Status struct {
	Node string    `json:"node"`
	Time time.Time `json:"time"`
	// State is live or degraded (Assess), Problems why it is degraded.
	State     string           `json:"state,omitempty"`
	Problems  []string         `json:"problems,omitempty"`
	Heartbeat *HeartbeatStatus `json:"heartbeat,omitempty"`
	// Runners is the probe engine's pools of runners; ProbesLate says, while probes start late,
	// which and how (what the heartbeat Lease's probeshim.io/probes-late says too).
	Runners *RunnersStatus `json:"runners,omitempty"`
	// Config is the configuration's state: when it was read and how the last reload went.
	Config *ConfigStatus `json:"config,omitempty"`
	Probes []ProbeStatus `json:"probes"`
}

// ConfigStatus is the configuration the service runs with. A refused reload or a change that
// waits for a restart is shown here, not in State: the service runs on, as before, with the
// configuration it has.
type ConfigStatus struct {
	// File is the configuration file (--config).
	File string `json:"file"`
	// Loaded is when the running configuration was read: at start or by the last reload that
	// was not refused.
	Loaded time.Time `json:"loaded"`
	// LastReload is the last reload (SIGHUP, `systemctl reload probeshim`); nil before the first.
	LastReload *ReloadStatus `json:"lastReload,omitempty"`
	// RestartNeeded names the settings (as the file names them) whose new values wait for a
	// restart of the service.
	RestartNeeded []string `json:"restartNeeded,omitempty"`
}

// ReloadStatus is the outcome of one reload.
type ReloadStatus struct {
	Time time.Time `json:"time"`
	// Error says why the reload was refused (the file does not load or validate); the
	// configuration read before stays. Empty when it was not refused.
	Error string `json:"error,omitempty"`
	// Applied names the settings whose new values the reload applied.
	Applied []string `json:"applied,omitempty"`
}

// RunnersStatus is the state of the probe engine's pools of runners.
type RunnersStatus struct {
	Pools []PoolStatus `json:"pools"`
	// Late says which probes start late now, and why; empty while they are on time.
	Late string `json:"late,omitempty"`
}

// PoolStatus is one pool of runners (exec or network).
type PoolStatus struct {
	Name         string `json:"name"`
	Limit        int    `json:"limit"`
	PerNamespace int    `json:"perNamespace"`
	Running      int    `json:"running"`
	Queued       int    `json:"queued"`
	StartedLate  uint64 `json:"startedLate"`
	// LastLate is when a probe last started late, LastLateSeconds how late.
	LastLate        time.Time `json:"lastLate,omitzero"`
	LastLateSeconds float64   `json:"lastLateSeconds,omitempty"`
}

// StatusSource gives the probes being run and their last results, e.g. from
// the probe engine's snapshot. It is called once per status request.
type StatusSource interface {
	ProbeStatuses() []ProbeStatus
}

// StatusFunc adapts a function to StatusSource.
type StatusFunc func() []ProbeStatus

func (f StatusFunc) ProbeStatuses() []ProbeStatus { return f() }

// Options configure a Server. An empty address or socket path disables that
// endpoint.
type Options struct {
	HealthAddress  string // /healthz, /readyz
	MetricsAddress string // /metrics; may equal HealthAddress (one listener)
	StatusSocket   string
	Node           string

	Gatherer prometheus.Gatherer // default: prometheus.DefaultGatherer
	// ProbesGatherer serves /metrics/probes beside /metrics: the per-container prober series, as
	// the kubelet serves them apart, so the main endpoint's series do not grow with the pods.
	ProbesGatherer prometheus.Gatherer
	Health         []Check // /healthz: the service's loops are alive
	Ready          []Check // /readyz: it can do its work
	Status         StatusSource
	// Heartbeat gives the lease's state; optional.
	Heartbeat func() *HeartbeatStatus
	// Runners gives the probe runners' state; optional.
	Runners func() *RunnersStatus
	// Config gives the configuration's state; optional.
	Config func() *ConfigStatus
	Log    *logrus.Entry
}

// checkTimeout bounds one health or readiness request.
const checkTimeout = 5 * time.Second

// Server is the running endpoints.
type Server struct {
	opts    Options
	mu      sync.Mutex
	servers []*http.Server
	addrs   map[string]net.Addr // by endpoint: "health", "metrics", "status"
	wg      sync.WaitGroup
}

// New makes a Server; Start opens its listeners.
func New(o Options) *Server {
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	if o.Log == nil {
		o.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if o.Status == nil {
		o.Status = StatusFunc(func() []ProbeStatus { return nil })
	}
	return &Server{opts: o, addrs: map[string]net.Addr{}}
}

// Start opens every listener, so that a taken port or socket is an error
// here, and serves in the background until Shutdown.
func (s *Server) Start() error {
	o := s.opts
	health := http.NewServeMux()
	health.Handle("GET /healthz", checksHandler(o.Health))
	health.Handle("GET /readyz", checksHandler(o.Ready))
	metrics := health
	if o.MetricsAddress != o.HealthAddress {
		metrics = http.NewServeMux()
	}
	metrics.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: o.Log}))
	if o.ProbesGatherer != nil {
		metrics.Handle("GET /metrics/probes", promhttp.HandlerFor(o.ProbesGatherer, promhttp.HandlerOpts{ErrorLog: o.Log}))
	}

	if o.HealthAddress != "" {
		if err := s.serveTCP("health", o.HealthAddress, health); err != nil {
			return err
		}
		if metrics == health {
			s.addrs["metrics"] = s.addrs["health"]
		}
	}
	if o.MetricsAddress != "" && metrics != health {
		if err := s.serveTCP("metrics", o.MetricsAddress, metrics); err != nil {
			_ = s.Shutdown(context.Background()) // the start error is the one to report
			return err
		}
	}
	if o.StatusSocket != "" {
		if err := s.serveStatus(o.StatusSocket); err != nil {
			_ = s.Shutdown(context.Background()) // the start error is the one to report
			return err
		}
	}
	return nil
}

// Addr is where an endpoint ("health", "metrics" or "status") listens, nil
// if it does not.
func (s *Server) Addr(endpoint string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[endpoint]
}

func (s *Server) serveTCP(name, addr string, h http.Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s endpoint: %w", name, err)
	}
	s.serve(name, l, h)
	return nil
}

func (s *Server) serve(name string, l net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.addrs[name] = l.Addr()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Log.WithError(err).WithField("endpoint", name).Error("endpoint stopped")
		}
	}()
}

// serveStatus listens on the unix socket, readable by root only. A socket
// left by a previous run is replaced; one that another process still
// serves is an error.
func (s *Server) serveStatus(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("status socket: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("status socket %s: another process is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("status socket: remove stale %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("status socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("status socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st := Status{Node: s.opts.Node, Time: time.Now(), Probes: s.opts.Status.ProbeStatuses()}
		if s.opts.Heartbeat != nil {
			st.Heartbeat = s.opts.Heartbeat()
		}
		if s.opts.Runners != nil {
			st.Runners = s.opts.Runners()
		}
		if s.opts.Config != nil {
			st.Config = s.opts.Config()
		}
		if st.Probes == nil {
			st.Probes = []ProbeStatus{}
		}
		sortProbes(st.Probes)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st) // fails only when the client went away
	})
	// Go's profiles, for root only like the rest of the socket: where the service's own CPU and
	// memory go on this node (curl --unix-socket <socket> http://x/debug/pprof/profile?seconds=30).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.serve("status", l, mux)
	return nil
}

// Shutdown stops every endpoint, waiting for requests in flight until ctx
// is done, and removes the status socket.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// checksHandler answers 200 "ok" when every check passes, else 500 listing
// the failed ones; with ?verbose it lists every check, in the style of the
// Kubernetes components' health endpoints.
func checksHandler(checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
		defer cancel()
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			} else if r.URL.Query().Has("verbose") {
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(&b, "%s check failed\n", strings.TrimPrefix(r.URL.Path, "/"))
			fmt.Fprint(w, b.String())
			return
		}
		fmt.Fprint(w, b.String()+"ok")
	})
}

func sortProbes(ps []ProbeStatus) {
	slices.SortFunc(ps, func(a, b ProbeStatus) int {
		return strings.Compare(a.Namespace+"\x00"+a.Pod+"\x00"+a.Container+"\x00"+a.Probe,
			b.Namespace+"\x00"+b.Pod+"\x00"+b.Container+"\x00"+b.Probe)
	})
}
