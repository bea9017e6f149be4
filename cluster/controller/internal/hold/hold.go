// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package hold lets a controller stand aside while another actor (OpenKruise) does its work: a
// held reconcile writes nothing and comes back later, so the work resumes by itself once the
// other actor is gone.
package hold

import (
	"context"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Func says why the work is held ("" when it is not). Nil never holds.
type Func func() string

// Requeue is when a held reconcile comes back.
const Requeue = 30 * time.Second

// Check returns true and the result to return when f holds the work.
func Check(ctx context.Context, f Func) (reconcile.Result, bool) {
	if f == nil {
		return reconcile.Result{}, false
	}
	why := f()
	if why == "" {
		return reconcile.Result{}, false
	}
	logf.FromContext(ctx).V(1).Info("held off: another actor does this work", "why", why)
	return reconcile.Result{RequeueAfter: Requeue}, true
}
