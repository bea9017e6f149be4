// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// resultStore holds the latest published result per key and feeds changed
// keys to the Updates channel through a queue, so workers never block on a
// slow reader.
type resultStore struct {
	mu      sync.Mutex
	entries map[Key]*resultEntry
	queue   []Key
	notify  chan struct{}
	out     chan Update
}

type resultEntry struct {
	latest Update
	queued bool
	// What the reader last received, to skip a flip that returned to it
	// before the reader caught up.
	sent        bool
	sentResult  Result
	sentMessage string
	sentReason  string
}

func newResultStore() *resultStore {
	return &resultStore{
		entries: map[Key]*resultEntry{},
		notify:  make(chan struct{}, 1),
		out:     make(chan Update),
	}
}

// set records u unless the worker is gone, and reports whether the result,
// message or reason changed. The gone check is under the lock so that a
// removal cannot be undone by a probe that was still running.
func (s *resultStore) set(u Update, gone *atomic.Bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gone.Load() {
		return false
	}
	e, ok := s.entries[u.Key]
	if ok && e.latest.Result == u.Result && e.latest.Message == u.Message && e.latest.Reason == u.Reason {
		return false
	}
	if !ok {
		e = &resultEntry{}
		s.entries[u.Key] = e
	}
	e.latest = u
	if !e.queued {
		e.queued = true
		s.queue = append(s.queue, u.Key)
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
	return true
}

func (s *resultStore) remove(k Key) {
	s.mu.Lock()
	delete(s.entries, k)
	s.mu.Unlock()
}

func (s *resultStore) snapshot() []Update {
	s.mu.Lock()
	out := make([]Update, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.latest)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Update) int {
		return cmp.Or(cmp.Compare(a.Key.PodUID, b.Key.PodUID),
			cmp.Compare(a.Key.Container, b.Key.Container),
			cmp.Compare(a.Key.Probe, b.Key.Probe))
	})
	return out
}

// run delivers queued changes until ctx is done.
func (s *resultStore) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.notify:
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, k := range batch {
			s.mu.Lock()
			e, ok := s.entries[k]
			if !ok {
				s.mu.Unlock()
				continue
			}
			e.queued = false
			if e.sent && e.sentResult == e.latest.Result && e.sentMessage == e.latest.Message && e.sentReason == e.latest.Reason {
				s.mu.Unlock()
				continue
			}
			u := e.latest
			e.sent, e.sentResult, e.sentMessage, e.sentReason = true, u.Result, u.Message, u.Reason
			s.mu.Unlock()
			select {
			case s.out <- u:
			case <-ctx.Done():
				return
			}
		}
	}
}
