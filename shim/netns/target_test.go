// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/probeshim/probeshim/prober"
)

// A pod namespace with IP 10.99.0.2 and two servers: one bound to its loopback only, one to its
// IP. The pod IP reaches only the second (no loopback first), loopback only the first, and
// anything that is not the pod is refused before a dial.
func TestNetworkTargets(t *testing.T) {
	ns := newTestNS(t)
	ipCmd(t, "-n", ns.name, "addr", "add", "10.99.0.2/32", "dev", "lo")
	onLoopback := listenIn(t, ns.path, "127.0.0.1:0", "loopback")
	_, lport, _ := net.SplitHostPort(onLoopback.Addr().String())
	onIP := listenIn(t, ns.path, "10.99.0.2:0", "pod-ip")
	_, iport, _ := net.SplitHostPort(onIP.Addr().String())

	var resolved atomic.Int32
	n := NewNetwork(func(_ context.Context, uid string) (string, bool, []string, error) {
		resolved.Add(1)
		if strings.HasPrefix(uid, "host-") {
			return "", true, nil, nil
		}
		return ns.path, false, []string{"10.99.0.2"}, nil
	})
	n.hostAddrs = func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil }
	defer n.Close()
	pod := prober.PodRef{UID: "pod-1", Namespace: "ns", Name: "web", IP: "10.99.0.2"}

	d, err := n.DialerFor(pod)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr string) (string, error) {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return readGreeting(t, c), nil
	}
	// The pod IP: a server bound to loopback only is NOT reached through it.
	if _, err := dial(net.JoinHostPort("10.99.0.2", lport)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("pod IP, port of the loopback-only server: %v, want connection refused", err)
	}
	if g, err := dial(net.JoinHostPort("10.99.0.2", iport)); err != nil || g != "pod-ip" {
		t.Errorf("pod IP: %q %v", g, err)
	}
	// Loopback named: the pod's own, inside its namespace.
	if g, err := dial(net.JoinHostPort("127.0.0.1", lport)); err != nil || g != "loopback" {
		t.Errorf("loopback: %q %v", g, err)
	}
	// Anything else: refused without a dial.
	for _, addr := range []string{"10.99.0.3:80", "192.0.2.10:10250", "169.254.169.254:80"} {
		if _, err := dial(addr); !errors.Is(err, prober.ErrRefused) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}

	for _, tc := range []struct {
		name string
		pod  prober.PodRef
		want string
	}{
		{"empty IP", prober.PodRef{UID: "pod-1"}, "the pod's IP is not known"},
		{"the node's IP", prober.PodRef{UID: "pod-1", Namespace: "ns", Name: "web", IP: "192.0.2.10"},
			"IP 192.0.2.10 is not pod ns/web's own; the runtime reports [10.99.0.2]"},
		{"another pod's IP", prober.PodRef{UID: "pod-1", Namespace: "ns", Name: "web", IP: "10.99.0.3"}, "is not pod ns/web's own"},
		{"not an IP", prober.PodRef{UID: "pod-1", IP: "web.ns"}, `pod IP "web.ns" is not an IP address`},
		{"hostNetwork pod with another machine's IP", prober.PodRef{UID: "host-pod", Namespace: "ns", Name: "h", IP: "10.1.1.1"},
			"IP 10.1.1.1 of hostNetwork pod ns/h is not an address of this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.DialerFor(tc.pod)
			if !errors.Is(err, prober.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DialerFor: %v, want refused: %s", err, tc.want)
			}
		})
	}

	// A hostNetwork pod at this node's address: its IP, and its loopback, which is the node's
	// (the namespace this test runs in), dialled there; any other address is refused.
	hd, err := n.DialerFor(prober.PodRef{UID: "host-pod", IP: "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	nodeLoopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, nodeLoopback, "node-loopback")
	if c, err := hd.DialContext(context.Background(), "tcp", nodeLoopback.Addr().String()); err != nil {
		t.Errorf("hostNetwork pod, loopback: %v, want the node's loopback", err)
	} else {
		if g := readGreeting(t, c); g != "node-loopback" {
			t.Errorf("hostNetwork pod, loopback reached %q", g)
		}
		c.Close()
	}
	if _, err := hd.DialContext(context.Background(), "tcp", "192.0.2.11:10250"); !errors.Is(err, prober.ErrRefused) {
		t.Errorf("hostNetwork pod, another address: %v, want refused", err)
	}

	// A marker's probe of a hostNetwork pod goes only to a port the pod declares: the node's
	// other ports (the kubelet's 10250) are refused before a dial, whatever the entry says.
	_, declaredPort, _ := net.SplitHostPort(nodeLoopback.Addr().String())
	marker := prober.PodRef{UID: "host-pod", Namespace: "ns", Name: "h", IP: "192.0.2.10", DeclaredPortsOnly: true}
	md, err := n.DialerFor(marker)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := md.DialContext(context.Background(), "tcp", nodeLoopback.Addr().String()); !errors.Is(err, prober.ErrRefused) ||
		!strings.Contains(err.Error(), "declared ports") && !strings.Contains(err.Error(), "not known yet") {
		t.Errorf("before the ports are known: %v, want refused", err)
	}
	n.SetPortCheck(func(uid string, port int32) (bool, bool) {
		return strconv.Itoa(int(port)) == declaredPort, uid == "host-pod"
	})
	if md, err = n.DialerFor(marker); err != nil {
		t.Fatal(err)
	}
	if c, err := md.DialContext(context.Background(), "tcp", nodeLoopback.Addr().String()); err != nil {
		t.Errorf("hostNetwork pod, declared port on loopback: %v", err)
	} else {
		c.Close()
	}
	for _, addr := range []string{"127.0.0.1:10250", "192.0.2.10:10250"} {
		_, err := md.DialContext(context.Background(), "tcp", addr)
		if want := "pod ns/h uses the host network and declares no TCP containerPort 10250"; !errors.Is(err, prober.ErrRefused) ||
			!strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused: %s", addr, err, want)
		}
	}
	stranger := marker
	stranger.UID = "host-unknown"
	if sd, err := n.DialerFor(stranger); err != nil {
		t.Fatal(err)
	} else if _, err := sd.DialContext(context.Background(), "tcp", nodeLoopback.Addr().String()); !errors.Is(err, prober.ErrRefused) ||
		!strings.Contains(err.Error(), "not known to this node") {
		t.Errorf("a pod the node does not know: %v, want refused", err)
	}
	// The pod's own liveness probes are not bound to its declared ports, as the kubelet's are not.
	if c, err := hd.DialContext(context.Background(), "tcp", nodeLoopback.Addr().String()); err != nil {
		t.Errorf("liveness probe of a hostNetwork pod: %v", err)
	} else {
		c.Close()
	}
	// An unknown IP asks the runtime again, but at most every reresolveAfter.
	before := resolved.Load()
	for range 5 {
		_, _ = n.DialerFor(prober.PodRef{UID: "pod-1", IP: "10.99.0.9"})
	}
	if got := resolved.Load() - before; got > 1 {
		t.Errorf("resolved %d times for a forged IP, want at most 1", got)
	}
}

// A pod whose namespace is gone is a probe error the engine tells by its kind, whether the
// runtime says so or the path it gave no longer exists; a refusal is the engine's kind too.
func TestGoneNamespaceReason(t *testing.T) {
	gone := fmt.Errorf("%w: sandbox of pod pod-2: not found", prober.ErrNamespaceGone) // as runtime.PodNetwork says it
	n := NewNetwork(func(_ context.Context, uid string) (string, bool, []string, error) {
		if uid == "pod-2" {
			return "", false, nil, gone
		}
		return "/var/run/netns/probeshim-test-does-not-exist", false, []string{"10.99.0.2"}, nil
	})
	defer n.Close()
	for _, uid := range []string{"pod-1", "pod-2"} {
		_, err := n.DialerFor(prober.PodRef{UID: uid, Namespace: "ns", Name: "web", IP: "10.99.0.2"})
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, prober.ErrNamespaceGone) {
			t.Errorf("%s: %v, want ErrNotFound and prober.ErrNamespaceGone", uid, err)
		}
		if r := prober.ErrorReason(err); r != prober.ReasonNetworkNamespaceGone {
			t.Errorf("%s: %v: reason %s, want %s", uid, err, r, prober.ReasonNetworkNamespaceGone)
		}
	}
	_, err := n.DialerFor(prober.PodRef{UID: "pod-3", Namespace: "ns", Name: "web"})
	if r := prober.ErrorReason(err); r != prober.ReasonTargetRefused {
		t.Errorf("no pod IP: %v: reason %s, want %s", err, r, prober.ReasonTargetRefused)
	}
}
