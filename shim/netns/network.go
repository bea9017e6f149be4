// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/prober"
)

// Resolver finds a pod's network namespace: its path, or hostNetwork when
// the pod shares the node's namespace. runtime.Client.PodNetwork is one.
type Resolver func(ctx context.Context, podUID string) (path string, hostNetwork bool, err error)

// Network gives the probe engine a Dialer per pod (it is a prober.Network).
// It keeps each pod's namespace open between probes and asks the Resolver
// again only when a pod is new or its namespace went away, so a probe costs
// no runtime call. Call Forget when a pod is no longer probed.
type Network struct {
	resolve Resolver
	timeout time.Duration
	host    *Dialer

	mu   sync.Mutex
	pods map[string]*Dialer
}

// NewNetwork returns a Network that resolves pods with resolve, each call
// bounded by a 5 s timeout.
func NewNetwork(resolve Resolver) *Network {
	return &Network{resolve: resolve, timeout: 5 * time.Second, host: HostDialer(), pods: map[string]*Dialer{}}
}

var _ prober.Network = (*Network)(nil)

// DialerFor returns the pod's Dialer. hostNetwork pods get the host Dialer;
// the others one that prefers the pod's loopback (see inPod).
func (n *Network) DialerFor(pod prober.PodRef) (prober.Dialer, error) {
	d, err := n.dialer(pod)
	switch {
	case err != nil:
		return nil, err
	case d == n.host:
		return d, nil
	}
	return inPod{Dialer: d, ip: pod.IP}, nil
}

func (n *Network) dialer(pod prober.PodRef) (*Dialer, error) {
	if pod.HostNetwork {
		return n.host, nil
	}
	n.mu.Lock()
	d, ok := n.pods[pod.UID]
	n.mu.Unlock()
	if ok && !d.Stale() {
		return d, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	path, hostNet, err := n.resolve(ctx, pod.UID)
	if err != nil {
		return nil, fmt.Errorf("network namespace of pod %s: %w", pod.UID, err)
	}
	if hostNet {
		d = n.host
	} else {
		if path == "" {
			return nil, fmt.Errorf("%w: pod %s has no network namespace path", ErrNotFound, pod.UID)
		}
		if d, err = NewDialer(path); err != nil {
			return nil, fmt.Errorf("network namespace of pod %s: %w", pod.UID, err)
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if cur, ok := n.pods[pod.UID]; ok && cur != d {
		if cur.Stale() || cur.Path() != d.Path() {
			cur.Close()
		} else {
			// Another probe of this pod resolved it first: keep one handle.
			d.Close()
			return cur, nil
		}
	}
	n.pods[pod.UID] = d
	return d, nil
}

// inPod dials the pod's own IP on the pod's loopback first: inside the pod's
// namespace 127.0.0.1 is the pod itself, so a server bound only to loopback,
// which the kubelet cannot probe, is reachable. A server bound only to the pod
// IP refuses the loopback connection at once and is dialled next. Never used
// for hostNetwork pods, whose loopback is the node's.
type inPod struct {
	*Dialer
	ip string
}

func (d inPod) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil || d.ip == "" || host != d.ip {
		return d.Dialer.DialContext(ctx, network, address)
	}
	loopback := "127.0.0.1"
	if ip := net.ParseIP(d.ip); ip != nil && ip.To4() == nil {
		loopback = "::1"
	}
	conn, err := d.Dialer.DialContext(ctx, network, net.JoinHostPort(loopback, port))
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return conn, err
	}
	return d.Dialer.DialContext(ctx, network, address)
}

// Forget closes the pod's namespace handle, if any.
func (n *Network) Forget(podUID string) {
	n.mu.Lock()
	d, ok := n.pods[podUID]
	delete(n.pods, podUID)
	n.mu.Unlock()
	if ok && d != n.host {
		d.Close()
	}
}

// Close closes every namespace handle.
func (n *Network) Close() error {
	n.mu.Lock()
	pods := n.pods
	n.pods = map[string]*Dialer{}
	n.mu.Unlock()
	var errs []error
	for _, d := range pods {
		if d != n.host {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}
