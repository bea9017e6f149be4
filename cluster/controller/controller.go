// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package controller wires probeshim's cluster controllers into a controller-runtime manager:
//
//   - nodepodprobe: one NodePodProbe per Ready node, holding every PodProbeMarker's probes for
//     the node's pods; PodProbeMarker status.
//   - podstatus: NodePodProbe results of marker probes → pod conditions, labels, annotations.
//   - liveness: enhanced-liveness pods → their probes in their node's NodePodProbe.
//   - crr: ContainerRecreateRequest lifecycle (pod readiness, deadlines, pick-up timeout, TTL).
//   - podready: the KruisePodReady condition, True, for pods with the readiness gate.
//   - heartbeat: node service Leases → which node services are silent, recorded on their
//     NodePodProbes; the Leases of deleted nodes.
//
// All are level-based and write only differences, so they are safe to restart and, behind
// leader election (the manager's job), to run in several replicas.
package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/probeshim/probeshim/cluster/controller/crr"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/internal/hold"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/controller/nodepodprobe"
	"github.com/probeshim/probeshim/cluster/controller/podready"
	"github.com/probeshim/probeshim/cluster/controller/podstatus"
)

// Option tunes SetupWithManager.
type Option func(*options)

type options struct {
	workers   int
	liveness  bool
	budget    int
	heartbeat heartbeat.Options
	holdProbe hold.Func
	holdCRR   hold.Func
}

// WithHolds makes the controllers stand aside while another actor does their work (OpenKruise;
// see cluster/kruise): probes holds the NodePodProbe, PodProbeMarker status, pod status and
// liveness controllers, crr the ContainerRecreateRequest lifecycle controller.
func WithHolds(probes, crr hold.Func) Option {
	return func(o *options) { o.holdProbe, o.holdCRR = probes, crr }
}

// WithHeartbeat configures the node service heartbeat controller (see heartbeat.Options).
func WithHeartbeat(o heartbeat.Options) Option { return func(opts *options) { opts.heartbeat = o } }

// WithWorkers sets the concurrent reconciles of every controller (their defaults otherwise).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithNodeBudget sets the bytes the probes of one node may cost in its NodePodProbe (see
// nodepodprobe.WithNodeBudget); 0 keeps the default.
func WithNodeBudget(bytes int) Option { return func(o *options) { o.budget = bytes } }

// WithEnhancedLiveness turns the enhanced-liveness mapping on or off (default on).
func WithEnhancedLiveness(on bool) Option { return func(o *options) { o.liveness = on } }

// SetupWithManager adds every cluster controller to mgr. The manager needs the client-go and
// apps.kruise.io/v1alpha1 types in its scheme.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	o := options{liveness: true}
	for _, opt := range opts {
		opt(&o)
	}
	var npp []nodepodprobe.Option
	var status []podstatus.Option
	var live []liveness.Option
	var recreate []crr.Option
	var ready []podready.Option
	if o.holdProbe != nil {
		npp = append(npp, nodepodprobe.WithHold(o.holdProbe))
		status = append(status, podstatus.WithHold(o.holdProbe))
		live = append(live, liveness.WithHold(o.holdProbe))
	}
	if o.holdProbe != nil {
		o.heartbeat.Hold = o.holdProbe
	}
	if o.holdCRR != nil {
		recreate = append(recreate, crr.WithHold(o.holdCRR))
	}
	// Both list pods by node: one index for the manager.
	pods := nppspec.NewPodIndex(mgr.GetFieldIndexer())
	npp = append(npp, nodepodprobe.WithPodIndex(pods))
	live = append(live, liveness.WithPodIndex(pods))
	if o.workers > 0 {
		npp = append(npp, nodepodprobe.WithWorkers(o.workers))
		status = append(status, podstatus.WithWorkers(o.workers))
		live = append(live, liveness.WithWorkers(o.workers))
		recreate = append(recreate, crr.WithWorkers(o.workers))
		ready = append(ready, podready.WithWorkers(o.workers))
	}
	if o.budget > 0 {
		npp = append(npp, nodepodprobe.WithNodeBudget(o.budget))
		live = append(live, liveness.WithNodeBudget(o.budget))
	}
	if err := nodepodprobe.SetupWithManager(mgr, npp...); err != nil {
		return fmt.Errorf("setting up the PodProbeMarker controllers: %w", err)
	}
	if err := podstatus.SetupWithManager(mgr, status...); err != nil {
		return fmt.Errorf("setting up the pod status controller: %w", err)
	}
	if o.liveness {
		if err := liveness.SetupWithManager(mgr, live...); err != nil {
			return fmt.Errorf("setting up the enhanced liveness controller: %w", err)
		}
	}
	if err := crr.SetupWithManager(mgr, recreate...); err != nil {
		return fmt.Errorf("setting up the ContainerRecreateRequest lifecycle controller: %w", err)
	}
	if err := podready.SetupWithManager(mgr, ready...); err != nil {
		return fmt.Errorf("setting up the KruisePodReady controller: %w", err)
	}
	if err := heartbeat.SetupWithManager(mgr, o.heartbeat); err != nil {
		return fmt.Errorf("setting up the node service heartbeat controller: %w", err)
	}
	return nil
}
