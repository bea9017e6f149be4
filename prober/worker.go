// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Defaults for zero fields of a probe, as the API server would fill them in.
const (
	defaultTimeoutSeconds   = 1
	defaultPeriodSeconds    = 10
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// probeConfig is an immutable view of one Desired; Sync swaps in a new one
// so a running worker picks up spec changes at its next probe.
type probeConfig struct {
	pod   PodRef
	spec  corev1.Probe // as given; the accessors below apply the defaults
	ports map[string]int32
	// readFile is Desired.ReadFile: the exec probe reads this file instead.
	readFile string
	gen      uint64 // bumped when the handler changes
}

func newProbeConfig(d *Desired) *probeConfig {
	var ports map[string]int32
	if len(d.Ports) > 0 {
		ports = maps.Clone(d.Ports)
	}
	return &probeConfig{pod: d.Pod, spec: *d.Spec.DeepCopy(), ports: ports, readFile: d.ReadFile}
}

func orDefault(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

func (c *probeConfig) timeout() time.Duration {
	return time.Duration(orDefault(c.spec.TimeoutSeconds, defaultTimeoutSeconds)) * time.Second
}

func (c *probeConfig) period() time.Duration {
	return time.Duration(orDefault(c.spec.PeriodSeconds, defaultPeriodSeconds)) * time.Second
}

func (c *probeConfig) successThreshold() int {
	return int(orDefault(c.spec.SuccessThreshold, defaultSuccessThreshold))
}

func (c *probeConfig) failureThreshold() int {
	return int(orDefault(c.spec.FailureThreshold, defaultFailureThreshold))
}

type podID struct{ uid, namespace, name string }

func podIdentity(p PodRef) podID { return podID{p.UID, p.Namespace, p.Name} }

// worker is the state of one probe. doProbe is only ever run by one
// goroutine at a time (the scheduler does not requeue a running worker).
type worker struct {
	key       Key
	m         *Manager
	pod       podID
	probeType string
	cfg       atomic.Pointer[probeConfig]
	gone      atomic.Bool // removed from the manager; publish nothing more
	stats     probeStats

	// Owned by the goroutine in doProbe.
	containerID string
	lastResult  Result
	resultRun   int
	gen         uint64
	// What this worker last published: most probes repeat it, and skipping
	// them here spares the result store's lock, shared by every runner.
	published  bool
	pubResult  Result
	pubMessage string
	pubReason  string
	// erroring: the last run ended in a probe error, already logged.
	erroring bool

	// ctx lives as long as the worker: removal cancels a probe in flight,
	// and a probe needs no context of its own.
	ctx    context.Context
	cancel context.CancelFunc

	// Scheduling, guarded by Manager.mu.
	next      time.Time
	at        time.Duration // next as an offset from Manager.epoch: the heap's cheap key
	lastSched time.Time
	index     int // in Manager.queue, -1 when not queued
	running   bool
	wake      bool // probe again as soon as the current run ends
	overran   bool // the last run outlasted its period
}

func newWorker(m *Manager, d *Desired) *worker {
	w := &worker{
		key:       d.Key,
		m:         m,
		pod:       podIdentity(d.Pod),
		probeType: d.ProbeType,
		index:     -1,
	}
	w.cfg.Store(newProbeConfig(d))
	w.ctx, w.cancel = context.WithCancel(m.baseCtx)
	return w
}

// setNext sets when the worker probes next. Guarded by Manager.mu.
func (w *worker) setNext(t time.Time) {
	w.next = t
	w.at = t.Sub(w.m.epoch)
}

func (w *worker) period() time.Duration {
	return w.cfg.Load().period()
}

// doProbe is one tick of the worker's state machine; s is how the run began.
func (w *worker) doProbe(ctx context.Context, s runStart) {
	cfg := w.cfg.Load()
	if cfg.gen != w.gen {
		w.gen = cfg.gen
		w.lastResult, w.resultRun = Unknown, 0
	}

	c, ok := w.m.containers.Container(w.key.PodUID, w.key.Container)
	if !ok || c.ID == "" {
		return // not created yet, or gone with its pod: wait
	}
	if c.ID != w.containerID {
		// A new container: the old one's result says nothing about it. Unknown always says
		// why (issue 32): no run yet, or the one before it was replaced.
		msg := NoResultYet
		if w.containerID != "" {
			msg = "container restarted"
		}
		w.containerID = c.ID
		w.lastResult, w.resultRun = Unknown, 0
		w.publish(Unknown, msg)
	}
	if !c.Running {
		if c.StartedAt.IsZero() {
			return // created, not started yet: it has no result, Unknown stands
		}
		w.notRunning()
		return
	}
	// Whole seconds, like the kubelet; int64 so a zero StartedAt cannot wrap.
	if int64(w.m.clock.Since(c.StartedAt)/time.Second) < int64(cfg.spec.InitialDelaySeconds) {
		return
	}

	began := w.m.clock.Now()
	result, msg, err := w.m.runProbe(ctx, cfg, c.ID)
	took := w.m.clock.Since(began)
	if ctx.Err() != nil {
		return // stopped or removed mid-probe: the outcome means nothing
	}
	refused := errors.Is(err, ErrRefused)
	if err != nil && !refused {
		w.probeError(c.ID, err, s)
		return
	}
	w.erroring = false
	// A container that died, or was replaced, while it was probed says nothing
	// about its health: a refused connection to a process that just exited is
	// not a failed probe.
	if now, ok := w.m.containers.Container(w.key.PodUID, w.key.Container); !ok || now.ID != c.ID || !now.Running {
		if ok && now.ID == c.ID {
			w.notRunning()
		}
		return
	}
	w.stats.observe(result, took)
	w.m.countRun(w.probeType, result)
	reason := ""
	switch {
	case refused: // nothing was dialled: Unknown at once, whatever was known before
		result, msg, reason = Unknown, errorDetail(err, ""), ReasonTargetRefused
		w.m.countError(w.probeType, reason)
	case result == Failure && took >= w.m.timeout(cfg):
		msg += s.note() // a timeout that may be the node's: it started late
	}

	if result == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < cfg.failureThreshold()) ||
		(result == Success && w.resultRun < cfg.successThreshold()) {
		return
	}
	w.publishUpdate(result, msg, reason, false)
}

// probeError discards a run that ended in an error, as the kubelet does: the
// published result stands, and the error counts toward no threshold. But it is
// never silent: it is counted by reason, while nothing else is known of the
// probe (Unknown) the state says why it does not run (a command that does not
// exist would otherwise stay Unknown without a word), and the first of a
// streak on a container that still runs is a warning (within the manager's
// budget). Errors of a container that stopped meanwhile are its end, not news.
func (w *worker) probeError(containerID string, err error, s runStart) {
	now, ok := w.m.containers.Container(w.key.PodUID, w.key.Container)
	if !ok || now.ID != containerID || !now.Running {
		if w.m.debug() {
			w.logger().Debug("probe error of a container that stopped, result discarded", "error", err)
		}
		return
	}
	reason := ErrorReason(err)
	w.m.countError(w.probeType, reason)
	if !w.published || w.pubResult == Unknown {
		w.publishUpdate(Unknown, errorDetail(err, s.note()), reason, true)
	}
	if w.erroring || !w.m.errorLogs.AllowN(w.m.clock.Now(), 1) {
		if w.m.debug() {
			w.logger().Debug("probe error, result discarded", "reason", reason, "error", err)
		}
		return
	}
	w.erroring = true
	w.logger().Warn("probe error: the result is discarded until a run completes", "reason", reason, "error", err)
}

// notRunning publishes Unknown for a container that has stopped. An exit is
// the kubelet's to handle (restartPolicy, back-off); reported as a failed
// probe it would set conditions False, emit probe-failed events and, for a
// liveness probe, have the decider restart a container that is already being
// restarted. The run of results ends with the process it measured.
func (w *worker) notRunning() {
	w.lastResult, w.resultRun = Unknown, 0
	w.publish(Unknown, "container is not running")
}

func (w *worker) publish(r Result, msg string) { w.publishUpdate(r, msg, "", false) }

func (w *worker) publishUpdate(r Result, msg, reason string, errored bool) {
	msg = capMessage(msg)
	if w.published && r == w.pubResult && msg == w.pubMessage && reason == w.pubReason {
		return // the store holds it already: set would change nothing
	}
	w.published, w.pubResult, w.pubMessage, w.pubReason = true, r, msg, reason
	u := Update{Key: w.key, Result: r, Message: msg, Reason: reason, Time: w.m.clock.Now(), Errored: errored}
	if w.m.results.set(u, &w.gone) && w.m.debug() {
		w.logger().Debug("probe result changed", "result", r.String(), "message", u.Message)
	}
}

func (w *worker) logger() *slog.Logger {
	return w.m.log.With("namespace", w.pod.namespace, "pod", w.pod.name, "container", w.key.Container, "probe", w.key.Probe)
}
