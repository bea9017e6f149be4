// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package netns dials TCP and UDP connections from inside a pod's network
// namespace, so a probe reaches exactly what the pod reaches (its own
// 127.0.0.1 included) and never a service of the node.
//
// A dial locks an OS thread, enters the namespace with setns(2), creates and
// connects the socket there and returns the thread to the service's own
// namespace. A socket stays in the namespace it was created in, so the
// returned net.Conn can be used from any goroutine afterwards. Addresses must
// be IP literals: nothing is resolved inside a pod's namespace.
//
// Cost (bench_test.go, probe_bench_test.go): entering and leaving costs a few
// microseconds of setns(2); the namespace file stays open per pod, and a
// stat(2) per dial notices a removed or recreated sandbox. Each dial runs on
// a goroutine of its own, so that a thread that fails to return can be
// discarded; that handoff is most of the remaining overhead (measured
// against dialing inline on the caller's thread, which could not discard
// it, and against a pool of locked threads, which costs more).
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotFound means the namespace path no longer names the namespace
	// that was opened (the pod's sandbox is gone or was recreated).
	ErrNotFound = errors.New("network namespace not found")
	// ErrInvalidAddress is returned for a network other than tcp/udp or an
	// address that is not IP:port.
	ErrInvalidAddress = errors.New("invalid probe address")
)

// Dialer dials inside one network namespace, or in the service's own
// namespace when it was made by HostDialer. It is safe for concurrent use.
type Dialer struct {
	ns     *handle // nil: host namespace
	dialer net.Dialer
	stale  atomic.Bool
}

// NewDialer opens the network namespace at path (e.g. /var/run/netns/cni-…
// or a path under containerd's state dir) and keeps it open until Close, so a
// dial costs no open(2) and no path lookup beyond one stat.
func NewDialer(path string) (*Dialer, error) {
	h, err := openHandle(path)
	if err != nil {
		return nil, err
	}
	return newDialer(h), nil
}

// HostDialer dials in the service's own network namespace, for hostNetwork
// pods, with the same address rules and socket options as NewDialer's.
func HostDialer() *Dialer { return newDialer(nil) }

func newDialer(h *handle) *Dialer {
	// SO_LINGER 1 s like the kubelet's probe dialer: a closed probe
	// connection is reset after a second instead of lingering in TIME_WAIT,
	// so frequent probes do not exhaust the pod's ephemeral ports.
	return &Dialer{ns: h, dialer: net.Dialer{Control: setLinger}}
}

// Path is the namespace path, or "" for the host namespace.
func (d *Dialer) Path() string {
	if d.ns == nil {
		return ""
	}
	return d.ns.path
}

// Stale reports whether a dial found that the path no longer names the
// namespace this Dialer holds open; such a Dialer only returns ErrNotFound.
func (d *Dialer) Stale() bool { return d.stale.Load() }

// Close releases the namespace. A closed namespace can be freed by the
// kernel once the pod is gone; dials after Close fail.
func (d *Dialer) Close() error {
	if d.ns == nil {
		return nil
	}
	return d.ns.f.Close()
}

// DialContext connects to address (IP:port) over network (tcp, tcp4, tcp6,
// udp, udp4, udp6) from inside the namespace. It satisfies prober.Dialer.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := checkAddress(network, address); err != nil {
		return nil, err
	}
	if d.ns == nil {
		return d.dialer.DialContext(ctx, network, address)
	}
	if err := d.ns.check(); err != nil {
		if errors.Is(err, ErrNotFound) {
			d.stale.Store(true)
		}
		return nil, err
	}
	return d.ns.dial(ctx, network, address)
}

func checkAddress(network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return fmt.Errorf("%w: network %q", ErrInvalidAddress, network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidAddress, err) //nolint:errorlint // callers branch on the kind; the cause is text
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%w: %q is not an IP address (no name resolution inside a pod's network namespace)", ErrInvalidAddress, host)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%w: port %q", ErrInvalidAddress, port)
	}
	return nil
}

func setLinger(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 1})
	})
	if err != nil {
		return err
	}
	return serr
}

// handle is an open network namespace and the identity (device, inode) it
// had when opened, to notice when its path names another namespace.
type handle struct {
	path     string
	f        *os.File
	dev, ino uint64
}

func openHandle(path string) (*handle, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %v", ErrNotFound, err) //nolint:errorlint // callers branch on the kind; the cause is text
		}
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		f.Close()
		return nil, fmt.Errorf("%s is not a namespace file", path)
	}
	return &handle{path: path, f: f, dev: st.Dev, ino: st.Ino}, nil
}

// check makes sure the path still names the namespace held open: a pod
// whose sandbox was removed must give an error, not a dial into a dead
// namespace that would look like a failing probe.
func (h *handle) check() error {
	var st unix.Stat_t
	if err := unix.Stat(h.path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %s", ErrNotFound, h.path)
		}
		return fmt.Errorf("stat %s: %w", h.path, err)
	}
	if st.Dev != h.dev || st.Ino != h.ino {
		return fmt.Errorf("%w: %s now names another namespace", ErrNotFound, h.path)
	}
	return nil
}

// dial creates the socket on an OS thread inside the namespace and leaves
// the namespace as soon as the socket exists (from the dialer's Control
// hook, which runs between socket(2) and connect(2)): the connect then waits
// in the netpoller like any dial, instead of parking a locked thread, which
// costs a thread handoff per dial. If returning to the service's namespace
// fails, the thread stays locked and its goroutine ends, so Go discards the
// thread instead of reusing it in the wrong namespace.
func (h *handle) dial(ctx context.Context, network, address string) (net.Conn, error) {
	origin, err := originNS()
	if err != nil {
		return nil, err
	}
	type result struct {
		conn net.Conn
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := setns(h.f); err != nil {
			// Still in the origin namespace: the thread can be reused.
			runtime.UnlockOSThread()
			resc <- result{err: fmt.Errorf("enter network namespace %s: %w", h.path, err)}
			return
		}
		inside := true
		var leaveErr error
		leave := func() error {
			if inside {
				inside = false
				if leaveErr = setns(origin); leaveErr == nil {
					runtime.UnlockOSThread()
				}
			}
			return leaveErr
		}
		d := net.Dialer{ControlContext: func(_ context.Context, network, address string, c syscall.RawConn) error {
			lerr := setLinger(network, address, c)
			if err := leave(); err != nil {
				return err
			}
			return lerr
		}}
		conn, err := d.DialContext(ctx, network, address)
		if leave() != nil {
			// Deliberately no UnlockOSThread: the thread dies with us.
			if conn != nil {
				conn.Close()
			}
			resc <- result{err: fmt.Errorf("leave network namespace %s: %w", h.path, leaveErr)}
			return
		}
		resc <- result{conn, err}
	}()
	r := <-resc
	return r.conn, r.err
}

func setns(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Setns(int(fd), unix.CLONE_NEWNET) }); err != nil {
		return err
	}
	return serr
}

// originNS is the namespace threads return to: the one the service's
// threads are in. It is read on a fresh locked thread, never on the
// caller's, which might itself be locked inside another namespace.
var originNS = sync.OnceValues(func() (*os.File, error) {
	type res struct {
		f   *os.File
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f, err := os.Open("/proc/thread-self/ns/net")
		c <- res{f, err}
	}()
	r := <-c
	if r.err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", r.err)
	}
	return r.f, nil
})
