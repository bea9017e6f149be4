// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"sync"
)

// exitRouter hands the exits of exec processes, as the Tracker sees them on
// containerd's event stream (it follows /tasks/exit for the containers
// anyway), to the Exec waiting for each: no Wait call, which holds a gRPC
// stream open for the whole exec, per probe. An Exec uses it only while a
// stream is up; when a stream ends, every waiter is told so and asks the
// runtime instead (an exec process is kept until deleted, so a Wait then
// still answers with its exit).
type exitRouter struct {
	mu      sync.Mutex
	streams int // event streams following /tasks/exit now
	waiters map[string]chan exitEvent
	// ends: per container with an exec of ours running, closed when the container's own
	// process exits (the runtime names its init by the container's ID).
	ends map[string]*containerEnd
	// delivered counts the exits handed to a waiter (for tests).
	delivered int
}

// exitEvent is an exec's exit status, or lost: the stream that would have
// told it ended.
type exitEvent struct {
	code uint32
	lost bool
}

// watch registers a waiter for execID's exit, if a stream is up.
func (r *exitRouter) watch(execID string) (<-chan exitEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == 0 {
		return nil, false
	}
	if r.waiters == nil {
		r.waiters = map[string]chan exitEvent{}
	}
	ch := make(chan exitEvent, 1)
	r.waiters[execID] = ch
	return ch, true
}

func (r *exitRouter) unwatch(execID string) {
	r.mu.Lock()
	delete(r.waiters, execID)
	r.mu.Unlock()
}

// exited delivers an exec's exit; exits nobody waits for (the kubelet's
// execs, an exec already given up) are dropped.
func (r *exitRouter) exited(execID string, code uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.waiters[execID]; ok {
		ch <- exitEvent{code: code}
		delete(r.waiters, execID)
		r.delivered++
	}
}

// containerEnd is closed when its container's process exits; n execs wait on it.
type containerEnd struct {
	ch chan struct{}
	n  int
}

// watchEnd tells, by closing the channel, when containerID's own process exits. The exit of
// a container's init is published after the exits of the execs its death killed (containerd's
// shim holds it back until then), so an exec that learns it was killed may learn, moments
// later, that its container ended. release must be called once.
func (r *exitRouter) watchEnd(containerID string) (ended <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil {
		r.ends = map[string]*containerEnd{}
	}
	e := r.ends[containerID]
	if e == nil {
		e = &containerEnd{ch: make(chan struct{})}
		r.ends[containerID] = e
	}
	e.n++
	return e.ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if e.n--; e.n == 0 && r.ends[containerID] == e {
			delete(r.ends, containerID)
		}
	}
}

// containerExited closes the end channel of containerID, if anyone watches it.
func (r *exitRouter) containerExited(containerID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.ends[containerID]; ok {
		close(e.ch)
		delete(r.ends, containerID)
	}
}

// streamUp and streamDown bracket a subscribed event stream.
func (r *exitRouter) streamUp() {
	r.mu.Lock()
	r.streams++
	r.mu.Unlock()
}

func (r *exitRouter) streamDown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams--
	for id, ch := range r.waiters {
		ch <- exitEvent{lost: true}
		delete(r.waiters, id)
	}
}
