// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package procrecord names processes by pid and start time, so that a later process can end
// exactly the ones an earlier one started (and never one that merely has the same name or a
// reused pid), and keeps records of what a process started for when it is killed before it
// can clean up.
package procrecord

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one process: its pid and its start time, which together name it even after the pid
// is reused.
type Proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // field 22 of /proc/PID/stat: clock ticks since boot
}

// Self is the calling process.
func Self() Proc {
	pid := os.Getpid()
	name := "pid"
	if len(os.Args) > 0 {
		name = filepath.Base(os.Args[0])
	}
	return Proc{Name: name, PID: pid, Start: StartTime(pid)}
}

// stat returns the fields of /proc/PID/stat after the command name (the first is the state,
// field 3), or nil when the process is gone.
func stat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// The command name is in parentheses and may hold spaces and parentheses: split after the last.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil
	}
	return f
}

// startOf is the start time among stat's fields (field 22 of the file).
func startOf(f []string) uint64 {
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// StartTime returns field 22 of /proc/PID/stat (the start time in clock ticks), or 0 when the
// process is gone.
func StartTime(pid int) uint64 {
	f := stat(pid)
	if f == nil {
		return 0
	}
	return startOf(f)
}

// Alive reports whether p still runs: its pid has its start time and is not a zombie.
func (p Proc) Alive() bool {
	f := stat(p.PID)
	if f == nil || f[0] == "Z" {
		return false
	}
	return p.Start != 0 && startOf(f) == p.Start
}

// Kill sends SIGKILL to p if its pid still has its start time, and waits up to five seconds
// for it to go (or become a zombie, for its parent to reap). It reports whether it sent the
// signal.
func (p Proc) Kill() bool {
	if p.PID <= 1 || p.Start == 0 || StartTime(p.PID) != p.Start {
		return false
	}
	if syscall.Kill(p.PID, syscall.SIGKILL) != nil {
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && p.Alive() {
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Children returns the processes whose parent is pid.
func Children(pid int) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := stat(child)
		if f == nil || f[1] != strconv.Itoa(pid) {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
		out = append(out, Proc{Name: strings.TrimSpace(string(comm)), PID: child, Start: startOf(f)})
	}
	return out
}

// Cmdline returns the arguments p runs with, or nil when p is gone.
func (p Proc) Cmdline() []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
	if err != nil || StartTime(p.PID) != p.Start {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
