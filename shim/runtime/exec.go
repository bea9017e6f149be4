// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/inroot"
)

const (
	// MaxExecOutput caps what is kept of an exec's stdout and of its stderr
	// (the kubelet keeps 10 KiB of a probe's output).
	MaxExecOutput = 10 << 10
	// cleanupTimeout bounds the kill and delete of an exec process, which
	// run even when the caller's context is cancelled.
	cleanupTimeout = 10 * time.Second
	// minDrain is how long output is still read after the process exited,
	// at least (otherwise until the probe's timeout): a background child
	// holding stdout open must not hang a probe.
	minDrain = 100 * time.Millisecond
	// heldDeleteTimeout bounds the delete of an exec whose output a child
	// still holds: containerd 1.7's and 2.x's shims wait up to 10 s before
	// they answer.
	heldDeleteTimeout = 15 * time.Second
)

// shimOpenFailed is in the error of an exec start whose output paths the
// runc shim could not open (containerd 1.7 and 2.x).
const shimOpenFailed = "containerd-shim: opening"

// execTarget is what an exec needs of a container and never changes for a
// container ID: its task and its process spec (user, env, cwd,
// capabilities). Caching it saves two containerd calls per probe.
type execTarget struct {
	task containerd.Task
	proc specs.Process
	// For exec-free reads (see readfile.go): the user's file-system identity, and the start
	// time of the task's process once a read learned it.
	fsCreds   inroot.Creds
	startTime atomic.Uint64
}

var _ prober.Execer = (*Client)(nil)

// Exec runs cmd in the container as a containerd task exec, as CRI's
// ExecSync would: with the container's own process settings, no terminal,
// stdout and stderr captured (each capped at MaxExecOutput; Output is stdout
// then stderr, capped again at MaxExecOutput). After timeout the process
// (and any process it started) is killed with SIGKILL and the error wraps
// prober.ErrExecTimeout. The exec process is always deleted, also when ctx
// is cancelled. Other errors wrap ErrNotFound (no such container or task) or
// ErrUnavailable. timeout <= 0 means only ctx bounds the exec.
func (c *Client) Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (prober.ExecResult, error) {
	if len(cmd) == 0 {
		return prober.ExecResult{}, errors.New("exec: empty command")
	}
	tgt, cached, err := c.execTarget(ctx, containerID)
	if err != nil {
		return prober.ExecResult{}, err
	}
	res, started, err := c.exec(ctx, tgt, containerID, cmd, timeout)
	if err != nil && !started && cached && errors.Is(err, ErrNotFound) {
		// The cached task may be gone (e.g. recreated) and the command did
		// not run: load the task afresh and try once more.
		c.forgetTarget(containerID)
		if tgt, _, err = c.execTarget(ctx, containerID); err != nil {
			return prober.ExecResult{}, err
		}
		res, _, err = c.exec(ctx, tgt, containerID, cmd, timeout)
	}
	return res, err
}

// exec runs one exec; started reports whether the process was started (so
// that a retry would run the command twice).
func (c *Client) exec(ctx context.Context, tgt *execTarget, containerID string, cmd []string, timeout time.Duration) (_ prober.ExecResult, started bool, _ error) {
	pspec := tgt.proc // a copy; the cached spec is never changed
	pspec.Args = cmd
	pspec.Terminal = false
	pspec.ConsoleSize = nil

	stdout, stderr := &cappedBuffer{max: MaxExecOutput}, &cappedBuffer{max: MaxExecOutput}
	var creator cio.Creator
	var pipes *pipeIO
	c.checkPIDNamespace()
	if c.pipes.Load() {
		var err error
		if pipes, err = newPipeIO(stdout, stderr); err != nil {
			return prober.ExecResult{}, false, err
		}
		creator = func(string) (cio.IO, error) { return pipes, nil }
	} else {
		ioOpts := []cio.Opt{cio.WithStreams(nil, stdout, stderr)}
		if c.opts.fifoDir != "" {
			ioOpts = append(ioOpts, cio.WithFIFODir(c.opts.fifoDir))
		}
		creator = cio.NewCreator(ioOpts...)
	}
	execID := newExecID()
	nctx := c.nsCtx(ctx)
	proc, err := tgt.task.Exec(nctx, execID, &pspec, creator)
	if err != nil {
		return prober.ExecResult{}, false, wrapErr(err, "exec in container %s", containerID)
	}

	// Cleanup must happen whatever becomes of ctx, so it runs on a context
	// of its own.
	bg := c.nsCtx(context.WithoutCancel(ctx))
	// outputHeld: the process exited but something it started still holds
	// its output open.
	killed, exited, outputHeld := false, false, false
	del := func(timeout time.Duration) {
		dctx, cancel := context.WithTimeout(bg, timeout)
		defer cancel()
		var err error
		if exited {
			// Known to have exited: delete it without the status query
			// that proc.Delete makes first, one runtime round trip less
			// per probe; then release the output FIFOs as it would.
			_, err = c.ctd.TaskService().DeleteProcess(dctx, &tasks.DeleteProcessRequest{ContainerID: containerID, ExecID: execID})
			if pio := proc.IO(); pio != nil {
				pio.Cancel()
				pio.Wait()
				pio.Close()
			}
		} else {
			var opts []containerd.ProcessDeleteOpts
			if killed {
				opts = append(opts, containerd.WithProcessKill)
			}
			_, err = proc.Delete(dctx, opts...)
		}
		if err != nil && !isNotFound(err) {
			c.log.WithError(err).WithField("container_id", containerID).Warn("delete exec process")
		}
	}
	defer func() {
		if outputHeld {
			// The runtime's shim answers this delete only once the output
			// is closed or after its own wait: 2 s in containerd 1.6, 10 s
			// in 1.7.35 and 2.x. The result is known; the probe does not
			// wait for that, Close does.
			c.deletes.Go(func() { del(heldDeleteTimeout) })
			return
		}
		del(cleanupTimeout)
	}()

	waitCtx, cancelWait := context.WithCancel(bg)
	defer cancelWait()
	// The exit comes from the event stream when one is up (registered
	// before the start, so it cannot be missed), else from a Wait call.
	// Without a timeout a lost event could hang the exec: Wait then.
	var exitc <-chan containerd.ExitStatus
	evc, viaEvents := (<-chan exitEvent)(nil), false
	var ended <-chan struct{}
	if timeout > 0 {
		evc, viaEvents = c.exits.watch(execID)
	}
	if viaEvents {
		defer c.exits.unwatch(execID)
		var release func()
		ended, release = c.exits.watchEnd(containerID)
		defer release()
		exitc = eventExit(waitCtx, proc, evc)
	} else if exitc, err = proc.Wait(waitCtx); err != nil {
		return prober.ExecResult{}, false, wrapErr(err, "wait for exec in container %s", containerID)
	}
	if err := ctx.Err(); err != nil {
		return prober.ExecResult{}, false, fmt.Errorf("exec in container %s: %w", containerID, err)
	}
	// Start is not cancelled with ctx: cut short, the runtime may still
	// start the process after the client gave up and without telling its
	// pid (seen on containerd 1.7 and 2.x). A ctx that ends meanwhile is
	// seen right after, and the process killed.
	sctx, cancelStart := context.WithTimeout(bg, cleanupTimeout)
	err = proc.Start(sctx)
	cancelStart()
	if pipes != nil {
		pipes.started()
		if err != nil && (strings.Contains(err.Error(), shimOpenFailed) || pipes.named(err)) {
			// The shim cannot open our /proc (another PID namespace, a
			// hardened /proc): FIFOs from now on. Its wording varies (1.7
			// stats the path first: "unable to copy pipes: stat
			// /proc/<pid>/fd/<n>: permission denied" when that pid is
			// another process in its namespace), the path it names does not.
			c.pipes.Store(false)
			c.log.WithError(err).Warn("the runtime's shim cannot open exec output pipes; using FIFOs")
		}
	}
	if err != nil {
		// It may have started even so (the answer was lost or late): never
		// run it again, and end it. The client never learned its pid, so
		// WithProcessKill would skip it and the delete would refuse a
		// running process.
		c.killIfStarted(bg, containerID, proc, int(tgt.task.Pid()), exitc)
		if ctx.Err() != nil {
			// The runtime's error then only echoes the cancellation.
			return prober.ExecResult{}, true, fmt.Errorf("start exec in container %s: %w", containerID, ctx.Err())
		}
		return prober.ExecResult{}, true, wrapErr(err, "start exec in container %s", containerID)
	}
	// Like CRI's ExecSync, the timeout counts from the process start.
	start := time.Now()

	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	onExit := func(st containerd.ExitStatus) (prober.ExecResult, bool, error) {
		code, _, err := st.Result()
		if err != nil {
			killed = true
			return prober.ExecResult{}, true, wrapErr(err, "wait for exec in container %s", containerID)
		}
		exited = true
		if killedWithContainer(code, ended) {
			// Killed because its container died, as every process left in a PID namespace
			// is when its init exits: no verdict on the container's health.
			return prober.ExecResult{}, true, fmt.Errorf("exec in container %s: %w", containerID, errDiedWithContainer)
		}
		drainFor := time.Second
		if timeout > 0 {
			drainFor = max(minDrain, timeout-time.Since(start))
		}
		outputHeld = !drain(proc.IO(), drainFor)
		return prober.ExecResult{ExitCode: int(code), Output: joinOutput(stdout, stderr)}, true, nil
	}
	select {
	case st := <-exitc:
		return onExit(st)
	case <-timer:
		if viaEvents {
			// An exit the stream failed to deliver is not a timeout.
			if st, ok := c.stoppedStatus(bg, containerID, execID); ok {
				return onExit(st)
			}
		}
		killed = true
		c.kill(bg, proc, int(proc.Pid()), int(tgt.task.Pid()), exitc)
		proc.IO().Cancel()
		return prober.ExecResult{ExitCode: -1, Output: joinOutput(stdout, stderr)}, true,
			fmt.Errorf("%w: %q in container %s after %s", prober.ErrExecTimeout, strings.Join(cmd, " "), containerID, timeout)
	case <-ctx.Done():
		killed = true
		c.kill(bg, proc, int(proc.Pid()), int(tgt.task.Pid()), exitc)
		proc.IO().Cancel()
		return prober.ExecResult{}, true, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
	}
}

// sigkillExit is the status of a process killed by SIGKILL (128 + 9).
const sigkillExit = 137

// containerEndWait bounds how long an exec killed by SIGKILL waits to learn whether its
// container died too: the shim publishes the container's exit right after its execs' exits,
// within milliseconds. Spent only when a probe's command was SIGKILLed while its container
// lives on (e.g. by the OOM killer), whose failure then stands.
const containerEndWait = 2 * time.Second

// errDiedWithContainer: the exec was killed because its container's process exited.
var errDiedWithContainer = errors.New("killed as its container exited")

// killedWithContainer tells whether an exec that exited with code was killed because its
// container died: SIGKILLed, and ended (nil without an event stream) closes soon after.
func killedWithContainer(code uint32, ended <-chan struct{}) bool {
	return code == sigkillExit && ended != nil && endedWithin(ended, containerEndWait)
}

// endedWithin tells whether ended is closed within d.
func endedWithin(ended <-chan struct{}, d time.Duration) bool {
	select {
	case <-ended:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ended:
		return true
	case <-t.C:
		return false
	}
}

// eventExit turns the exit the event stream delivers into what proc.Wait
// returns; if the stream ends first, it asks the runtime with a Wait call.
func eventExit(ctx context.Context, proc containerd.Process, evc <-chan exitEvent) <-chan containerd.ExitStatus {
	out := make(chan containerd.ExitStatus, 1)
	go func() {
		select {
		case ev := <-evc:
			if !ev.lost {
				out <- *containerd.NewExitStatus(ev.code, time.Time{}, nil)
				return
			}
		case <-ctx.Done():
			return
		}
		wc, err := proc.Wait(ctx)
		if err != nil {
			out <- *containerd.NewExitStatus(containerd.UnknownExitStatus, time.Time{}, err)
			return
		}
		if st, ok := <-wc; ok {
			out <- st
		}
	}()
	return out
}

// stoppedStatus asks the runtime whether an exec has exited, and its status.
func (c *Client) stoppedStatus(ctx context.Context, containerID, execID string) (containerd.ExitStatus, bool) {
	gctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	r, err := c.ctd.TaskService().Get(gctx, &tasks.GetRequest{ContainerID: containerID, ExecID: execID})
	if err != nil || r.GetProcess().GetStatus() != tasktypes.Status_STOPPED {
		return containerd.ExitStatus{}, false
	}
	return *containerd.NewExitStatus(r.GetProcess().GetExitStatus(), time.Time{}, nil), true
}

// kill ends a timed-out or abandoned exec: first every process it started
// (see killDescendants; sibling is its container's first process), then the
// process, and waits a bounded time for its exit.
func (c *Client) kill(ctx context.Context, proc containerd.Process, pid, sibling int, exitc <-chan containerd.ExitStatus) {
	if pid > 0 {
		// Twice: a child forked while the tree was being walked is caught
		// by the second pass.
		for range 2 {
			if _, err := killDescendants(pid, sibling); err != nil {
				c.log.WithError(err).Debug("kill the processes a timed-out exec started")
				break
			}
		}
	}
	kctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	if err := proc.Kill(kctx, syscall.SIGKILL); err != nil && !isNotFound(err) {
		c.log.WithError(err).Debug("kill exec process")
	}
	select {
	case <-exitc:
	case <-kctx.Done():
	}
}

// killIfStarted kills an exec whose start returned an error if the runtime
// says it runs, with what it started; a process that never started is left
// for the delete.
func (c *Client) killIfStarted(ctx context.Context, containerID string, proc containerd.Process, sibling int, exitc <-chan containerd.ExitStatus) {
	gctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	r, err := c.ctd.TaskService().Get(gctx, &tasks.GetRequest{ContainerID: containerID, ExecID: proc.ID()})
	cancel()
	if err != nil || r.GetProcess().GetStatus() != tasktypes.Status_RUNNING && r.GetProcess().GetStatus() != tasktypes.Status_PAUSED {
		return
	}
	c.kill(ctx, proc, int(r.GetProcess().GetPid()), sibling, exitc)
}

// drain waits for the output copy to finish, at most d, then stops it. It
// reports whether the copy finished, i.e. the output was closed.
func drain(pio cio.IO, d time.Duration) bool {
	if pio == nil {
		return true
	}
	done := make(chan struct{})
	go func() {
		pio.Wait()
		close(done)
	}()
	if endedWithin(done, d) {
		return true
	}
	pio.Cancel() // closes the FIFOs, which ends the copy
	return false
}

func (c *Client) execTarget(ctx context.Context, containerID string) (*execTarget, bool, error) {
	c.mu.Lock()
	tgt, ok := c.targets[containerID]
	c.mu.Unlock()
	if ok {
		return tgt, true, nil
	}
	nctx := c.nsCtx(ctx)
	ctr, err := c.ctd.LoadContainer(nctx, containerID)
	if err != nil {
		return nil, false, wrapErr(err, "container %s", containerID)
	}
	info, err := ctr.Info(nctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return nil, false, wrapErr(err, "container %s", containerID)
	}
	var spec oci.Spec
	if info.Spec == nil {
		return nil, false, fmt.Errorf("container %s has no spec", containerID)
	}
	if err := json.Unmarshal(info.Spec.GetValue(), &spec); err != nil || spec.Process == nil {
		return nil, false, fmt.Errorf("container %s: unusable spec: %w", containerID, err)
	}
	task, err := ctr.Task(nctx, nil)
	if err != nil {
		return nil, false, wrapErr(err, "task of container %s", containerID)
	}
	tgt = &execTarget{task: task, proc: *spec.Process, fsCreds: fsCredsOf(&spec)}
	c.mu.Lock()
	c.targets[containerID] = tgt
	c.mu.Unlock()
	return tgt, false, nil
}

// forgetTarget drops a container's cached exec target (the Tracker calls it
// when the container's task exits or the container is deleted).
func (c *Client) forgetTarget(containerID string) {
	c.mu.Lock()
	delete(c.targets, containerID)
	c.mu.Unlock()
}

func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(kindOf(err), ErrNotFound)
}

func newExecID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "probe-" + hex.EncodeToString(b)
}

// cappedBuffer keeps the first max bytes written to it and discards the
// rest while still accepting it: a probe that prints a lot must not block
// on a full pipe.
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

func joinOutput(stdout, stderr *cappedBuffer) []byte {
	out := append(stdout.Bytes(), stderr.Bytes()...)
	if len(out) > MaxExecOutput {
		out = out[:MaxExecOutput]
	}
	return out
}
