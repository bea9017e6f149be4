// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package service assembles the node service: runtime access, the container
// tracker, the probe engine, the NodePodProbe controller, the local
// endpoints, the optional CRI proxy and systemd notifications, and runs
// them until stopped.
package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/config"
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

// Run runs the node service until ctx is done. It returns an error only for
// what a restart cannot fix (a port already taken); a missing kubeconfig or
// runtime is waited for, with the reason in the systemd status line.
func Run(ctx context.Context, cfg *config.Config, logger *logrus.Logger) error {
	log := logger.WithField("node", cfg.NodeName)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)

	rt, err := runtime.New(runtime.WithContainerdSocket(cfg.ContainerdSocket), runtime.WithCRISocket(cfg.CRISocket),
		runtime.WithLogger(log))
	if err != nil {
		return err
	}
	defer rt.Close()

	network := netns.NewNetwork(rt.PodNetwork)
	defer network.Close()
	// preStop hooks dial through a Network of their own: the executor
	// forgets a pod's handle when its requests are done.
	hookNetwork := netns.NewNetwork(rt.PodNetwork)
	defer hookNetwork.Close()
	var engine *prober.Manager
	var executor atomic.Pointer[recreate.Executor]
	tracker := runtime.NewTracker(rt, func(ch runtime.Change) {
		if ch.Container == "" {
			// Sandbox changed: look its netns up again.
			network.Forget(ch.PodUID)
			hookNetwork.Forget(ch.PodUID)
			return
		}
		engine.ContainerChanged(ch.PodUID, ch.Container)
		if e := executor.Load(); e != nil {
			e.ContainerChanged(ch.PodUID, ch.Container)
		}
	})
	engine, err = prober.NewManager(tracker,
		prober.WithExecer(countingExecer{Execer: rt, m: m}),
		prober.WithNetwork(network),
		prober.WithRegisterer(reg),
		prober.WithLogger(slogrus.NewLogger(log)),
		prober.WithConcurrency(cfg.Probes.MaxConcurrentExecs, cfg.Probes.MaxConcurrentNetwork))
	if err != nil {
		return err
	}

	// The CRI proxy comes first: a kubelet pointed at it waits for it, and
	// the node goes NotReady if it waits long. It needs only containerd.
	stopProxy, err := startCRIProxy(cfg, tracker, reg, log)
	if err != nil {
		return err
	}
	if stopProxy != nil {
		defer stopProxy()
	}

	// The controller exists once the API server is reachable; the endpoints
	// serve before that.
	var ctrl atomic.Pointer[podprobe.Controller]

	srv := server.New(server.Options{
		HealthAddress:  cfg.HealthAddress,
		MetricsAddress: cfg.MetricsAddress,
		StatusSocket:   cfg.StatusSocket,
		Node:           cfg.NodeName,
		Gatherer:       reg,
		Health:         []server.Check{{Name: "engine", Check: engineAlive(engine)}},
		Ready: []server.Check{
			{Name: "runtime", Check: func(context.Context) error { return tracker.Healthy() }},
			{Name: "nodepodprobe", Check: func(context.Context) error {
				if c := ctrl.Load(); c == nil || !c.Synced() {
					return errors.New("NodePodProbe not synced yet")
				}
				return nil
			}},
		},
		Status: server.StatusFunc(func() []server.ProbeStatus {
			if c := ctrl.Load(); c != nil {
				return probeStatuses(c.States())
			}
			return nil
		}),
		Log: log,
	})
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	// Ping the watchdog from the start: waiting for containerd or a
	// kubeconfig is not a reason for systemd to restart us.
	run(func() { systemd.Watchdog(ctx, engineAlive(engine), log) })
	run(func() { tracker.Run(ctx) })
	run(func() {
		if err := engine.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.WithError(err).Error("probe engine stopped")
		}
	})

	start := &startup{begun: time.Now()}
	if !start.waitFor(ctx, log, func() (bool, string) {
		select {
		case <-tracker.Synced():
			return true, ""
		default:
		}
		reason := "containerd at " + rt.ContainerdSocket()
		if err := tracker.Healthy(); err != nil {
			reason += ": " + err.Error()
		}
		return false, reason
	}) {
		return nil
	}
	log.WithField("socket", rt.ContainerdSocket()).Info("container runtime reachable")

	var clients *kube.Clients
	if !start.waitFor(ctx, log, func() (bool, string) {
		if _, err := os.Stat(cfg.Kubeconfig); err != nil {
			return false, "kubeconfig " + cfg.Kubeconfig + " (the kubelet's, or a dedicated one; see --kubeconfig)"
		}
		c, err := kube.New(cfg.Kubeconfig, kube.Options{QPS: float32(cfg.KubeAPIQPS), Burst: cfg.KubeAPIBurst,
			UserAgent: "probeshim/" + cfg.NodeName})
		if err != nil {
			return false, err.Error()
		}
		clients = c
		return true, ""
	}) {
		return nil
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	events := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "probeshim", Host: cfg.NodeName})

	c := podprobe.New(podprobe.Config{
		Node:    cfg.NodeName,
		Client:  clients.Kruise,
		Engine:  engine,
		Events:  events,
		Metrics: writes{m: m, resource: "nodepodprobes/status"},
		Log:     log,
	})
	ctrl.Store(c)
	run(func() { c.Run(ctx) })
	ex := recreate.New(recreate.Config{
		Node: cfg.NodeName, Client: clients.Kruise, Kube: clients.Kube,
		Runtime: rt, Containers: tracker, Network: hookNetwork,
		Events: events, Log: log,
	})
	executor.Store(ex)
	run(func() {
		if err := ex.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.WithError(err).Error("ContainerRecreateRequest executor stopped")
		}
	})

	if !start.waitFor(ctx, log, func() (bool, string) {
		switch {
		case !c.Synced():
			return false, "the first list of NodePodProbe " + cfg.NodeName + " from the API server"
		case !ex.Synced():
			return false, "the first list of this node's ContainerRecreateRequests from the API server"
		}
		return true, ""
	}) {
		return nil
	}
	systemd.Ready("probing for node " + cfg.NodeName)
	log.Info("ready")
	<-ctx.Done()
	systemd.Stopping()
	log.Info("stopping: probes and in-flight execs are cancelled")
	return nil
}

// startup says what start-up waits for, and tells systemd it is up once
// readyGrace has passed (see readyGrace).
type startup struct {
	begun time.Time
	ready bool
}

func (s *startup) waiting(reason string) {
	if !s.ready && time.Since(s.begun) >= readyGrace {
		s.ready = true
		systemd.Ready("waiting for " + reason)
		return
	}
	systemd.Status("waiting for " + reason)
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
		case <-time.After(waitPoll):
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

func probeStatuses(states []podprobe.ProbeState) []server.ProbeStatus {
	out := make([]server.ProbeStatus, 0, len(states))
	for _, s := range states {
		out = append(out, server.ProbeStatus{
			Namespace: s.Namespace, Pod: s.Pod, PodUID: s.PodUID, Container: s.Container, Probe: s.Probe,
			Type: s.Handler, Result: string(s.State), Message: s.Message,
			LastProbeTime: s.LastProbeTime.Time, LastTransitionTime: s.LastTransitionTime.Time,
		})
	}
	return out
}
