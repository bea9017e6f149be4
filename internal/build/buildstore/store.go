// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package buildstore lets the test processes of one run share the binaries they build. An e2e
// row brings up many rigs, and each built the same test images, node service and cluster binary
// again: links that Go's build cache does not keep, 170 of them and a ninth of the row's CPU.
// With a store (hack/e2elanes makes one per run) the first process to need a build makes it and
// every later one, in any lane, takes hard links to it.
//
// A store belongs to one run of one checkout: it never looks at the sources again, so it must
// not outlive the run that made it.
package buildstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Env names the store's folder. Unset, Build builds every time.
const Env = "PROBESHIM_BUILD_STORE"

// done marks a complete build in its folder.
const done = ".complete"

// Build makes dst (a folder, made if missing) hold the files build writes into the folder it is
// given. key names the build: everything its output depends on but the sources (the command,
// the packages, the flags, the environment it sets). With a store the build runs once per key;
// other callers, in this process or another, wait for it and get hard links to its files.
func Build(ctx context.Context, key []string, dst string, build func(dir string) error) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	store := os.Getenv(Env)
	if store == "" {
		return build(dst)
	}
	sum := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	name := filepath.Join(store, hex.EncodeToString(sum[:12]))
	unlock, err := lock(ctx, name+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(name, done)); errors.Is(err, os.ErrNotExist) {
		// A failed or interrupted build leaves a partial folder behind: start afresh.
		if err := os.RemoveAll(name); err != nil {
			return err
		}
		if err := os.MkdirAll(name, 0o755); err != nil {
			return err
		}
		if err := build(name); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(name, done), []byte(strings.Join(key, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return linkFiles(name, dst)
}

// lock takes an exclusive flock on path, giving up when ctx ends.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	locked := make(chan error, 1)
	go func() { locked <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-locked:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		return func() { f.Close() }, nil // closing releases the lock
	case <-ctx.Done():
		// Closing the file does not end a blocked flock: leave it to release on its own.
		go func() {
			if <-locked == nil {
				f.Close()
			}
		}()
		return nil, fmt.Errorf("waiting for the build store's %s: %w", filepath.Base(path), ctx.Err())
	}
}

// linkFiles puts a hard link (a copy across file systems) in dst of every file of src but the
// completion mark.
func linkFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == done || !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := os.Remove(to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Link(from, to); err == nil {
			continue
		} else if !errors.Is(err, syscall.EXDEV) {
			return err
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
