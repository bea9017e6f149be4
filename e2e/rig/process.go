// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

// process is one long-running component the rig started.
type process struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Start   uint64 `json:"start"` // start time in clock ticks since boot, guards against PID reuse
	Log     string `json:"log"`
	cmd     *exec.Cmd
	argv    []string
	exited  chan struct{}
	waitErr error
}

// startProcess starts argv inside the rig's network namespace with its output
// in logs/<name>.log, moves it into the rig's daemon cgroup and records it in
// the state file before returning.
func (r *Rig) startProcess(name string, argv ...string) (*process, error) {
	logPath := filepath.Join(r.dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	full := append([]string{"--net=" + r.netnsPath, "--"}, argv...)
	cmd := exec.Command("nsenter", full...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = r.dir
	// Own process group: a Ctrl-C in the terminal reaches the test, which then
	// tears down in order, not every component at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{Name: name, PID: cmd.Process.Pid, Log: logPath, cmd: cmd, argv: argv, exited: make(chan struct{})}
	p.Start = ProcStartTime(p.PID)
	if err := r.cgroups.add(daemonCgroup, p.PID); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	r.procs = append(r.procs, p)
	r.state.Processes = append(r.state.Processes, p)
	if err := r.saveState(); err != nil {
		return nil, err
	}
	return p, nil
}

// failed reports an error if the process has exited already.
func (p *process) failed() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %w", p.Name, p.waitErr)
	default:
		return nil
	}
}

// describe is the error text for a component that did not come up: the cause,
// and the end of its log.
func (p *process) describe(err error) error {
	b, _ := os.ReadFile(p.Log)
	return fmt.Errorf("%s: %w\n--- last lines of %s ---\n%s", p.Name, err, p.Log, logtail.Last(string(b), 30))
}

// ProcStartTime returns field 22 of /proc/PID/stat (the start time in clock ticks), or 0 when
// the process is gone; with the pid it names one process even after the pid is reused.
func ProcStartTime(pid int) uint64 { return procrecord.StartTime(pid) }

// killRecorded sends SIGKILL to a recorded process if it is still the same
// process (same start time), and waits briefly for it to go away.
func killRecorded(pid int, start uint64) { procrecord.Proc{PID: pid, Start: start}.Kill() }

// stopGracefully sends SIGTERM and waits up to grace before SIGKILL.
func (p *process) stopGracefully(grace time.Duration) {
	if p.cmd == nil {
		killRecorded(p.PID, p.Start)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
