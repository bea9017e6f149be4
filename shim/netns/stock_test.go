// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// nsIno is the inode of the namespace file at path, which identifies the
// namespace.
func nsIno(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// socketNS asks the kernel which network namespace a connection's socket
// belongs to (SIOCGSKNS) and returns that namespace's inode.
func socketNS(c syscall.Conn) (uint64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var nsfd int
	var ierr error
	if err := rc.Control(func(fd uintptr) { nsfd, ierr = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS) }); err != nil {
		return 0, err
	}
	if ierr != nil {
		return 0, fmt.Errorf("SIOCGSKNS: %w", ierr)
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Sockets from the stock belong to the pod's namespace, for every kind of
// socket and across refills made by concurrent dials.
func TestStockedSocketsLiveInThePodNamespace(t *testing.T) {
	ns := newTestNS(t)
	l := listenIn(t, ns.path, "127.0.0.1:0", "pod")
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := nsIno(t, ns.path)
	if host := nsIno(t, "/proc/self/ns/net"); host == want {
		t.Fatal("the test namespace is the host's")
	}

	ctx := context.Background()
	type dial struct{ network, addr string }
	dials := []dial{{"udp4", "127.0.0.1:9"}, {"udp", "127.0.0.1:9"}}
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		dials = append(dials, dial{"udp6", "[::1]:9"})
	} else {
		t.Log("no IPv6 in this kernel: udp6 not checked")
	}
	for _, dl := range dials {
		c, err := d.DialContext(ctx, dl.network, dl.addr)
		if err != nil {
			t.Fatalf("dial %s %s: %v", dl.network, dl.addr, err)
		}
		if got, err := socketNS(c.(syscall.Conn)); err != nil || got != want {
			t.Errorf("%s socket in namespace %d (%v), want the pod's %d", dl.network, got, err, want)
		}
		c.Close()
	}

	// More dials than a batch, concurrently: every one connects a socket of
	// the pod's namespace and reaches the pod's listener.
	var wg sync.WaitGroup
	errc := make(chan error, 5*stockBatch)
	for range 5 * stockBatch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", l.Addr().String())
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			got, err := socketNS(c.(syscall.Conn))
			switch {
			case err != nil:
				errc <- err
			case got != want:
				errc <- fmt.Errorf("TCP socket in namespace %d, want the pod's %d", got, want)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// openSockets counts this process's open socket files.
func openSockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && len(l) > 7 && l[:7] == "socket:" {
			n++
		}
	}
	return n
}

// A stocked socket holds the pod's namespace alive: Close and a namespace
// found gone must close the stock.
func TestStockIsClosedWithTheDialer(t *testing.T) {
	ns := newTestNS(t)
	base := openSockets(t)
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := openSockets(t) - base; got != stockBatch-1 {
		t.Fatalf("%d sockets stocked after one dial, want %d", got, stockBatch-1)
	}
	d.Close()
	if got := openSockets(t) - base; got != 0 {
		t.Fatalf("%d sockets left open after Close", got)
	}
	if _, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9"); err == nil {
		t.Fatal("dial after Close succeeded")
	}
	if got := openSockets(t) - base; got != 0 {
		t.Fatalf("a dial after Close stocked %d sockets", got)
	}

	d, err = NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if c, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9"); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	ipCmd(t, "netns", "del", ns.name)
	if _, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dial into a removed namespace: %v, want ErrNotFound", err)
	}
	if got := openSockets(t) - base; got != 0 {
		t.Fatalf("%d sockets of a removed namespace left open", got)
	}
}

// threadsIn lists the threads of this process whose network namespace is
// the one with inode ino, but the main thread: when the goroutine that could
// not leave ran on it, the Go runtime wedges that thread for good rather than
// ending it (a process cannot end its main thread), which is as safe (it is
// never reused) but leaves it in the namespace.
func threadsIn(t *testing.T, ino uint64) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/task", task.Name(), "ns/net"), &st) == nil && st.Ino == ino {
			in = append(in, task.Name())
		}
	}
	return in
}

// A thread that cannot return to the service's namespace is never reused:
// the dial fails and the thread exits instead of going back to the runtime
// still inside the pod's namespace.
func TestThreadThatCannotLeaveIsDiscarded(t *testing.T) {
	ns := newTestNS(t)
	d, err := NewDialer(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	podIno := nsIno(t, ns.path)

	leaveNS = func(*os.File) error { return errors.New("injected: setns refused") }
	defer func() { leaveNS = setns }()
	if c, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9"); err == nil {
		c.Close()
		t.Fatal("dial succeeded although leaving the namespace failed")
	}
	leaveNS = setns

	// The thread exits when its goroutine ends; until then it is locked and
	// unusable by anything else.
	poll.Eventually(t, 10*time.Second, func() error {
		if in := threadsIn(t, podIno); len(in) != 0 {
			return fmt.Errorf("threads %v are still in the pod's namespace", in)
		}
		return nil
	})

	// The Dialer works again once leaving does.
	c, err := d.DialContext(context.Background(), "udp4", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if in := threadsIn(t, podIno); len(in) != 0 {
		t.Fatalf("threads %v in the pod's namespace after a good dial", in)
	}
}
