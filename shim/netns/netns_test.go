// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probeshim/probeshim/prober"
)

// testNS is a network namespace made with `ip netns add` for one test.
type testNS struct {
	name, path string
}

func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("network namespace tests need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("network namespace tests need iproute2's ip")
	}
}

func newTestNS(tb testing.TB) *testNS {
	tb.Helper()
	needRoot(tb)
	b := make([]byte, 4)
	rand.Read(b)
	ns := &testNS{name: "probeshim-test-" + hex.EncodeToString(b)}
	ns.path = "/var/run/netns/" + ns.name
	ipCmd(tb, "netns", "add", ns.name)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.name).Run() })
	ipCmd(tb, "-n", ns.name, "link", "set", "lo", "up")
	return ns
}

func ipCmd(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// listenIn opens a TCP listener inside the namespace at path and serves
// greeting to every connection.
func listenIn(tb testing.TB, path, addr, greeting string) net.Listener {
	tb.Helper()
	l := listenAt(tb, path, addr)
	serve(tb, l, greeting)
	return l
}

// listenAt opens a TCP listener inside the namespace at path, on a thread of
// its own (independent of the code under test).
func listenAt(tb testing.TB, path, addr string) net.Listener {
	tb.Helper()
	type res struct {
		l   net.Listener
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			c <- res{err: err}
			return
		}
		defer self.Close()
		target, err := os.Open(path)
		if err != nil {
			c <- res{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- res{err: err}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			c <- res{err: err} // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		c <- res{l, lerr}
	}()
	r := <-c
	if r.err != nil {
		tb.Fatalf("listen in %s: %v", path, r.err)
	}
	tb.Cleanup(func() { r.l.Close() })
	return r.l
}

func serve(tb testing.TB, l net.Listener, greeting string) {
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if greeting != "" {
				_, _ = c.Write([]byte(greeting + "\n"))
			}
			c.Close()
		}
	}()
}

func readGreeting(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	s, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read greeting: %v", err)
	}
	return s[:len(s)-1]
}

func TestDialReachesOnlyThePodNamespace(t *testing.T) {
	ns := newTestNS(t)

	// The same port on 127.0.0.1 in both namespaces, with different
	// greetings: the answer tells which namespace the dial reached.
	hostL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, hostL, "host")
	addr := hostL.Addr().String()
	listenIn(t, ns.path, addr, "pod")

	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()

	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial in namespace: %v", err)
	}
	if g := readGreeting(t, c); g != "pod" {
		t.Fatalf("in-namespace dial reached %q, want pod", g)
	}
	c.Close()

	c, err = HostDialer().DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("host dial: %v", err)
	}
	if g := readGreeting(t, c); g != "host" {
		t.Fatalf("host dial reached %q, want host", g)
	}
	c.Close()
}

func TestHostCannotReachPodLoopback(t *testing.T) {
	ns := newTestNS(t)
	l := listenIn(t, ns.path, "127.0.0.1:0", "pod")
	addr := l.Addr().String()

	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// The connection is made on a locked thread and then used from this
	// goroutine and another one.
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial in namespace: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		b := make([]byte, 4)
		n, _ := c.Read(b)
		done <- string(b[:n])
	}()
	if g := <-done; g != "pod\n" {
		t.Fatalf("read %q from another goroutine", g)
	}
	c.Close()

	if c, err := HostDialer().DialContext(ctx, "tcp", addr); err == nil {
		c.Close()
		t.Fatalf("host-namespace dial to %s succeeded; it must not reach the pod's loopback", addr)
	}
}

func TestSocketOptionsAndAddressRules(t *testing.T) {
	ns := newTestNS(t)
	l := listenIn(t, ns.path, "127.0.0.1:0", "")
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()

	c, err := d.DialContext(ctx, "tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var lg *unix.Linger
	_ = rc.Control(func(fd uintptr) { lg, err = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER) })
	if err != nil || lg.Onoff != 1 || lg.Linger != 1 {
		t.Fatalf("SO_LINGER = %+v, %v; want on, 1 s", lg, err)
	}
	c.Close()

	for _, tc := range []struct{ network, addr string }{
		{"tcp", "localhost:80"},
		{"tcp", "example.invalid:80"},
		{"tcp", "127.0.0.1:http"},
		{"tcp", "127.0.0.1:0"},
		{"tcp", "127.0.0.1"},
		{"unix", "/run/x.sock"},
		{"ip4:icmp", "127.0.0.1"},
	} {
		for _, dd := range []*Dialer{d, HostDialer()} {
			if c, err := dd.DialContext(ctx, tc.network, tc.addr); !errors.Is(err, ErrInvalidAddress) {
				if c != nil {
					c.Close()
				}
				t.Errorf("dial %s %q (ns %q): err = %v, want ErrInvalidAddress", tc.network, tc.addr, dd.Path(), err)
			}
		}
	}
}

func TestRemovedNamespaceIsNotFound(t *testing.T) {
	ns := newTestNS(t)
	if _, err := NewDialer("/var/run/netns/probeshim-test-does-not-exist"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NewDialer on a missing path: %v, want ErrNotFound", err)
	}
	if _, err := NewDialer("/etc/hostname"); err == nil {
		t.Fatal("NewDialer accepted a regular file")
	}
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	ipCmd(t, "netns", "del", ns.name)
	if _, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dial into a removed namespace: %v, want ErrNotFound", err)
	}
	if !d.Stale() {
		t.Fatal("Dialer not marked stale")
	}

	// Same name again: a new namespace behind the same path.
	ipCmd(t, "netns", "add", ns.name)
	if _, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dial after the path was reused: %v, want ErrNotFound", err)
	}
}

// Every thread the runtime hands out after many concurrent dials (some of
// them cancelled) must be back in the service's own namespace.
func TestThreadsReturnToOwnNamespace(t *testing.T) {
	ns := newTestNS(t)
	l := listenIn(t, ns.path, "127.0.0.1:0", "")
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	own, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			if i%4 == 0 {
				cancel()
			}
			defer cancel()
			if c, err := d.DialContext(ctx, "tcp", l.Addr().String()); err == nil {
				c.Close()
			}
		}()
	}
	wg.Wait()

	// 256 goroutines hold their threads until all have looked, so each looks from its own
	// thread and every one the runtime has is among them.
	var bad atomic.Int32
	var looked sync.WaitGroup
	release := make(chan struct{})
	for range 256 {
		wg.Add(1)
		looked.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if cur, _ := os.Readlink("/proc/thread-self/ns/net"); cur != own {
				bad.Add(1)
			}
			looked.Done()
			<-release
		}()
	}
	looked.Wait()
	close(release)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d threads were left in another network namespace", n)
	}
}

func TestNetworkCachesAndReresolves(t *testing.T) {
	ns := newTestNS(t)
	l := listenIn(t, ns.path, "127.0.0.1:0", "pod")
	var calls atomic.Int32
	hostNet := map[string]bool{"host-pod": true}
	n := NewNetwork(func(_ context.Context, uid string) (string, bool, []string, error) {
		calls.Add(1)
		if hostNet[uid] {
			return "", true, nil, nil
		}
		return ns.path, false, []string{"10.99.0.2"}, nil
	})
	n.hostAddrs = func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil }
	defer n.Close()

	pod := prober.PodRef{UID: "pod-1", IP: "10.99.0.2"}
	for range 10 {
		d, err := n.DialerFor(pod)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.DialContext(context.Background(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("resolver called %d times for one pod, want 1", c)
	}

	// hostNetwork from the PodRef needs no resolution; from the resolver it
	// gives the host dialer.
	if d, err := n.DialerFor(prober.PodRef{UID: "x", IP: "192.0.2.10", HostNetwork: true}); err != nil || d.(podOnly).Path() != "" {
		t.Fatalf("hostNetwork pod got a namespace dialer (%v)", err)
	}
	if d, err := n.DialerFor(prober.PodRef{UID: "host-pod", IP: "192.0.2.10"}); err != nil || d.(podOnly).Path() != "" {
		t.Fatalf("pod resolved as hostNetwork got a namespace dialer (%v)", err)
	}

	// The sandbox is recreated: the first dial errors, the next DialerFor
	// resolves again and reaches the new namespace.
	ipCmd(t, "netns", "del", ns.name)
	ipCmd(t, "netns", "add", ns.name)
	ipCmd(t, "-n", ns.name, "link", "set", "lo", "up")
	l2 := listenIn(t, ns.path, "127.0.0.1:0", "new")
	d, _ := n.DialerFor(pod)
	if _, err := d.DialContext(context.Background(), "tcp", l2.Addr().String()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dial through a stale handle: %v", err)
	}
	before := calls.Load()
	d, err := n.DialerFor(pod)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.DialContext(context.Background(), "tcp", l2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if g := readGreeting(t, c); g != "new" {
		t.Fatalf("reached %q", g)
	}
	c.Close()
	if calls.Load() != before+1 {
		t.Fatal("stale pod was not resolved again")
	}

	n.Forget(pod.UID)
	if _, err := d.DialContext(context.Background(), "tcp", l2.Addr().String()); err == nil {
		t.Fatal("dial through a forgotten pod's dialer succeeded")
	}
}

func TestNetworkResolveError(t *testing.T) {
	want := errors.New("sandbox not found")
	n := NewNetwork(func(context.Context, string) (string, bool, []string, error) { return "", false, nil, want })
	if _, err := n.DialerFor(prober.PodRef{UID: "u", IP: "10.0.0.1"}); !errors.Is(err, want) {
		t.Fatalf("err = %v", err)
	}
}
