// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package nspawn boots a throwaway Debian system with a real systemd as PID 1 under
// systemd-nspawn, on a machine whose own PID 1 is not systemd, so that packages and units can be
// tested the way a node runs them.
//
// The base root filesystem is built once with mmdebstrap and cached as a tarball outside the
// repository (see Rootfs). Each container boots with --volatile=overlay on top of one extracted
// copy, so the base stays clean and several containers can run from it at once. Commands run
// inside with nsenter into the container's PID 1 (machinectl and systemd-run -M do not work
// without a systemd on the host). Every container lives in a cgroup of this package's own in each
// hierarchy nspawn uses, which Close empties and removes, also after a failure.
package nspawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describe one container.
type Options struct {
	// Root is the base root filesystem (an extracted Rootfs). It is not modified: writes go to a
	// tmpfs overlay that disappears with the container.
	Root string
	// Name is the machine and host name inside the container.
	Name string
	// Bind and BindRO are host:container path pairs ("/a:/b", or "/a" for the same path).
	Bind, BindRO []string
	// NetNS is a network namespace path to boot the container in (e.g. a test rig's). Empty means
	// a private network namespace of its own (loopback only).
	NetNS string
	// Console receives the container's boot console; nil discards it.
	Console *os.File
	// BootTimeout bounds the wait for systemd to finish booting (default 60 s).
	BootTimeout time.Duration
	// SystemCallFilter adds system calls that nspawn's own filter denies the container, e.g.
	// "bpf", which systemd inside needs for IPAddressDeny=.
	SystemCallFilter []string
}

// Container is one booted system.
type Container struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	leader  int
	cgroups []string
}

// cgroupParent is the folder, in each cgroup hierarchy, that holds this package's containers.
const cgroupParent = "probeshim-nspawn"

// Boot starts a container and waits until its systemd reports the system running (or degraded).
// On error nothing is left behind.
func Boot(ctx context.Context, o Options) (c *Container, err error) {
	if o.Name == "" || strings.ContainsAny(o.Name, "/ ") {
		return nil, fmt.Errorf("nspawn: invalid machine name %q", o.Name)
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 60 * time.Second
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return nil, fmt.Errorf("nspawn: systemd-nspawn not found (Debian package systemd-container): %w", err)
	}
	CleanStale()
	c = &Container{name: o.Name, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = c.Close()
			c = nil
		}
	}()
	if err := c.makeCgroups(); err != nil {
		return c, err
	}

	args := []string{
		"-q", "-b",
		// No machined and no scope unit on the host: there is no systemd on the host to ask.
		"--register=no", "--keep-unit",
		"--volatile=overlay",
		"-D", o.Root, "-M", o.Name,
	}
	if o.NetNS != "" {
		args = append(args, "--network-namespace-path="+o.NetNS)
	} else {
		args = append(args, "--private-network")
	}
	if len(o.SystemCallFilter) > 0 {
		args = append(args, "--system-call-filter="+strings.Join(o.SystemCallFilter, " "))
	}
	for _, b := range o.Bind {
		args = append(args, "--bind="+b)
	}
	for _, b := range o.BindRO {
		args = append(args, "--bind-ro="+b)
	}
	// The shell moves itself into the container's cgroups and then becomes systemd-nspawn, so
	// nspawn and everything it starts is created inside them, never at the host's cgroup root.
	var script strings.Builder
	for _, cg := range c.cgroups {
		fmt.Fprintf(&script, "echo $$ > %s/cgroup.procs || exit 121\n", shellQuote(cg))
	}
	script.WriteString(`exec systemd-nspawn "$@"`)
	c.cmd = exec.Command("/bin/sh", append([]string{"-c", script.String(), "nspawn"}, args...)...)
	c.cmd.Stdin = nil
	if o.Console != nil {
		c.cmd.Stdout, c.cmd.Stderr = o.Console, o.Console
	}
	// Own session: no terminal, and a Ctrl-C at the test reaches the test, which tears down.
	// Pdeathsig: if this process dies without tearing down (a test timeout panics past every
	// cleanup), nspawn gets SIGTERM and powers the container off; CleanStale removes the cgroups.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
	if err := c.cmd.Start(); err != nil {
		return c, fmt.Errorf("nspawn: start: %w", err)
	}
	go func() { c.waitErr = c.cmd.Wait(); close(c.exited) }()

	deadline := time.Now().Add(o.BootTimeout)
	for c.leader == 0 {
		if err := c.failed(); err != nil {
			return c, err
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("nspawn %s: no container init after %s", o.Name, o.BootTimeout)
		}
		c.leader = findInit(c.cmd.Process.Pid)
		if c.leader == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	// systemctl is-system-running --wait returns once boot finished: running, or degraded when a
	// unit failed (a container lacks some of a machine's devices; that is fine here).
	for {
		bctx, cancel := context.WithDeadline(ctx, deadline)
		out, err := c.Run(bctx, "systemctl", "is-system-running", "--wait")
		cancel()
		state := strings.TrimSpace(out)
		if state == "running" || state == "degraded" {
			return c, nil
		}
		if ferr := c.failed(); ferr != nil {
			return c, ferr
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return c, fmt.Errorf("nspawn %s: system did not finish booting (state %q): %w", o.Name, state, err)
		}
		time.Sleep(100 * time.Millisecond) // e.g. systemd not yet answering on its socket
	}
}

// Leader is the host PID of the container's PID 1.
func (c *Container) Leader() int { return c.leader }

// Name is the machine name.
func (c *Container) Name() string { return c.name }

// Path returns the host path of a file inside the container (through /proc/LEADER/root).
func (c *Container) Path(p string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", c.leader), p)
}

// Run runs a command inside the container (all of its namespaces, a clean environment) and returns
// its standard output. A non-zero exit is an *ExitError whose text includes stderr.
func (c *Container) Run(ctx context.Context, argv ...string) (string, error) {
	return c.RunInput(ctx, nil, argv...)
}

// Sh runs a shell command line inside the container.
func (c *Container) Sh(ctx context.Context, script string) (string, error) {
	return c.Run(ctx, "/bin/sh", "-c", script)
}

// RunInput is Run with standard input.
func (c *Container) RunInput(ctx context.Context, stdin []byte, argv ...string) (string, error) {
	if c.leader == 0 {
		return "", errors.New("nspawn: container not running")
	}
	full := append([]string{
		"-t", strconv.Itoa(c.leader), "-a",
		"/usr/bin/env", "-i",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "TERM=dumb",
		"DEBIAN_FRONTEND=noninteractive",
	}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		return stdout.String(), &ExitError{Argv: argv, Err: err, Stdout: stdout.String(), Stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// ExitError is a command inside the container that failed.
type ExitError struct {
	Argv           []string
	Err            error
	Stdout, Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s: %v\n%s%s", strings.Join(e.Argv, " "), e.Err, e.Stdout, e.Stderr)
}

// ExitCode is the command's exit status, or -1.
func (e *ExitError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Close powers the container off (SIGTERM to nspawn makes systemd shut down in order), waits for
// it, kills whatever is left in its cgroups and removes them. Safe to call more than once.
func (c *Container) Close() error {
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(20 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.exited
			}
		}
	}
	c.leader = 0
	var errs []error
	for _, cg := range c.cgroups {
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		}
	}
	c.cgroups = nil
	return errors.Join(errs...)
}

func (c *Container) failed() error {
	select {
	case <-c.exited:
		return fmt.Errorf("nspawn %s exited during boot: %w", c.name, c.waitErr)
	default:
		return nil
	}
}

// findInit returns the container's PID 1 as seen from the host: the child of systemd-nspawn, once
// it runs systemd.
func findInit(nspawnPID int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nspawnPID, nspawnPID))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "systemd" {
			return pid
		}
	}
	return 0
}

// hierarchies returns the cgroup mounts systemd-nspawn places containers in: the unified (v2)
// hierarchy and, on a hybrid or v1 host, the name=systemd one. Controller hierarchies (memory,
// cpu, ...) are left as they are: the container is accounted where this process is.
func hierarchies() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		mnt := f[4]
		switch {
		case g[0] == "cgroup2":
			out = append(out, mnt)
		case g[0] == "cgroup" && strings.Contains(","+g[2]+",", ",name=systemd,"):
			out = append(out, mnt)
		}
	}
	return out
}

func (c *Container) makeCgroups() error {
	hs := hierarchies()
	if len(hs) == 0 {
		return errors.New("nspawn: no cgroup2 or name=systemd hierarchy mounted")
	}
	// The owner's PID in the name lets CleanStale tell a dead run's leftovers from a live one's.
	leaf := fmt.Sprintf("%d-%s", os.Getpid(), c.name)
	for _, h := range hs {
		dir := filepath.Join(h, cgroupParent, leaf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("nspawn: cgroup: %w", err)
		}
		c.cgroups = append(c.cgroups, dir)
	}
	return nil
}

// removeCgroup kills every process left in a cgroup tree and removes it, deepest first.
func removeCgroup(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := procsIn(root)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nspawn: processes %v still in %s", pids, root)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("nspawn: rmdir %s: %w", dirs[i], err))
		}
	}
	// The shared parent goes too when this was its last container.
	_ = syscall.Rmdir(filepath.Dir(root))
	return errors.Join(errs...)
}

func procsIn(root string) []int {
	var pids []int
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// CleanStale removes containers whose owning process has died (a test killed before its cleanup):
// their processes are killed and their cgroups removed. Containers of live processes are left alone.
func CleanStale() {
	for _, h := range hierarchies() {
		entries, _ := os.ReadDir(filepath.Join(h, cgroupParent))
		for _, e := range entries {
			pidStr, _, ok := strings.Cut(e.Name(), "-")
			pid, err := strconv.Atoi(pidStr)
			if !e.IsDir() || !ok || err != nil {
				continue
			}
			if syscall.Kill(pid, 0) == nil || pid == os.Getpid() {
				continue
			}
			_ = removeCgroup(filepath.Join(h, cgroupParent, e.Name()))
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RunNoInit runs one command in a container of o without booting systemd: no init is running
// inside, as in a chroot or an image build. Options.Console receives its output too; the command's
// combined output is returned. Writes go to the overlay and vanish with it.
func RunNoInit(ctx context.Context, o Options, argv ...string) (string, error) {
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return "", fmt.Errorf("nspawn: systemd-nspawn not found (Debian package systemd-container): %w", err)
	}
	CleanStale()
	c := &Container{name: o.Name, exited: make(chan struct{})}
	defer c.Close()
	if err := c.makeCgroups(); err != nil {
		return "", err
	}
	args := []string{"-q", "--register=no", "--keep-unit", "--volatile=overlay", "--private-network",
		"-D", o.Root, "-M", o.Name}
	for _, b := range o.BindRO {
		args = append(args, "--bind-ro="+b)
	}
	args = append(args, "--setenv=PATH=/usr/sbin:/usr/bin:/sbin:/bin", "--")
	args = append(args, argv...)
	var script strings.Builder
	for _, cg := range c.cgroups {
		fmt.Fprintf(&script, "echo $$ > %s/cgroup.procs || exit 121\n", shellQuote(cg))
	}
	script.WriteString(`exec systemd-nspawn "$@"`)
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script.String(), "nspawn"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.CombinedOutput()
	close(c.exited)
	return string(out), err
}
