// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// One rig of a name at a time: Start takes an exclusive flock on
// <Dir>.lock and holds it until Stop, so that a second test binary waits
// for the first instead of tearing its running rig down. The kernel drops
// the lock when its holder dies, kill -9 included; a process that exits on
// purpose and leaves its rig running (`rig up`) gives it up too, and the next
// Start then cleans that rig away.
var (
	locksMu sync.Mutex
	locks   = map[string]*os.File{} // held by this process, by path
)

func lockPath(dir string) string { return dir + ".lock" }

func acquireLock(ctx context.Context, dir string, logf func(string, ...any)) error {
	locksMu.Lock()
	defer locksMu.Unlock()
	p := lockPath(dir)
	if _, held := locks[p]; held {
		return nil // this process's earlier rig: Start replaces it
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	waiting := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("lock %s: %w", p, err)
		}
		if !waiting {
			holder, _ := os.ReadFile(p)
			logf("rig: waiting for the rig held by pid %s (lock %s)", strings.TrimSpace(string(holder)), p)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("waiting for lock %s: %w", p, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	locks[p] = f
	return nil
}

func releaseLock(dir string) {
	locksMu.Lock()
	defer locksMu.Unlock()
	p := lockPath(dir)
	if f, ok := locks[p]; ok {
		_ = f.Truncate(0)
		f.Close() // drops the flock
		delete(locks, p)
	}
}
