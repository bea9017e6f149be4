// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"strings"
	"testing"

	"github.com/probeshim/probeshim/internal/build/gendoc"
	"github.com/probeshim/probeshim/shim/config"
)

// docs/reference/node-config.md is what shim/config says: a field or flag added, removed or
// renamed, or a doc comment changed, without the file regenerated fails here (and in make
// verify-generated).
func TestDocCurrent(t *testing.T) {
	doc, err := render("../../shim/config/config.go", config.FlagFields())
	if err != nil {
		t.Fatal(err)
	}
	if err := gendoc.Check("../../docs/reference/node-config.md", doc); err != nil {
		t.Fatal(err)
	}
}

// Every flag lands on the row of the field it sets, nested fields under their section, and a flag
// whose field the types lack is an error, not a row lost.
func TestRender(t *testing.T) {
	doc, err := render("../../shim/config/config.go", config.FlagFields())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `probes.maxConcurrentExecs` | int | `--max-concurrent-execs`: ",
		"| `heartbeat.endpointCAFile` | string | `--heartbeat-endpoint-ca-file`: ",
		"## `criProxy`",
		"system:node:&lt;name&gt;",
		"```yaml\nnodeName: worker-1",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	_, err = render("../../shim/config/config.go", []config.FlagField{{Flag: "gone", Field: "probes.gone"}})
	if err == nil || !strings.Contains(err.Error(), "--gone sets probes.gone") {
		t.Errorf("a flag of a field the types lack: %v", err)
	}
	if _, err := render("../../shim/config/config.go", []config.FlagField{{Flag: "loose"}}); err == nil {
		t.Error("a flag that sets no field was accepted")
	}
}
