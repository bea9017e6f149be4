// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/pkg/cio"
)

// pipeIO is an exec's output through two anonymous pipes instead of a FIFO
// directory: the runc shim opens the paths it is given with open(2) when the
// process starts (containerd's fifo package, which takes any path that stats
// as a FIFO), and /proc/<our pid>/fd/<write end> is such a path. That saves
// the mkdir, two mkfifo, the asynchronous FIFO opens and the unlinks and
// rmdir of cio's FIFO set: about half the client's CPU per exec (profile in
// CHANGELOG). It needs the shim to see our /proc, i.e. probeshim and
// containerd in one PID namespace; Client falls back to FIFOs otherwise.
type pipeIO struct {
	cfg  cio.Config
	r, w [2]*os.File // stdout, stderr: our read ends and the write ends the shim reopens
	wg   sync.WaitGroup
	mu   sync.Mutex
}

var _ cio.IO = (*pipeIO)(nil)

// newPipeIO makes the pipes and starts copying them into stdout and stderr.
func newPipeIO(stdout, stderr io.Writer) (_ *pipeIO, err error) {
	p := &pipeIO{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	for i := range 2 {
		if p.r[i], p.w[i], err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("exec output pipe: %w", err)
		}
	}
	pid := os.Getpid()
	p.cfg = cio.Config{
		Stdout: fmt.Sprintf("/proc/%d/fd/%d", pid, p.w[0].Fd()),
		Stderr: fmt.Sprintf("/proc/%d/fd/%d", pid, p.w[1].Fd()),
	}
	for i, dst := range []io.Writer{stdout, stderr} {
		p.wg.Add(1)
		go func(r *os.File) {
			defer p.wg.Done()
			// Errors are the reader closed by Cancel: what was read is kept.
			_, _ = io.Copy(dst, r)
		}(p.r[i])
	}
	return p, nil
}

func (p *pipeIO) Config() cio.Config { return p.cfg }

// named reports whether err names a path of our /proc/<pid>/fd/, where the pipes are: the shim
// could not use them.
func (p *pipeIO) named(err error) bool {
	return strings.Contains(err.Error(), path.Dir(p.cfg.Stdout)+"/")
}

// started drops our write ends once the shim holds its own (it opens them
// synchronously in the start call), so that the reads end when the process
// and whatever it started close their output.
func (p *pipeIO) started() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.w {
		if w != nil {
			w.Close()
			p.w[i] = nil
		}
	}
}

// Cancel stops the copy: the reads return at once.
func (p *pipeIO) Cancel() {
	p.started()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.r {
		if r != nil {
			r.Close()
			p.r[i] = nil
		}
	}
}

// Wait waits for both copies to end.
func (p *pipeIO) Wait() { p.wg.Wait() }

// Close releases the pipes.
func (p *pipeIO) Close() error {
	p.Cancel()
	return nil
}
