// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package files_test checks the files the packages install against the service that reads them.
package files_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/criproxy"
)

// TestDefaultConfig loads the packaged /etc/probeshim/config.yaml with the service's own loader, as
// shipped (all commented out) and with every setting uncommented, so a renamed or removed setting
// cannot ship in a default the service would refuse at start.
func TestDefaultConfig(t *testing.T) {
	b, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Settings are "#name:" lines, nested ones "#  name:" (two spaces or more; prose has one).
	uncommented := regexp.MustCompile(`(?m)^#( {2,}[a-zA-Z][a-zA-Z0-9]*:|[a-zA-Z][a-zA-Z0-9]*:)`).ReplaceAll(b, []byte("$1"))
	if string(uncommented) == string(b) {
		t.Fatal("config.yaml shows no settings (#name: value lines)")
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{"as shipped": b, "uncommented": uncommented} {
		p := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := config.LoadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Complete(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestManPageFlags checks that the man page documents every flag of the service, and no flag that
// no longer exists.
func TestManPageFlags(t *testing.T) {
	page, err := os.ReadFile("probeshim.8")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("probeshim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// Load registers the flags before it parses; the result does not matter here.
	_, _ = config.Load(fs, []string{"-config", filepath.Join(t.TempDir(), "none.yaml")})
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		known[f.Name] = true
		if !strings.Contains(string(page), `\-`+strings.ReplaceAll(f.Name, "-", `\-`)+" ") {
			t.Errorf("probeshim.8 does not document -%s", f.Name)
		}
	})
	for _, m := range regexp.MustCompile(`(?m)^\.BI \\-([a-z\\-]+) `).FindAllSubmatch(page, -1) {
		if name := strings.ReplaceAll(string(m[1]), `\-`, "-"); !known[name] {
			t.Errorf("probeshim.8 documents -%s, which the service does not have", name)
		}
	}
}

// TestCRISocketUnit checks the packaged socket unit against the service that is handed its socket:
// the path is the service's default, the name is the one the service looks for, and the ordering
// and mode are what docs/install/node.md promises.
func TestCRISocketUnit(t *testing.T) {
	b, err := os.ReadFile("../../systemd/probeshim-cri.socket")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ListenStream=" + config.DefaultCRIProxySocket,
		"FileDescriptorName=" + criproxy.ActivatedName,
		"SocketMode=0660",
		"Service=probeshim.service",
		"After=containerd.service",
		"Before=kubelet.service",
		// Default dependencies would order the socket before sockets.target, which containerd is
		// ordered after: with After=containerd.service, a cycle.
		"DefaultDependencies=no",
		"WantedBy=sockets.target",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(unit) {
			t.Errorf("probeshim-cri.socket lacks %q", want)
		}
	}
	svc, err := os.ReadFile("../../systemd/probeshim.service")
	if err != nil {
		t.Fatal(err)
	}
	// The socket lives in the service's runtime directory, which must outlive the service.
	if !regexp.MustCompile(`(?m)^RuntimeDirectoryPreserve=yes$`).Match(svc) {
		t.Error("probeshim.service must keep /run/probeshim when it stops (RuntimeDirectoryPreserve=yes)")
	}
}
