// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package service assembles the node service: runtime access, the container
// tracker, the probe engine, the NodePodProbe controller, the recreate
// executor, the heartbeat lease, the local endpoints, the optional CRI proxy
// and systemd notifications, and runs them until stopped.
//
// Everything is a Component (lifecycle.go). Run builds the components,
// wires them, starts them in order with the waits of start-up between them,
// and stops them in reverse order:
//
//	local:  runtime, networks, CRI proxy, endpoints, watchdog, tracker, engine, reload
//	wait:   containerd reachable, then a kubeconfig
//	api:    events, NodePodProbe controller, recreate executor, heartbeat
//	wait:   the first lists of NodePodProbe and ContainerRecreateRequests → READY
package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"

	buildversion "github.com/probeshim/probeshim/internal/version"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/events"
	"github.com/probeshim/probeshim/shim/heartbeat"
	"github.com/probeshim/probeshim/shim/kube"
	"github.com/probeshim/probeshim/shim/netns"
	"github.com/probeshim/probeshim/shim/podprobe"
	"github.com/probeshim/probeshim/shim/recreate"
	"github.com/probeshim/probeshim/shim/runtime"
	"github.com/probeshim/probeshim/shim/server"
	"github.com/probeshim/probeshim/shim/slogrus"
	"github.com/probeshim/probeshim/systemd"
)

const (
	// waitPoll is how often start-up re-checks what it waits for.
	waitPoll = 2 * time.Second
	// readyGrace is how long start-up may wait for containerd, a kubeconfig
	// or the first sync before it tells systemd it is up anyway. On a working
	// node READY=1 means "probing"; on a node still being set up (no
	// kubeconfig yet) `systemctl start` and package installs must not hang,
	// and the status line keeps saying what is missing.
	readyGrace = 5 * time.Second
)

// Option configures Run.
type Option func(*outside)

// WithReload makes every signal on signals (SIGHUP) reload the configuration: load reads file
// and the flags again as at start. See reloader.
func WithReload(signals <-chan os.Signal, file string, load func() (*config.Config, error)) Option {
	return func(o *outside) { o.reloads, o.configFile, o.loadConfig = signals, file, load }
}

// Run runs the node service (of the given version) until ctx is done. It returns an error only for
// what a restart cannot fix (a port already taken); a missing kubeconfig or
// runtime is waited for, with the reason in the systemd status line.
func Run(ctx context.Context, cfg *config.Config, logger *logrus.Logger, version string, opts ...Option) error {
	log := logger.WithField("node", cfg.NodeName)
	rt, err := runtime.New(runtime.WithContainerdSocket(cfg.ContainerdSocket), runtime.WithCRISocket(cfg.CRISocket),
		runtime.WithLogger(log))
	if err != nil {
		return err
	}
	changes := &containerChanges{}
	tracker := runtime.NewTracker(rt, changes.notify)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildversion.BuildInfo(version))
	out := outside{
		runtime:     rt,
		tracker:     tracker,
		changes:     changes,
		registry:    reg,
		criProxy:    &criProxy{cfg: cfg, tracker: tracker, reg: reg, log: log},
		connect:     kubeconfigClients(cfg),
		notify:      systemdNotifier{},
		watchdog:    systemd.Watchdog,
		setMaxProcs: SetMaxProcs,
	}
	for _, o := range opts {
		o(&out)
	}
	s, err := newService(cfg, log, out)
	if err != nil {
		rt.Close()
		return err
	}
	return s.run(ctx)
}

// containerRuntime is what the service needs of shim/runtime's Client.
type containerRuntime interface {
	prober.Execer
	prober.FileReader
	recreate.Runtime
	PodNetwork(ctx context.Context, podUID string) (path string, hostNetwork bool, ips []string, err error)
	ContainerdSocket() string
	Close() error
}

// containerTracker is what the service needs of shim/runtime's Tracker.
type containerTracker interface {
	prober.ContainerSource
	Run(ctx context.Context)
	Synced() <-chan struct{}
	Healthy() error
}

// notifier tells systemd how start-up and reloads go (shim/systemd; a recorder in tests).
type notifier interface {
	Ready(status string)
	Status(status string)
	Stopping()
	reloadNotifier
}

// outside is what the service connects to: built by Run, fakes in tests.
type outside struct {
	runtime  containerRuntime
	tracker  containerTracker
	changes  *containerChanges // the tracker's callback
	registry *prometheus.Registry
	criProxy Component
	// connect returns the API server clients, which show each request's
	// outcome to observe, or nil and what it waits for.
	connect  func(observe func(*http.Request, *http.Response, error)) (*kube.Clients, string)
	notify   notifier
	watchdog func(ctx context.Context, health func(context.Context) error, log logrus.FieldLogger)
	// reloads delivers SIGHUP; each reads the configuration (configFile and the flags) again with
	// loadConfig. nil: no reloads. setMaxProcs applies maxProcs (SetMaxProcs).
	reloads     <-chan os.Signal
	configFile  string
	loadConfig  func() (*config.Config, error)
	setMaxProcs func(int)
}

// service is the node service's components and what ties them together.
type service struct {
	cfg *config.Config
	log *logrus.Entry
	out outside
	m   *metrics

	poll, grace time.Duration // waitPoll, readyGrace; shorter in tests
	renew       time.Duration // the heartbeat's renew interval; shorter in tests

	// Built by newService, before anything starts.
	network, hookNetwork *netns.Network
	engine               *prober.Manager
	probesRegistry       *prometheus.Registry // the per-container prober series, /metrics/probes
	server               *server.Server
	local                []Component
	reloader             *reloader
	// ready is set once systemd has had READY=1.
	ready atomic.Bool

	// The last outcomes of this node's NodePodProbe list/watch requests and
	// status writes, for the heartbeat.
	nppWatch, nppWrite lastError

	// The components that need the API server exist once a kubeconfig
	// works; readiness and status read them from other goroutines.
	mu  sync.Mutex
	api *apiSide
}

// apiSide is what is built once the API server can be reached.
type apiSide struct {
	events     *events.Recorder
	controller *podprobe.Controller
	executor   *recreate.Executor
	heartbeat  *heartbeat.Heartbeat
}

// newService builds the components that need only the node (first), then
// wires them to each other (second). Nothing runs yet.
func newService(cfg *config.Config, log *logrus.Entry, out outside) (*service, error) {
	s := &service{cfg: cfg, log: log, out: out, m: newMetrics(out.registry), poll: waitPoll, grace: readyGrace,
		renew: time.Duration(cfg.Heartbeat.RenewIntervalSeconds) * time.Second, probesRegistry: prometheus.NewRegistry()}
	s.network = netns.NewNetwork(out.runtime.PodNetwork)
	// preStop hooks dial through a Network of their own: the executor
	// forgets a pod's handle when its requests are done.
	s.hookNetwork = netns.NewNetwork(out.runtime.PodNetwork)
	var err error
	s.engine, err = prober.NewManager(out.tracker,
		prober.WithExecer(newCountingExecer(out.runtime, s.m)),
		prober.WithFileReader(newCountingReader(out.runtime, s.m)),
		prober.WithNetwork(s.network),
		prober.WithRegisterer(out.registry),
		prober.WithProbeTypes(podprobe.ProbeTypes()...),
		prober.WithPodRegisterer(s.probesRegistry),
		prober.WithLogger(slogrus.NewLogger(log)),
		prober.WithConcurrency(cfg.Probes.MaxConcurrentExecs, cfg.Probes.MaxConcurrentNetwork),
		prober.WithNamespaceConcurrency(cfg.Probes.MaxConcurrentExecsPerNamespace, cfg.Probes.MaxConcurrentNetworkPerNamespace),
		prober.WithMaxTimeout(time.Duration(max(0, cfg.Probes.MaxTimeoutSeconds))*time.Second))
	if err != nil {
		return nil, err
	}
	s.server = server.New(server.Options{
		HealthAddress:  cfg.HealthAddress,
		MetricsAddress: cfg.MetricsAddress,
		StatusSocket:   cfg.StatusSocket,
		Node:           cfg.NodeName,
		Gatherer:       out.registry,
		ProbesGatherer: s.probesRegistry,
		Health:         []server.Check{{Name: "engine", Check: engineAlive(s.engine)}},
		Ready: []server.Check{
			{Name: "runtime", Check: func(context.Context) error { return out.tracker.Healthy() }},
			{Name: "nodepodprobe", Check: s.nodePodProbeSynced},
		},
		Status:    server.StatusFunc(s.probeStatuses),
		Heartbeat: s.heartbeatStatus,
		Runners:   func() *server.RunnersStatus { return runnersStatus(time.Now(), s.engine.Pools()) },
		Config:    func() *server.ConfigStatus { return s.reloader.configStatus() },
		Log:       log,
	})
	s.out.notify = readyNotifier{notifier: out.notify, ready: &s.ready}
	s.reloader = newReloader(cfg, out.configFile, out.loadConfig, log.Logger, log, s.out.notify, s.ready.Load)
	if out.setMaxProcs != nil {
		s.reloader.setMaxProcs = out.setMaxProcs
	}

	// Wiring: container changes reach the networks and the engine (and the
	// executor once it exists, see apiComponents).
	out.changes.subscribe(func(ch runtime.Change) {
		if ch.Container == "" {
			// Sandbox changed: look its netns up again.
			s.network.Forget(ch.PodUID)
			s.hookNetwork.Forget(ch.PodUID)
			return
		}
		s.engine.ContainerChanged(ch.PodUID, ch.Container)
	})

	// Start order. The CRI proxy comes first: a kubelet pointed at it waits
	// for it, and the node goes NotReady if it waits long; it needs only
	// containerd. The endpoints serve before the API server is reachable.
	// The watchdog is pinged from the start: waiting for containerd or a
	// kubeconfig is not a reason for systemd to restart us.
	s.local = []Component{
		closer("runtime", out.runtime.Close),
		closer("network", s.network.Close),
		closer("hook-network", s.hookNetwork.Close),
		out.criProxy,
		hooks{name: "endpoints", start: func(context.Context) error { return s.server.Start() }, stop: s.server.Shutdown},
		newLoop("watchdog", log, func(ctx context.Context) error {
			out.watchdog(ctx, engineAlive(s.engine), log)
			return nil
		}),
		newLoop("tracker", log, func(ctx context.Context) error { out.tracker.Run(ctx); return nil }),
		newLoop("engine", log, s.engine.Run),
	}
	if out.reloads != nil && out.loadConfig != nil {
		// Last: a reload may come at any time from here on, also while start-up waits.
		s.local = append(s.local, newLoop("reload", log, func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-out.reloads:
					s.reloader.reload()
				}
			}
		}))
	}
	return s, nil
}

// run starts the components in order, with start-up's waits between them,
// and stops them in reverse order when ctx is done or one fails to start.
func (s *service) run(ctx context.Context) error {
	lc := &lifecycle{log: s.log}
	defer lc.stop()
	if err := lc.start(ctx, s.local...); err != nil {
		return err
	}

	start := &startup{begun: time.Now(), notify: s.out.notify, poll: s.poll, grace: s.grace}
	if !start.waitFor(ctx, s.log, s.runtimeReachable) {
		return nil
	}
	s.log.WithField("socket", s.out.runtime.ContainerdSocket()).Info("container runtime reachable")
	var clients *kube.Clients
	if !start.waitFor(ctx, s.log, func() (ok bool, reason string) {
		clients, reason = s.out.connect(s.observeAPI)
		return clients != nil, reason
	}) {
		return nil
	}

	api := s.buildAPI(clients)
	if err := lc.start(ctx, s.apiComponents(api)...); err != nil {
		return err
	}
	if !start.waitFor(ctx, s.log, func() (bool, string) {
		switch {
		case !api.controller.Synced():
			return false, "the first list of NodePodProbe " + s.cfg.NodeName + " from the API server"
		case !api.executor.Synced():
			return false, "the first list of this node's ContainerRecreateRequests from the API server"
		}
		return true, ""
	}) {
		return nil
	}
	s.out.notify.Ready("probing for node " + s.cfg.NodeName)
	s.log.Info("ready")
	<-ctx.Done()
	s.out.notify.Stopping()
	s.log.Info("stopping: probes and in-flight execs are cancelled")
	return nil
}

func (s *service) runtimeReachable() (bool, string) {
	select {
	case <-s.out.tracker.Synced():
		return true, ""
	default:
	}
	reason := "containerd at " + s.out.runtime.ContainerdSocket()
	if err := s.out.tracker.Healthy(); err != nil {
		reason += ": " + err.Error()
	}
	return false, reason
}

// buildAPI builds the components that talk to the API server.
func (s *service) buildAPI(clients *kube.Clients) *apiSide {
	recorder := events.New(events.Config{Client: clients.Kube.Events, Component: "probeshim", Host: s.cfg.NodeName, Log: s.log})
	api := &apiSide{events: recorder}
	api.controller = podprobe.New(podprobe.Config{
		Node:    s.cfg.NodeName,
		Client:  clients.Kruise,
		Engine:  s.engine,
		Events:  recorder,
		Metrics: writes{last: &s.nppWrite},
		Log:     s.log,
		// -1 (no bound) stays negative.
		MessageInterval: time.Duration(s.cfg.Probes.MessageIntervalSeconds) * time.Second,
	})
	api.executor = recreate.New(recreate.Config{
		Node: s.cfg.NodeName, Client: clients.Recreate, Kube: clients.Kube,
		Runtime: s.out.runtime, Containers: s.out.tracker, Network: s.hookNetwork,
		Events: recorder, Log: s.log,
	})
	// The executor's pod cache keeps each container's ports: what a hostNetwork pod declares.
	s.network.SetPortCheck(api.executor.DeclaresPort)
	api.heartbeat = heartbeat.New(heartbeat.Config{
		Relay:         s.heartbeatRelay(clients),
		Node:          s.cfg.NodeName,
		Namespace:     s.cfg.Heartbeat.Namespace,
		Client:        clients.Kube,
		LeaseDuration: time.Duration(s.cfg.Heartbeat.LeaseDurationSeconds) * time.Second,
		RenewInterval: s.renew,
		Healthy:       s.healthy,
		ProbesLate:    func() string { return probesLate(time.Now(), s.engine.Pools()) },
		Registerer:    s.out.registry,
		Log:           s.log,
	})
	return api
}

// heartbeatRelay is the cluster deployment's heartbeat endpoint, authenticated by the
// kubeconfig's client certificate; the heartbeat uses it only when the API server refuses this
// identity the lease (the kubelet's). nil when the kubeconfig has no certificate.
func (s *service) heartbeatRelay(clients *kube.Clients) heartbeat.Relay {
	if clients.Config == nil {
		return nil
	}
	cert, err := heartbeat.ClientCertFromConfig(clients.Config)
	if err != nil {
		s.log.WithError(err).Debug("no heartbeat endpoint: the lease is written with the kubeconfig's identity only")
		return nil
	}
	return heartbeat.NewRelayClient(heartbeat.RelayConfig{
		Kube: clients.Kube, Namespace: s.cfg.Heartbeat.Namespace,
		URL: s.cfg.Heartbeat.Endpoint, CAFile: s.cfg.Heartbeat.EndpointCAFile, ClientCert: cert,
	})
}

// apiComponents wires the API side in and lists it in start order: events
// first (the others record some), the heartbeat last (it renews only once
// the others run).
func (s *service) apiComponents(api *apiSide) []Component {
	return []Component{
		newLoop("events", s.log, func(ctx context.Context) error { api.events.Run(ctx); return nil }),
		hooks{name: "api-side", start: func(context.Context) error {
			// From here on readiness, status and container changes see them.
			s.mu.Lock()
			s.api = api
			s.mu.Unlock()
			s.out.changes.subscribe(func(ch runtime.Change) {
				if ch.Container != "" {
					api.executor.ContainerChanged(ch.PodUID, ch.Container)
				}
			})
			return nil
		}},
		newLoop("nodepodprobe", s.log, api.controller.Run),
		newLoop("recreate", s.log, api.executor.Run),
		newLoop("heartbeat", s.log, api.heartbeat.Run),
	}
}

func (s *service) apiParts() *apiSide {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api
}

func (s *service) nodePodProbeSynced(context.Context) error {
	if api := s.apiParts(); api == nil || !api.controller.Synced() {
		return errors.New("NodePodProbe not synced yet")
	}
	return nil
}

// healthy is the heartbeat's condition: the engine answers, containerd is
// reachable, the NodePodProbe is synced and its status can be written.
func (s *service) healthy(ctx context.Context) error {
	if err := engineAlive(s.engine)(ctx); err != nil {
		return err
	}
	if err := s.out.tracker.Healthy(); err != nil {
		return fmt.Errorf("container runtime: %w", err)
	}
	if err := s.nodePodProbeSynced(ctx); err != nil {
		return err
	}
	if err := s.nppWatch.err(); err != nil {
		return fmt.Errorf("watching NodePodProbe %s: %w", s.cfg.NodeName, err)
	}
	if err := s.nppWrite.err(); err != nil {
		return fmt.Errorf("writing NodePodProbe status: %w", err)
	}
	return nil
}

// observeAPI counts the writes, and keeps the outcome of the last list or watch request for this
// node's NodePodProbe: a watch that keeps failing (refused, API server away)
// shows as an error until one succeeds again.
func (s *service) observeAPI(req *http.Request, resp *http.Response, err error) {
	s.m.countWrite(req, resp, err)
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/nodepodprobes") {
		return
	}
	switch {
	case err != nil && req.Context().Err() != nil:
		// Cancelled by its caller (stopping), not a failure.
	case err != nil:
		s.nppWatch.set(err)
	case resp.StatusCode >= http.StatusBadRequest:
		s.nppWatch.set(fmt.Errorf("the API server answered %s", resp.Status))
	default:
		s.nppWatch.set(nil)
	}
}

func (s *service) probeStatuses() []server.ProbeStatus {
	api := s.apiParts()
	if api == nil {
		return nil
	}
	states := api.controller.States()
	out := make([]server.ProbeStatus, 0, len(states))
	for _, p := range states {
		out = append(out, server.ProbeStatus{
			Namespace: p.Namespace, Pod: p.Pod, PodUID: p.PodUID, Container: p.Container, Probe: p.Probe,
			Type: p.Handler, Result: string(p.State), Message: p.Message,
			LastProbeTime: p.LastProbeTime.Time, LastTransitionTime: p.LastTransitionTime.Time,
		})
	}
	return out
}

func (s *service) heartbeatStatus() *server.HeartbeatStatus {
	api := s.apiParts()
	if api == nil {
		return &server.HeartbeatStatus{Namespace: s.cfg.Heartbeat.Namespace, Name: s.cfg.NodeName,
			Reason: "not started: waiting for the API server"}
	}
	st := api.heartbeat.Status()
	return &server.HeartbeatStatus{Namespace: st.Namespace, Name: st.Name, LastRenew: st.LastRenew,
		Renewing: st.Renewing, Reason: st.Reason, Path: st.Path}
}

// containerChanges fans the tracker's changes out to whoever subscribed;
// subscribers are added as components come into being.
type containerChanges struct {
	mu   sync.RWMutex
	subs []func(runtime.Change)
}

func (c *containerChanges) subscribe(f func(runtime.Change)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, f)
}

func (c *containerChanges) notify(ch runtime.Change) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, f := range c.subs {
		f(ch)
	}
}

// kubeconfigClients connects with the configured kubeconfig once it exists.
func kubeconfigClients(cfg *config.Config) func(func(*http.Request, *http.Response, error)) (*kube.Clients, string) {
	return func(observe func(*http.Request, *http.Response, error)) (*kube.Clients, string) {
		if _, err := os.Stat(cfg.Kubeconfig); err != nil {
			return nil, "kubeconfig " + cfg.Kubeconfig + " (the kubelet's, or a dedicated one; see --kubeconfig)"
		}
		c, err := kube.New(cfg.Kubeconfig, kube.Options{QPS: float32(cfg.KubeAPIQPS), Burst: cfg.KubeAPIBurst,
			UserAgent: "probeshim/" + cfg.NodeName, Observe: observe})
		if err != nil {
			return nil, err.Error()
		}
		return c, ""
	}
}

// systemdNotifier is the notifier of a real run; each call is a no-op
// outside systemd.
type systemdNotifier struct{}

// A failed notification changes nothing the service could act on: systemd's
// start timeout and watchdog catch a service it never hears from.
func (systemdNotifier) Ready(status string)  { _ = systemd.Ready(status) }
func (systemdNotifier) Status(status string) { _ = systemd.Status(status) }
func (systemdNotifier) Stopping()            { _ = systemd.Stopping() }
func (systemdNotifier) Reloading()           { _ = systemd.Reloading() }
func (systemdNotifier) Reloaded()            { _ = systemd.Reloaded() }

// readyNotifier remembers that READY=1 went out, for the reloader.
type readyNotifier struct {
	notifier
	ready *atomic.Bool
}

func (n readyNotifier) Ready(status string) {
	n.notifier.Ready(status)
	n.ready.Store(true)
}

// startup says what start-up waits for, and tells systemd it is up once
// grace has passed (see readyGrace).
type startup struct {
	begun       time.Time
	ready       bool
	notify      notifier
	poll, grace time.Duration
}

func (s *startup) waiting(reason string) {
	if !s.ready && time.Since(s.begun) >= s.grace {
		s.ready = true
		s.notify.Ready("waiting for " + reason)
		return
	}
	s.notify.Status("waiting for " + reason)
}

// waitFor polls cond until it holds, saying in the systemd status line and
// the log (on each new reason) what it waits for. It returns false when ctx
// ends first.
func (s *startup) waitFor(ctx context.Context, log logrus.FieldLogger, cond func() (bool, string)) bool {
	last := ""
	for {
		ok, reason := cond()
		if ok {
			return true
		}
		if reason != last || !s.ready {
			s.waiting(reason)
		}
		if reason != last {
			log.Info("waiting for " + reason)
			last = reason
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(s.poll):
		}
	}
}

// engineAlive reports whether the engine answers at all: a deadlocked
// engine would block Snapshot past the check's deadline.
func engineAlive(e *prober.Manager) func(context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan struct{})
		go func() { e.Snapshot(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("probe engine does not answer: %w", ctx.Err())
		}
	}
}
