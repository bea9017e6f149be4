// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"time"
)

// probeTCP succeeds when a connection to addr opens within timeout.
func probeTCP(ctx context.Context, d Dialer, addr string, timeout time.Duration) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := lingerDial(d)(ctx, "tcp", addr)
	if err != nil {
		return Failure, err.Error()
	}
	_ = c.Close()
	return Success, ""
}
