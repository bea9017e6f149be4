// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package buildstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// writer is a build that writes one file and counts its runs.
func writer(runs *atomic.Int32, name, content string) func(string) error {
	return func(dir string) error {
		runs.Add(1)
		return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildOncePerKey(t *testing.T) {
	t.Setenv(Env, t.TempDir())
	ctx := context.Background()
	var runs atomic.Int32
	var wg sync.WaitGroup
	dsts := make([]string, 8)
	errs := make([]error, len(dsts))
	for i := range dsts {
		dsts[i] = filepath.Join(t.TempDir(), "bin")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Build(ctx, []string{"go", "build", "./a"}, dsts[i], writer(&runs, "a", "one"))
		}()
	}
	wg.Wait()
	for i, dst := range dsts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got := read(t, filepath.Join(dst, "a")); got != "one" {
			t.Errorf("%s: %q", dst, got)
		}
		if _, err := os.Stat(filepath.Join(dst, done)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the completion mark was linked too (%v)", dst, err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d builds for one key by %d callers, want 1", n, len(dsts))
	}
	other := t.TempDir()
	if err := Build(ctx, []string{"go", "build", "./b"}, other, writer(&runs, "a", "two")); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 2 || read(t, filepath.Join(other, "a")) != "two" || read(t, filepath.Join(dsts[0], "a")) != "one" {
		t.Errorf("another key did not build anew apart from the first (%d builds)", runs.Load())
	}
}

// A failed build leaves nothing a later caller takes: it builds again.
func TestBuildAfterAFailure(t *testing.T) {
	t.Setenv(Env, t.TempDir())
	ctx := context.Background()
	key := []string{"k"}
	broken := errors.New("compile error")
	err := Build(ctx, key, t.TempDir(), func(dir string) error {
		_ = os.WriteFile(filepath.Join(dir, "half"), nil, 0o644)
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("error %v, want the build's", err)
	}
	var runs atomic.Int32
	dst := t.TempDir()
	if err := Build(ctx, key, dst, writer(&runs, "whole", "ok")); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || read(t, filepath.Join(dst, "whole")) != "ok" {
		t.Errorf("not built again after the failure (%d builds)", runs.Load())
	}
	if _, err := os.Stat(filepath.Join(dst, "half")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed build's file reached a caller (%v)", err)
	}
}

// Without a store every call builds, straight into its folder.
func TestBuildWithoutAStore(t *testing.T) {
	t.Setenv(Env, "")
	var runs atomic.Int32
	dst := filepath.Join(t.TempDir(), "new")
	for range 2 {
		if err := Build(context.Background(), []string{"k"}, dst, writer(&runs, "a", "x")); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 2 || read(t, filepath.Join(dst, "a")) != "x" {
		t.Errorf("%d builds, want 2", runs.Load())
	}
}
