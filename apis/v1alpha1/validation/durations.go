// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxDurationSeconds bounds the int64 second counts that become a time.Duration (grace periods,
// deadlines): one year. No wait that long is meant, and the bound keeps far from the ~292 years
// past which seconds × time.Second overflows into a negative duration (a deadline already past,
// a grace period of nothing).
const MaxDurationSeconds int64 = 366 * 24 * 60 * 60

// validateSeconds requires 0 <= v <= MaxDurationSeconds.
func validateSeconds(v int64, fldPath *field.Path) field.ErrorList {
	if v > MaxDurationSeconds {
		return field.ErrorList{field.Invalid(fldPath, v, fmt.Sprintf("must be at most %d (one year)", MaxDurationSeconds))}
	}
	return nonNegative(v, fldPath)
}

// SecondsDuration turns a count of seconds into a Duration, clamped to [0, MaxDurationSeconds]:
// for readers of objects stored before the bound (or written past the webhook), so that no
// value ever overflows.
func SecondsDuration(s int64) time.Duration {
	return time.Duration(min(max(s, 0), MaxDurationSeconds)) * time.Second
}
