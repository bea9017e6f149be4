// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"time"

	"golang.org/x/time/rate"
)

// bucket is the cluster-wide token bucket; it follows the configured rate without losing the
// tokens already spent.
type bucket struct {
	limiter *rate.Limiter
}

func newBucket(s *Settings) *bucket {
	return &bucket{limiter: rate.NewLimiter(rate.Limit(s.QPS), s.Burst)}
}

// configure applies a changed rate limit from now on.
func (b *bucket) configure(now time.Time, s *Settings) {
	if b.limiter.Limit() != rate.Limit(s.QPS) {
		b.limiter.SetLimitAt(now, rate.Limit(s.QPS))
	}
	if b.limiter.Burst() != s.Burst {
		b.limiter.SetBurstAt(now, s.Burst)
	}
}

func (b *bucket) Take(now time.Time) (bool, time.Duration) {
	if b.limiter.AllowN(now, 1) {
		return true, 0
	}
	r := b.limiter.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return false, wait
}

func (b *bucket) tokens() float64 { return b.limiter.TokensAt(time.Now()) }
