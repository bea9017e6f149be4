// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"time"

	"golang.org/x/time/rate"
)

// maxIdleNamespaces bounds the namespace buckets kept: past it, those full again (idle long
// enough to have every token back) are dropped, which loses nothing.
const maxIdleNamespaces = 1024

// bucket is the rate limit on new requests: a token bucket per namespace and one cluster-wide.
// A request takes a token of both, so that one namespace's failures cannot use up the
// cluster-wide rate that every other namespace shares. It follows the configured rates without
// losing the tokens already spent.
type bucket struct {
	cluster *rate.Limiter
	nsLimit rate.Limit
	nsBurst int
	ns      map[string]*rate.Limiter
}

func newBucket(s *Settings) *bucket {
	return &bucket{cluster: rate.NewLimiter(rate.Limit(s.QPS), s.Burst),
		nsLimit: rate.Limit(s.NamespaceQPS), nsBurst: s.NamespaceBurst, ns: map[string]*rate.Limiter{}}
}

// configure applies a changed rate limit from now on; slowed puts the cluster-wide bucket at
// the unhealthy rate.
func (b *bucket) configure(now time.Time, s *Settings, slowed bool) {
	set := func(l *rate.Limiter, limit rate.Limit, burst int) {
		if l.Limit() != limit {
			l.SetLimitAt(now, limit)
		}
		if l.Burst() != burst {
			l.SetBurstAt(now, burst)
		}
	}
	if slowed {
		set(b.cluster, rate.Limit(s.UnhealthyQPS), 1) // one at a time, as the node lifecycle controller's secondary rate
	} else {
		set(b.cluster, rate.Limit(s.QPS), s.Burst)
	}
	b.nsLimit, b.nsBurst = rate.Limit(s.NamespaceQPS), s.NamespaceBurst
	for _, l := range b.ns {
		set(l, b.nsLimit, b.nsBurst)
	}
}

// Take takes a token of namespace's bucket and of the cluster's, or none and says which is empty
// and how long until it is not.
func (b *bucket) Take(namespace string, now time.Time) (bool, Scope, time.Duration) {
	l := b.ns[namespace]
	if l == nil {
		b.prune(now)
		l = rate.NewLimiter(b.nsLimit, b.nsBurst)
		b.ns[namespace] = l
	}
	nr := l.ReserveN(now, 1)
	if wait := nr.DelayFrom(now); wait > 0 || !nr.OK() {
		nr.CancelAt(now)
		return false, ScopeNamespace, wait
	}
	cr := b.cluster.ReserveN(now, 1)
	if wait := cr.DelayFrom(now); wait > 0 || !cr.OK() {
		cr.CancelAt(now)
		nr.CancelAt(now) // the namespace's token goes back: nothing was created
		return false, ScopeCluster, wait
	}
	return true, "", 0
}

func (b *bucket) prune(now time.Time) {
	if len(b.ns) < maxIdleNamespaces {
		return
	}
	for ns, l := range b.ns {
		if l.TokensAt(now) >= float64(l.Burst()) {
			delete(b.ns, ns)
		}
	}
}

func (b *bucket) tokens() float64 { return b.cluster.TokensAt(time.Now()) }
