// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const netnsDir = "/run/netns"

// createNetNS creates the named network namespace with `ip netns add`, brings
// up loopback, an interface of its own (a bridge without ports) holding the nodes' addresses and the pods'
// bridge with the pods' gateway address (the CNI bridge plugin takes the
// bridge over as it is). Nothing in it routes anywhere but to itself: no
// default route (only one for the Services' cluster IPs, which kube-proxy turns into pods'),
// no masquerading.
func createNetNS(ctx context.Context, name string, extraNodeIPs ...string) error {
	steps := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", NodeLink, "type", "bridge"}, // no dummy driver on this kernel; a port-less bridge is one
		{"-n", name, "addr", "add", nodeCIDR, "dev", NodeLink},
		{"-n", name, "link", "set", NodeLink, "up"},
	}
	// Further nodes' addresses on the same link.
	for _, ip := range extraNodeIPs {
		steps = append(steps, []string{"-n", name, "addr", "add", ip + "/24", "dev", NodeLink})
	}
	steps = append(steps, [][]string{
		{"-n", name, "link", "add", Bridge, "type", "bridge"},
		{"-n", name, "addr", "add", podGatewayCIDR, "dev", Bridge},
		{"-n", name, "link", "set", Bridge, "up"},
		// Host processes (the node services) reach Services' cluster IPs as on a real node, where
		// the default route lets a connect pass the routing decision before kube-proxy's OUTPUT
		// rules rewrite it to a pod: here a route for the cluster IPs alone, inside the netns.
		{"-n", name, "route", "add", ServiceCIDR, "dev", NodeLink},
	}...)
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, "ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// deleteNetNS removes the named namespace; a missing one is not an error.
func deleteNetNS(name string) error {
	p := netnsDir + "/" + name
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		// ip fails when the file is there but no longer a mount: remove by hand.
		_ = unix.Unmount(p, unix.MNT_DETACH)
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return fmt.Errorf("ip netns del %s: %w: %s", name, err, out)
		}
	}
	return nil
}

// inNetNS runs fn on an OS thread that has joined the network namespace at
// path. Sockets created by fn stay in that namespace after the thread leaves it.
func inNetNS(path string, fn func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread is stuck in the wrong namespace: keep it locked so
			// that the runtime ends it with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// InNetNS runs fn on an OS thread inside the network namespace at path, e.g.
// to listen there; sockets fn creates stay in that namespace.
func InNetNS(path string, fn func() error) error { return inNetNS(path, fn) }

// FreeLoopbackPort is a TCP port free on the loopback of the network namespace at path at the
// time of the call.
func FreeLoopbackPort(path string) (int, error) {
	var port int
	err := inNetNS(path, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	return port, err
}

// DialNetNS dials addr from inside the network namespace at nsPath.
func DialNetNS(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetNS(nsPath, func() error {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	return conn, err
}

// GetInNetNS fetches url with a connection made inside the network namespace
// at nsPath (e.g. the node's loopback, where the node services listen). A
// status other than 200 is an error; the body comes back either way.
func GetInNetNS(ctx context.Context, nsPath, url string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialNetNS(ctx, nsPath, network, addr)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// forwarder accepts on a loopback port of the host and pipes each connection
// to a target address inside the rig's namespace. It is how clients in the
// test process (client-go, exec and port-forward streams included) reach the
// API server without any route into the namespace.
type forwarder struct {
	ln     net.Listener
	nsPath string
	target string
	wg     sync.WaitGroup
}

func newForwarder(nsPath, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{ln: ln, nsPath: nsPath, target: target}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) Addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.pipe(c)
	}
}

func (f *forwarder) pipe(c net.Conn) {
	defer c.Close()
	up, err := DialNetNS(context.Background(), f.nsPath, "tcp", f.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

func (f *forwarder) Close() {
	_ = f.ln.Close()
	f.wg.Wait()
}
