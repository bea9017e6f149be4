// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// UserAgent is sent by HTTP and gRPC probes, as the kubelet of the same
	// minor version would send it.
	UserAgent = "kube-probe/1.37"

	// MaxOutput caps exec output and the HTTP body read, like the kubelet.
	MaxOutput = 10 << 10
	// MaxMessage caps Update.Message, the text kept in status.
	MaxMessage = 1024
)

// timeout is how long a run of cfg may take: its spec's, within the engine's cap.
func (m *Manager) timeout(cfg *probeConfig) time.Duration {
	if m.maxTimeout > 0 {
		return min(cfg.timeout(), m.maxTimeout)
	}
	return cfg.timeout()
}

// runProbe runs cfg's handler once. An error means the probe could not be
// run at all; its result is discarded. One wrapping ErrRefused is a target
// not dialled: nothing is known of the pod's health.
func (m *Manager) runProbe(ctx context.Context, cfg *probeConfig, containerID string) (Result, string, error) {
	timeout := m.timeout(cfg)
	h := &cfg.spec.ProbeHandler
	if n := countHandlers(h); n != 1 {
		// A spec error is the user's to fix: say so in status rather than
		// stay Unknown forever.
		return Failure, fmt.Sprintf("probe must have exactly one handler (exec, httpGet, tcpSocket or grpc), has %d", n), nil
	}
	if h.Exec != nil {
		if cfg.readFile != "" && m.files != nil {
			return m.probeFile(ctx, containerID, cfg.readFile, h.Exec.Command, timeout)
		}
		return m.probeExec(ctx, containerID, h.Exec.Command, timeout)
	}

	var addr string
	var err error
	switch {
	case h.HTTPGet != nil:
		addr, err = Address(cfg.pod, h.HTTPGet.Host, h.HTTPGet.Port, cfg.ports)
	case h.TCPSocket != nil:
		addr, err = Address(cfg.pod, h.TCPSocket.Host, h.TCPSocket.Port, cfg.ports)
	case h.GRPC != nil:
		addr, err = Address(cfg.pod, "", intstr.FromInt32(h.GRPC.Port), nil)
	}
	if errors.Is(err, ErrRefused) {
		return Unknown, "", err
	}
	if err != nil {
		return Failure, err.Error(), nil
	}
	d, err := m.network.DialerFor(cfg.pod)
	if errors.Is(err, ErrRefused) {
		return Unknown, "", err
	}
	if err != nil {
		return Unknown, "", fmt.Errorf("no dialer for pod: %w", err)
	}
	if c, ok := d.(AddressChecker); ok {
		if err := c.CheckAddress(addr); errors.Is(err, ErrRefused) {
			return Unknown, "", err
		}
	}
	if h.HTTPGet != nil {
		return probeHTTP(ctx, d, addr, h.HTTPGet, timeout)
	}
	switch {
	case h.TCPSocket != nil:
		r, msg := probeTCP(ctx, d, addr, timeout)
		return r, msg, nil
	default:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		useTLS := h.GRPC.Mode != nil && *h.GRPC.Mode == corev1.GRPCProbeModeTLS
		r, msg := probeGRPC(ctx, d, addr, service, useTLS, timeout)
		return r, msg, nil
	}
}

func countHandlers(h *corev1.ProbeHandler) int {
	n := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			n++
		}
	}
	return n
}

// Address is where a network handler of pod connects: host:port of the pod
// itself. host, the spec's host field, may only name the pod; a named port is
// looked up in ports. The node service's preStop hooks use it too.
func Address(pod PodRef, host string, port intstr.IntOrString, ports map[string]int32) (string, error) {
	p, err := resolvePort(port, ports)
	if err != nil {
		return "", err
	}
	h, err := probeHost(pod, host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(h, strconv.Itoa(p)), nil
}

// probeHost returns where a network probe connects, the kubelet's way: the pod IP. Only a host
// field that names loopback (127.0.0.1, ::1, localhost) makes it the pod's own loopback, which
// the Network dials inside the pod's network namespace. A hostNetwork pod's network namespace is
// the node's, so its loopback is the node's: what the pod's own processes, and whoever may
// port-forward to it, reach already (admission decides who may name it). Any other host, or a pod
// without an IP, is refused here too, not only by admission, so a NodePodProbe written directly
// cannot point probes elsewhere.
func probeHost(pod PodRef, host string) (string, error) {
	if loopback, ok := loopbackOf(host); ok {
		return loopback, nil
	}
	if pod.IP == "" {
		return "", fmt.Errorf("%w: the pod's IP is not known; a network probe goes only to the pod's own address", ErrRefused)
	}
	if host == "" || host == pod.IP {
		return pod.IP, nil
	}
	return "", fmt.Errorf("%w: probe host %q is not the pod", ErrRefused, host)
}

// loopbackOf returns the loopback address host names, if it names one.
func loopbackOf(host string) (string, bool) {
	if strings.EqualFold(host, "localhost") {
		return "127.0.0.1", true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" || !addr.Unmap().IsLoopback() {
		return "", false
	}
	return addr.Unmap().String(), true
}

func resolvePort(p intstr.IntOrString, named map[string]int32) (int, error) {
	if p.Type == intstr.String {
		n, ok := named[p.StrVal]
		if !ok {
			return 0, fmt.Errorf("port %q not found in the container's ports", p.StrVal)
		}
		return checkPort(int(n))
	}
	return checkPort(int(p.IntVal))
}

func checkPort(p int) (int, error) {
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", p)
	}
	return p, nil
}

// capMessage cuts s to MaxMessage bytes on a rune boundary and makes it
// valid UTF-8, since it ends up in a JSON status.
func capMessage(s string) string {
	if len(s) > MaxMessage {
		i := MaxMessage
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if len(s) > MaxMessage {
			return capMessage(s)
		}
	}
	return s
}

// lingerDial dials with d and sets SO_LINGER to 1 s on TCP connections, as
// the kubelet's probe dialer does, so closed probe sockets do not linger.
func lingerDial(d Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if l, ok := c.(interface{ SetLinger(int) error }); ok {
			_ = l.SetLinger(1)
		}
		return c, nil
	}
}
