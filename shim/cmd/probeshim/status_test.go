// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/shim/server"
)

// `probeshim status` for scripts: -o json and -o yaml print the status socket's document with
// its state; the exit code says live (0), degraded (1) or not running (3).
func TestStatusForScripts(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "status.sock")
	hb := &server.HeartbeatStatus{Namespace: "probeshim-node-lease", Name: "n1", Renewing: true}
	s := server.New(server.Options{StatusSocket: sock, Node: "n1", Heartbeat: func() *server.HeartbeatStatus { return hb },
		Status: server.StatusFunc(func() []server.ProbeStatus {
			return []server.ProbeStatus{{Namespace: "games", Pod: "gs-0", Container: "main", Probe: "idle#idle", Result: "Succeeded"}}
		})})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	var out bytes.Buffer
	if err := status([]string{"--status-socket", sock, "-o", "json"}, &out); err != nil {
		t.Fatalf("live: %v", err)
	}
	var st server.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("-o json is not the document: %v\n%s", err, out.String())
	}
	if st.State != server.StateLive || st.Node != "n1" || len(st.Probes) != 1 || st.Probes[0].Probe != "idle#idle" {
		t.Errorf("-o json: %+v", st)
	}

	hb.Renewing, hb.Reason = false, "Unauthorized"
	out.Reset()
	err := status([]string{"--status-socket", sock, "-o", "yaml"}, &out)
	var ex exitCode
	if !errors.As(err, &ex) || ex.code != exitDegraded {
		t.Fatalf("degraded: %v, want exit %d", err, exitDegraded)
	}
	if err := yaml.Unmarshal(out.Bytes(), &st); err != nil || st.State != server.StateDegraded ||
		len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "Unauthorized") {
		t.Errorf("-o yaml: %v %+v\n%s", err, st, out.String())
	}
	out.Reset()
	if err := status([]string{"--status-socket", sock}, &out); !errors.As(err, &ex) || ex.code != exitDegraded ||
		!strings.Contains(out.String(), "DEGRADED: the heartbeat Lease is not renewed: Unauthorized") {
		t.Errorf("text: %v\n%s", err, out.String())
	}

	if err := status([]string{"--status-socket", filepath.Join(dir, "none.sock")}, &out); !errors.As(err, &ex) || ex.code != exitNotRunning {
		t.Errorf("no service: %v, want exit %d", err, exitNotRunning)
	}
	if err := status([]string{"-o", "xml"}, &out); !errors.As(err, &ex) || ex.code != exitUsage {
		t.Errorf("-o xml: %v, want exit %d", err, exitUsage)
	}
}

// `probeshim config check` reads a file as the service would: the packaged file is valid, an
// unknown field or a bad value is not, and the message names it.
func TestConfigCheck(t *testing.T) {
	if err := configCommand([]string{"check", "../../../packaging/files/config.yaml"}); err != nil {
		t.Errorf("the packaged config: %v", err)
	}
	dir := t.TempDir()
	for name, doc := range map[string]string{
		`unknown field "bogus"`: "nodeName: n1\nbogus: 1\n",
		"kubeAPIQPS":            "nodeName: n1\nkubeAPIQPS: -1\n",
	} {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		var ex exitCode
		if err := configCommand([]string{"check", f}); !errors.As(err, &ex) || ex.code != 1 || !strings.Contains(ex.err.Error(), name) {
			t.Errorf("%q: %v, want exit 1 naming %s", doc, err, name)
		}
	}
}
