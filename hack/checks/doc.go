// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package checks holds tests over the repository as a whole (license headers, no sleeps as waits in
// tests), run by make unit.
package checks
