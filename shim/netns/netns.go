// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package netns dials TCP and UDP connections from inside a pod's network
// namespace, so a probe reaches exactly what the pod reaches (its own
// 127.0.0.1 included) and never a service of the node.
//
// A socket stays in the namespace it was created in, whichever thread
// connects it. So a Dialer keeps a small stock of sockets made inside the
// pod's namespace: a goroutine locks an OS thread, enters with setns(2),
// creates a batch of sockets and returns the thread to the service's own
// namespace. A dial takes one and connects it on the caller's goroutine
// through the netpoller, like any dial. A thread that cannot return is never
// reused: its goroutine ends still locked, and Go discards the thread.
// Addresses must be IP literals: nothing is resolved inside a pod's namespace.
//
// Cost (bench_test.go, probe_bench_test.go): per dial, a stat(2) that
// notices a removed or recreated sandbox and a dup3(2) that puts the stocked
// socket in place of the dialer's own; the thread handoff and the two
// setns(2) are paid once per batch of stockBatch sockets. The namespace
// file stays open per pod. Measured against dialing inline on the caller's
// thread (which could not discard a thread that fails to return), a new
// goroutine per dial and a pool of locked threads.
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

	"github.com/probeshim/probeshim/prober"
)

var (
	// ErrNotFound means the namespace path no longer names the namespace
	// that was opened (the pod's sandbox is gone or was recreated). It is the
	// engine's prober.ErrNamespaceGone, so that the engine tells a probe error
	// of a gone namespace by its kind.
	ErrNotFound = prober.ErrNamespaceGone
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
	d.ns.drain(true)
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
			d.ns.drain(false)
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

// stockBatch is how many sockets one entry into a namespace makes: the
// thread handoff and two setns(2) that entering costs are paid once per
// batch (BenchmarkDial measures sizes). A stocked socket is an open file
// that holds its namespace, so the batch stays small.
const stockBatch = 8

// handle is an open network namespace and the identity (device, inode) it
// had when opened, to notice when its path names another namespace.
type handle struct {
	path     string
	f        *os.File
	dev, ino uint64
	dialer   net.Dialer // its Control hook is swap
	batch    int        // sockets made per entry into the namespace

	mu     sync.Mutex
	closed bool
	stock  map[sockKind][]int // sockets made in the namespace, not yet used
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
	h := &handle{path: path, f: f, dev: st.Dev, ino: st.Ino, batch: stockBatch}
	h.dialer.ControlContext = h.swap
	return h, nil
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

// dial connects a socket made inside the namespace. The net.Dialer creates
// its socket in the service's namespace as usual; its Control hook, which
// runs between socket(2) and connect(2) and before the socket joins the
// netpoller, puts a socket from the namespace's stock in its place with
// dup3(2). The connect then runs on the caller's goroutine and waits in the
// netpoller like any dial: no setns and no thread handoff per dial.
func (h *handle) dial(ctx context.Context, network, address string) (net.Conn, error) {
	return h.dialer.DialContext(ctx, network, address)
}

// swap is the dialer's Control hook: it replaces the dialer's own socket
// (fd of c) with one from the namespace.
func (h *handle) swap(_ context.Context, network, _ string, c syscall.RawConn) error {
	s, err := h.take(network)
	if err != nil {
		return err
	}
	var derr error
	cerr := c.Control(func(fd uintptr) { derr = unix.Dup3(s, int(fd), unix.O_CLOEXEC) })
	unix.Close(s)
	if cerr != nil {
		return cerr
	}
	if derr != nil {
		return fmt.Errorf("dup3 socket of network namespace %s: %w", h.path, derr)
	}
	return nil
}

// sockKind is a socket family and type, keyed by the network the dialer's
// Control hook names ("tcp4", "tcp6", "udp4", "udp6").
type sockKind struct{ family, sotype int }

func kindOf(network string) (sockKind, error) {
	switch network {
	case "tcp4":
		return sockKind{unix.AF_INET, unix.SOCK_STREAM}, nil
	case "tcp6":
		return sockKind{unix.AF_INET6, unix.SOCK_STREAM}, nil
	case "udp4":
		return sockKind{unix.AF_INET, unix.SOCK_DGRAM}, nil
	case "udp6":
		return sockKind{unix.AF_INET6, unix.SOCK_DGRAM}, nil
	}
	return sockKind{}, fmt.Errorf("%w: network %q", ErrInvalidAddress, network)
}

// take returns a socket of the namespace, making a batch when none is left.
// The caller owns (and closes) it.
func (h *handle) take(network string) (int, error) {
	k, err := kindOf(network)
	if err != nil {
		return -1, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return -1, fmt.Errorf("network namespace %s: dialer closed", h.path)
	}
	if st := h.stock[k]; len(st) > 0 {
		s := st[len(st)-1]
		h.stock[k] = st[:len(st)-1]
		h.mu.Unlock()
		return s, nil
	}
	h.mu.Unlock()

	batch, err := h.create(k, h.batch)
	if err != nil {
		return -1, err
	}
	s, rest := batch[0], batch[1:]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		closeAll(batch)
		return -1, fmt.Errorf("network namespace %s: dialer closed", h.path)
	}
	if h.stock == nil {
		h.stock = map[sockKind][]int{}
	}
	h.stock[k] = append(h.stock[k], rest...)
	if extra := len(h.stock[k]) - h.batch; extra > 0 {
		// Concurrent refills: keep one batch, not one per dialer that raced.
		closeAll(h.stock[k][:extra])
		h.stock[k] = append(h.stock[k][:0], h.stock[k][extra:]...)
	}
	return s, nil
}

// drain closes the stock: the namespace is gone or the Dialer closed. A
// stocked socket holds its namespace alive, so none may outlive the Dialer.
func (h *handle) drain(closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = h.closed || closed
	for k, st := range h.stock {
		closeAll(st)
		delete(h.stock, k)
	}
}

func closeAll(fds []int) {
	for _, s := range fds {
		unix.Close(s)
	}
}

// create makes n sockets of kind k inside the namespace, on a goroutine of
// its own that locks its OS thread, enters with setns(2), creates them and
// returns. If returning to the service's namespace fails, the thread stays
// locked and its goroutine ends, so Go discards the thread instead of
// reusing it in the wrong namespace.
func (h *handle) create(k sockKind, n int) ([]int, error) {
	origin, err := originNS()
	if err != nil {
		return nil, err
	}
	type result struct {
		fds []int
		err error
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
		fds := make([]int, 0, n)
		var serr error
		for range n {
			s, err := newSocket(k)
			if err != nil {
				serr = err
				break
			}
			fds = append(fds, s)
		}
		if err := leaveNS(origin); err != nil {
			// Deliberately no UnlockOSThread: the thread dies with us.
			closeAll(fds)
			resc <- result{err: fmt.Errorf("leave network namespace %s: %w", h.path, err)}
			return
		}
		runtime.UnlockOSThread()
		if len(fds) == 0 {
			resc <- result{err: fmt.Errorf("socket in network namespace %s: %w", h.path, serr)}
			return
		}
		resc <- result{fds: fds}
	}()
	r := <-resc
	return r.fds, r.err
}

// newSocket makes a socket as the net package's dialer makes its own (non-
// blocking, close-on-exec, dual-stack for IPv6, broadcast for UDP), with the
// probe dialer's SO_LINGER.
func newSocket(k sockKind) (int, error) {
	s, err := unix.Socket(k.family, k.sotype|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if k.family == unix.AF_INET6 {
		err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	if err == nil && k.sotype == unix.SOCK_DGRAM {
		err = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
	}
	if err == nil {
		err = unix.SetsockoptLinger(s, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 1})
	}
	if err != nil {
		unix.Close(s)
		return -1, err
	}
	return s, nil
}

// leaveNS returns the thread to the service's namespace; tests replace it to
// make leaving fail.
var leaveNS = setns

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
