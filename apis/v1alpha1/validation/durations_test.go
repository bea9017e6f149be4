// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Seconds that would overflow a time.Duration (or are absurdly long) are refused with their path.
func TestDurationBounds(t *testing.T) {
	huge := int64(math.MaxInt64 / 1000) // × time.Second wraps around
	over := MaxDurationSeconds + 1
	cases := []struct {
		name   string
		mutate func(*v1alpha1.ContainerRecreateRequest)
		want   []wantErr
	}{
		{name: "a year is fine", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy.TerminationGracePeriodSeconds = ptr(MaxDurationSeconds)
			c.Spec.Strategy.UnreadyGracePeriodSeconds = ptr(MaxDurationSeconds)
			c.Spec.ActiveDeadlineSeconds = ptr(MaxDurationSeconds)
		}},
		{name: "overflowing grace periods and deadline", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy.TerminationGracePeriodSeconds = ptr(huge)
			c.Spec.Strategy.UnreadyGracePeriodSeconds = ptr(int64(math.MaxInt64))
			c.Spec.ActiveDeadlineSeconds = ptr(over)
		}, want: []wantErr{
			invalid("spec.strategy.terminationGracePeriodSeconds", "must be at most 31622400 (one year)"),
			invalid("spec.strategy.unreadyGracePeriodSeconds", "must be at most 31622400"),
			invalid("spec.activeDeadlineSeconds", "must be at most 31622400"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := recreate()
			tc.mutate(c)
			checkErrs(t, ValidateContainerRecreateRequest(c, crrPodIP), tc.want...)
		})
	}

	p := corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: ptr(huge)}
	errs := ValidateProbe(&p, ProbeOptions{Liveness: true}, field.NewPath("livenessProbe"))
	found := false
	for _, e := range errs {
		found = found || e.Field == "livenessProbe.terminationGracePeriodSeconds"
	}
	if !found {
		t.Errorf("a liveness probe's overflowing terminationGracePeriodSeconds passed: %v", errs)
	}
}

func TestSecondsDuration(t *testing.T) {
	for in, want := range map[int64]time.Duration{
		0: 0, 5: 5 * time.Second, -3: 0,
		math.MaxInt64:      time.Duration(MaxDurationSeconds) * time.Second,
		math.MaxInt64 / 10: time.Duration(MaxDurationSeconds) * time.Second,
	} {
		if got := SecondsDuration(in); got != want || got < 0 {
			t.Errorf("SecondsDuration(%d) = %v, want %v", in, got, want)
		}
	}
}
