// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/criproxy"
	"github.com/probeshim/probeshim/shim/runtime"
)

// criProxyStopTimeout bounds how long a stop waits for the kubelet's calls
// in flight (a container stop with its grace period, an image pull) before
// cutting them off; the unit's TimeoutStopSec leaves room for the rest.
const criProxyStopTimeout = 10 * time.Second

// criProxy is the CRI proxy as a Component: Start serves it when systemd
// passed its socket or the config enables it, and does nothing otherwise.
type criProxy struct {
	cfg     *config.Config
	tracker *runtime.Tracker
	reg     prometheus.Registerer
	log     *logrus.Entry
	stop    func()
}

func (p *criProxy) Name() string { return "cri-proxy" }

func (p *criProxy) Start(context.Context) error {
	stop, err := startCRIProxy(p.cfg, p.tracker, p.reg, p.log)
	p.stop = stop
	return err
}

func (p *criProxy) Stop(context.Context) error {
	if p.stop != nil {
		p.stop()
	}
	return nil
}

// startCRIProxy serves the CRI proxy when systemd passed its socket or the
// config enables it, and returns how to stop it (nil when it does not run).
// It waits for nothing: the kubelet may be waiting on the socket. Nothing
// else in the service depends on it; the tracker only learns sooner.
func startCRIProxy(cfg *config.Config, tracker *runtime.Tracker, reg prometheus.Registerer, log *logrus.Entry) (func(), error) {
	log = log.WithField("component", "cri-proxy")
	l, err := criproxy.Activated()
	if err != nil {
		return nil, err
	}
	activated := l != nil
	switch {
	case activated && !cfg.CRIProxy.Enabled:
		log.WithField("socket", l.Addr().String()).Info("CRI proxy on although criProxy.enabled is false: systemd passed its socket (probeshim-cri.socket is enabled)")
	case !activated && !cfg.CRIProxy.Enabled:
		return nil, nil
	case !activated:
		if l, err = criproxy.Listen(cfg.CRIProxy.Socket); err != nil {
			return nil, err
		}
	}
	p, err := criproxy.New(criproxy.Options{
		Upstream:   cfg.CRISocket,
		Observer:   tracker,
		Pods:       trackedPod(tracker),
		Registerer: reg,
		Log:        log,
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	if err := p.Serve(l); err != nil {
		l.Close()
		p.Shutdown(context.Background())
		return nil, err
	}
	f := logrus.Fields{"socket": l.Addr().String(), "upstream": cfg.CRISocket}
	if activated {
		log.WithFields(f).Info("CRI proxy serving the socket activated by systemd (probeshim-cri.socket)")
	} else {
		log.WithFields(f).Info("CRI proxy serving a socket of its own (no probeshim-cri.socket: kubelet calls fail while the service restarts)")
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), criProxyStopTimeout)
		defer cancel()
		p.Shutdown(ctx)
		log.Info("CRI proxy stopped")
	}, nil
}

func trackedPod(t *runtime.Tracker) func(string) (criproxy.Pod, bool) {
	return func(id string) (criproxy.Pod, bool) {
		o, ok := t.Owner(id)
		return criproxy.Pod{Namespace: o.Namespace, Name: o.PodName, UID: o.PodUID, Container: o.Container}, ok
	}
}
