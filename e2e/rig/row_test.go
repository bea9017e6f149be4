// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A row picks its own lines' builds from the cache, however recently another
// row's were built, and a row name that is not in the matrix is an error.
func TestRowPicksItsOwnBuilds(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("PROBESHIM_CACHE", cache)
	t.Setenv("PROBESHIM_KUBE_BIN", "")
	t.Setenv("PROBESHIM_CONTAINERD_BIN", "")
	mk := func(dir string, bins []string, age time.Duration) string {
		d := filepath.Join(cache, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, b := range bins {
			if err := os.WriteFile(filepath.Join(d, b), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(d, when, when); err != nil {
			t.Fatal(err)
		}
		return d
	}
	k137 := mk("kube/v1.37.2-etcd-v3.7.0", KubeBinaries, time.Hour)
	k135 := mk("kube/v1.35.4-etcd-v3.6.5", KubeBinaries, time.Minute) // built last
	c24 := mk("containerd/v2.4.2", ContainerdBinaries, time.Hour)
	c17 := mk("containerd/v1.7.35", ContainerdBinaries, time.Minute)
	mk("containerd/v2.4.9", ContainerdBinaries[:1], 0) // incomplete: never picked

	for _, tc := range []struct{ env, kube, ctrd string }{
		{"", k137, c24},
		{"k1.37-c2.4", k137, c24},
		{"k1.35-c1.7", k135, c17},
	} {
		t.Setenv("PROBESHIM_ROW", tc.env)
		if got := DefaultKubeBin(); got != tc.kube {
			t.Errorf("PROBESHIM_ROW=%q: kube %s, want %s", tc.env, got, tc.kube)
		}
		if got := DefaultContainerdBin(); got != tc.ctrd {
			t.Errorf("PROBESHIM_ROW=%q: containerd %s, want %s", tc.env, got, tc.ctrd)
		}
	}
	t.Setenv("PROBESHIM_ROW", "k1.36-c2.0")
	if _, err := CurrentRow(); err == nil || !strings.Contains(err.Error(), "k1.37-c2.4") {
		t.Errorf("unknown row: error %v, want one naming the rows", err)
	}
}

// Row 1 gets containerd 2's config format, row 2 1.7's; both name the rig's
// runc and keep a registry config_path.
func TestContainerdConfigPerRow(t *testing.T) {
	for _, tc := range []struct {
		row  Row
		want []string
		not  []string
	}{
		{Rows[0], []string{"version = 3\n", `[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]`,
			`[plugins."io.containerd.cri.v1.images".registry]`, `bin_dirs = ["/usr/lib/cni"]`, "sandbox = "},
			[]string{`plugins."io.containerd.grpc.v1.cri".containerd`, "sandbox_image"}},
		{Rows[1], []string{"version = 2\n", `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
			`[plugins."io.containerd.grpc.v1.cri".registry]`, "sandbox_image = "},
			[]string{"io.containerd.cri.v1"}},
	} {
		r := &Rig{cfg: Config{Row: tc.row, Runc: "/opt/example/runc"}.withDefaults()}
		r.dir = r.cfg.Dir
		r.newNodes()
		cfg := r.nodes[0].containerdConfig()
		if !strings.HasPrefix(cfg, tc.want[0]) {
			t.Errorf("row %s: config starts %q, want %q", tc.row.Name, cfg[:12], tc.want[0])
		}
		for _, w := range append(tc.want[1:], `BinaryName = "/opt/example/runc"`, "config_path = ") {
			if !strings.Contains(cfg, w) {
				t.Errorf("row %s: config lacks %s:\n%s", tc.row.Name, w, cfg)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(cfg, n) {
				t.Errorf("row %s: config has %s, of the other format", tc.row.Name, n)
			}
		}
	}
}
