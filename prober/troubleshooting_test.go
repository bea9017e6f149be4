// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"os"
	"strings"
	"testing"
)

// Every reason a probe can be Unknown for is explained on the troubleshooting page, where a user
// looking at `probe error (<Reason>): ...` on a pod condition or in `probeshim status` finds its
// cause and fix: a row of its table that starts with the reason.
func TestTroubleshootingExplainsEveryErrorReason(t *testing.T) {
	page, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ErrorReasons() {
		if !strings.Contains(string(page), "\n| `"+r+"` |") {
			t.Errorf("docs/troubleshooting.md has no row for the probe error reason %s (a line starting with | `%s` |)", r, r)
		}
	}
}
