// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// blockingDialer never connects; it returns when the context ends.
type blockingDialer struct{}

func (blockingDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// SEMANTICS TCP: connect and close; any dial error is Failure.
func TestTCPProbe(t *testing.T) {
	ln := listen(t)
	d := &redirectDialer{}
	if r, msg := probeTCP(context.Background(), d, ln.Addr().String(), 5*time.Second); r != Success || msg != "" {
		t.Fatalf("open port: %v %q", r, msg)
	}
	if d.lingered.Load() != 1 {
		t.Fatal("SO_LINGER not set to 1s")
	}
	if r, msg := probeTCP(context.Background(), d, closedPort(t), time.Second); r != Failure || !strings.Contains(msg, "refused") {
		t.Fatalf("closed port: %v %q", r, msg)
	}
	start := time.Now()
	if r, msg := probeTCP(context.Background(), blockingDialer{}, "10.0.0.1:80", 50*time.Millisecond); r != Failure || !strings.Contains(msg, "deadline") {
		t.Fatalf("timeout: %v %q", r, msg)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestTCPThroughEngine(t *testing.T) {
	ln := listen(t)
	h := newHarness(t)
	port := ln.Addr().(*net.TCPAddr).Port
	d := desired("p", corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("db")}}})
	d.Ports = map[string]int32{"db": int32(port)}
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	d.Spec.TCPSocket.Host = "8.8.8.8"
	if r, msg, err := runOnce(t, h.m, d); r != Unknown || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "is not the pod") {
		t.Fatalf("foreign host: %v %q %v", r, msg, err)
	}
}

// A Network that refuses a pod (an IP that is not the pod's) makes the probe Unknown with its
// reason: a refusal, which the worker publishes (TestRefusedTargetIsUnknownWithItsReason), not a
// discarded probe error.
func TestRefusedByNetwork(t *testing.T) {
	refuse := NetworkFunc(func(PodRef) (Dialer, error) {
		return nil, fmt.Errorf("%w: IP 10.0.0.9 is not the pod's", ErrRefused)
	})
	h := newHarness(t, WithNetwork(refuse))
	d := desired("p", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}})
	if r, msg, err := runOnce(t, h.m, d); !refusal(r, msg, err, "probe refused: IP 10.0.0.9 is not the pod's") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
}

// A Dialer that refuses an address up front (a port a hostNetwork pod does not declare) makes every
// kind of network probe Unknown with its reason, never Failed by a dial error, and dials nothing.
func TestRefusedByDialer(t *testing.T) {
	d := &checkingDialer{}
	h := newHarness(t, WithNetwork(NetworkFunc(func(PodRef) (Dialer, error) { return d, nil })))
	for _, handler := range []corev1.ProbeHandler{
		{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(10250)}},
		{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(10250)}},
		{GRPC: &corev1.GRPCAction{Port: 10250}},
	} {
		r, msg, err := runOnce(t, h.m, desired("p", corev1.Probe{ProbeHandler: handler}))
		if !refusal(r, msg, err, "probe refused: port 10250 is not declared") {
			t.Errorf("%+v: got %v %q %v", handler, r, msg, err)
		}
	}
	if d.dials.Load() != 0 {
		t.Errorf("%d dials", d.dials.Load())
	}
}

type checkingDialer struct{ dials atomic.Int32 }

func (d *checkingDialer) DialContext(context.Context, string, string) (net.Conn, error) {
	d.dials.Add(1)
	return nil, errors.New("dialled")
}

func (d *checkingDialer) CheckAddress(string) error {
	return fmt.Errorf("%w: port 10250 is not declared", ErrRefused)
}

// refusal reports whether runProbe's outcome is a refusal saying want ("" for any).
func refusal(r Result, msg string, err error, want string) bool {
	return r == Unknown && msg == "" && errors.Is(err, ErrRefused) && (want == "" || err.Error() == want)
}

// A network probe with no dialer for its pod (netns gone) is a probe error.
func TestNoDialerIsProbeError(t *testing.T) {
	h := newHarness(t, WithNetwork(NetworkFunc(func(PodRef) (Dialer, error) { return nil, net.ErrClosed })))
	d := desired("p", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}})
	if _, _, err := runOnce(t, h.m, d); err == nil {
		t.Fatal("no error")
	}
}

// lingerDial sets the kernel option, not only calls the method.
func TestLingerDialSetsSocketOption(t *testing.T) {
	ln := listen(t)
	c, err := lingerDial(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var l *unix.Linger
	var gerr error
	_ = raw.Control(func(fd uintptr) { l, gerr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER) })
	if gerr != nil || l.Onoff != 1 || l.Linger != 1 {
		t.Fatalf("SO_LINGER %+v %v", l, gerr)
	}
}
