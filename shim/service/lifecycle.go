// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// Component is one part of the node service with a lifecycle of its own.
// Start returns once the component runs (its loops in goroutines of its
// own) or with the reason it cannot; Stop ends what Start began and waits
// for it, at most until ctx is done. Stop is called only after a Start that
// returned nil.
type Component interface {
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// stopTimeout bounds the stop of one component, so that one that hangs does
// not keep the rest from stopping; the unit's TimeoutStopSec (30 s) bounds
// the whole.
const stopTimeout = 10 * time.Second

// lifecycle starts components in order and stops the started ones in
// reverse order.
type lifecycle struct {
	log     logrus.FieldLogger
	started []Component
}

// start starts each component in turn. When one fails, the error names it
// and what started before it keeps running until stop.
func (l *lifecycle) start(ctx context.Context, cs ...Component) error {
	for _, c := range cs {
		if err := c.Start(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		l.log.WithField("component", c.Name()).Debug("started")
		l.started = append(l.started, c)
	}
	return nil
}

// stop stops every started component, the last started first, so that
// nothing stops before what depends on it.
func (l *lifecycle) stop() {
	for i := len(l.started) - 1; i >= 0; i-- {
		c := l.started[i]
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		if err := c.Stop(ctx); err != nil {
			l.log.WithError(err).WithField("component", c.Name()).Warn("stop failed")
		} else {
			l.log.WithField("component", c.Name()).Debug("stopped")
		}
		cancel()
	}
	l.started = nil
}

// loop is a Component made of a function that runs until its context ends:
// Start runs it in a goroutine, Stop cancels it and waits for it. Its
// context is not the caller's, so that stopping follows the lifecycle's
// order rather than every loop ending at once.
type loop struct {
	name string
	run  func(ctx context.Context) error
	log  logrus.FieldLogger

	cancel context.CancelFunc
	done   chan struct{}
}

// newLoop makes a loop; run's error is logged unless it is the context's.
func newLoop(name string, log logrus.FieldLogger, run func(ctx context.Context) error) *loop {
	return &loop{name: name, run: run, log: log}
}

func (l *loop) Name() string { return l.name }

func (l *loop) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		if err := l.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			l.log.WithError(err).WithField("component", l.name).Error("stopped")
		}
	}()
	return nil
}

func (l *loop) Stop(ctx context.Context) error {
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("still running: %w", ctx.Err())
	}
}

// hooks is a Component from two functions, for what starts and stops
// without a loop of its own (listeners, an event broadcaster, closers).
type hooks struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

func (h hooks) Name() string { return h.name }

func (h hooks) Start(ctx context.Context) error {
	if h.start == nil {
		return nil
	}
	return h.start(ctx)
}

func (h hooks) Stop(ctx context.Context) error {
	if h.stop == nil {
		return nil
	}
	return h.stop(ctx)
}

// closer is a Component that only releases something on Stop (a runtime
// connection, a cache of network namespaces), so it is released after
// everything started later has stopped.
func closer(name string, release func() error) Component {
	return hooks{name: name, stop: func(context.Context) error { return release() }}
}
