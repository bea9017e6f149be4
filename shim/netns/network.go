// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probeshim/probeshim/prober"
)

// Resolver finds a pod's network namespace and IPs as the runtime reports
// them (CRI PodSandboxStatus), or hostNetwork when the pod shares the node's
// namespace. runtime.Client.PodNetwork is one.
type Resolver func(ctx context.Context, podUID string) (path string, hostNetwork bool, ips []string, err error)

// Network gives the probe engine a Dialer per pod (it is a prober.Network).
// It keeps each pod's namespace open between probes and asks the Resolver
// again only when a pod is new, its namespace went away or the IP asked for
// is not one it knows, so a probe costs no runtime call. Call Forget when a
// pod is no longer probed.
//
// The Dialer it returns reaches the pod and nothing else: the pod IP, which
// must be the pod's own as the runtime reports it (for a hostNetwork pod, an
// address of this node), and the pod's loopback inside its own namespace.
// Anything else is refused with an error wrapping prober.ErrRefused, before
// anything is dialled.
type Network struct {
	resolve   Resolver
	timeout   time.Duration
	host      *Dialer
	hostAddrs func() ([]netip.Addr, error)

	ports atomic.Pointer[PortCheck]

	mu     sync.Mutex
	pods   map[string]*podNet
	node   []netip.Addr // this node's addresses, read at nodeAt
	nodeAt time.Time
}

// podNet is what is known of one pod's network.
type podNet struct {
	d          *Dialer // n.host for a hostNetwork pod
	ips        []netip.Addr
	resolvedAt time.Time
}

const (
	// reresolveAfter bounds how often an IP the cache does not know makes the
	// Network ask the runtime again (a recreated sandbox with a new IP).
	reresolveAfter = 2 * time.Second
	// nodeAddrsTTL is how long this node's addresses are reused.
	nodeAddrsTTL = 10 * time.Second
)

// NewNetwork returns a Network that resolves pods with resolve, each call
// bounded by a 5 s timeout.
func NewNetwork(resolve Resolver) *Network {
	return &Network{resolve: resolve, timeout: 5 * time.Second, host: HostDialer(), hostAddrs: interfaceAddrs, pods: map[string]*podNet{}}
}

var _ prober.Network = (*Network)(nil)

// PortCheck tells whether the pod of podUID declares port as a TCP containerPort; known is false
// when the pod is not known (yet).
type PortCheck func(podUID string, port int32) (declared, known bool)

// SetPortCheck sets how a pod's declared ports are looked up, for the probes of hostNetwork pods
// that may go only to those (prober.PodRef.DeclaredPortsOnly). Until it is set, such probes are
// refused.
func (n *Network) SetPortCheck(check PortCheck) { n.ports.Store(&check) }

// DialerFor returns a Dialer that reaches only the pod: pod.IP and its
// loopback, dialled inside the pod's network namespace. A hostNetwork pod's
// namespace is the node's: its IP must be an address of this node, and its
// loopback is the node's, which its own processes reach too (admission decides
// who may name it). An empty pod IP, or one that is not the pod's, is refused.
func (n *Network) DialerFor(pod prober.PodRef) (prober.Dialer, error) {
	if pod.IP == "" {
		return nil, fmt.Errorf("%w: the pod's IP is not known", prober.ErrRefused)
	}
	ip, err := netip.ParseAddr(pod.IP)
	if err != nil {
		return nil, fmt.Errorf("%w: pod IP %q is not an IP address", prober.ErrRefused, pod.IP)
	}
	ip = ip.Unmap()
	pn, err := n.podNet(pod, ip)
	if err != nil {
		return nil, err
	}
	if pn.d == n.host {
		if !slices.Contains(n.nodeAddrs(), ip) {
			return nil, fmt.Errorf("%w: IP %s of hostNetwork pod %s/%s is not an address of this node", prober.ErrRefused, ip, pod.Namespace, pod.Name)
		}
		d := podOnly{Dialer: n.host, ip: ip}
		if pod.DeclaredPortsOnly {
			d.port = n.declaredPort(pod)
		}
		return d, nil
	}
	if !slices.Contains(pn.ips, ip) {
		return nil, fmt.Errorf("%w: IP %s is not pod %s/%s's own; the runtime reports %v", prober.ErrRefused, ip, pod.Namespace, pod.Name, pn.ips)
	}
	return podOnly{Dialer: pn.d, ip: ip}, nil
}

// podNet returns what is known of the pod's network, resolving it when the
// pod is new, its namespace went away, or ip is not among its IPs (at most
// every reresolveAfter).
func (n *Network) podNet(pod prober.PodRef, ip netip.Addr) (*podNet, error) {
	if pod.HostNetwork {
		return &podNet{d: n.host}, nil
	}
	n.mu.Lock()
	pn, ok := n.pods[pod.UID]
	n.mu.Unlock()
	if ok && !pn.d.Stale() && (pn.d == n.host || slices.Contains(pn.ips, ip) || time.Since(pn.resolvedAt) < reresolveAfter) {
		return pn, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	path, hostNet, ips, err := n.resolve(ctx, pod.UID)
	if err != nil {
		return nil, fmt.Errorf("network namespace of pod %s: %w", pod.UID, err)
	}
	pn = &podNet{d: n.host, resolvedAt: time.Now()}
	if !hostNet {
		if path == "" {
			return nil, fmt.Errorf("%w: pod %s has no network namespace path", ErrNotFound, pod.UID)
		}
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil {
				pn.ips = append(pn.ips, a.Unmap())
			}
		}
		if pn.d, err = NewDialer(path); err != nil {
			return nil, fmt.Errorf("network namespace of pod %s: %w", pod.UID, err)
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if cur, ok := n.pods[pod.UID]; ok && cur.d != n.host && cur.d != pn.d {
		if !cur.d.Stale() && pn.d != n.host && cur.d.Path() == pn.d.Path() {
			// The same namespace (another probe resolved it too, or only the IPs were asked
			// again): keep one handle, which probes of the pod may be dialling through now.
			pn.d.Close()
			pn.d = cur.d
		} else {
			cur.d.Close()
		}
	}
	n.pods[pod.UID] = pn
	return pn, nil
}

// nodeAddrs returns this node's addresses (the service's own namespace), a
// hostNetwork pod's IP being one of them.
func (n *Network) nodeAddrs() []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.node == nil || time.Since(n.nodeAt) > nodeAddrsTTL {
		if addrs, err := n.hostAddrs(); err == nil {
			n.node, n.nodeAt = addrs, time.Now()
		}
	}
	return n.node
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// declaredPort is the port check of a hostNetwork pod's Dialer: a port of the node that the pod
// does not claim (the kubelet's, another service's) is never dialled for it, whatever its
// NodePodProbe entry says.
func (n *Network) declaredPort(pod prober.PodRef) func(port int32) error {
	check := n.ports.Load()
	return func(port int32) error {
		if check == nil {
			return fmt.Errorf("%w: the ports hostNetwork pod %s/%s declares are not known yet", prober.ErrRefused, pod.Namespace, pod.Name)
		}
		declared, known := (*check)(pod.UID, port)
		switch {
		case !known:
			return fmt.Errorf("%w: hostNetwork pod %s/%s is not known to this node yet", prober.ErrRefused, pod.Namespace, pod.Name)
		case !declared:
			return fmt.Errorf("%w: pod %s/%s uses the host network and declares no TCP containerPort %d: "+
				"a probe of it goes only to a port the pod declares", prober.ErrRefused, pod.Namespace, pod.Name, port)
		}
		return nil
	}
}

// podOnly dials the pod's IP and its loopback (for a hostNetwork pod, the
// node's: the namespace the pod runs in), and, when port is set, only the
// ports it allows. Anything else is refused: the engine never asks for it,
// and a Dialer must not be a way to reach what the pod is not.
type podOnly struct {
	*Dialer
	ip   netip.Addr
	port func(int32) error
}

var _ prober.AddressChecker = podOnly{}

func (d podOnly) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := d.CheckAddress(address); err != nil {
		return nil, err
	}
	return d.Dialer.DialContext(ctx, network, address)
}

// CheckAddress refuses what DialContext refuses, before anything is dialled.
func (d podOnly) CheckAddress(address string) error {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidAddress, err) //nolint:errorlint // callers branch on the kind; the cause is text
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is not the pod's IP %s or its loopback", prober.ErrRefused, address, d.ip)
	}
	if a = a.Unmap(); a != d.ip && !a.IsLoopback() {
		return fmt.Errorf("%w: %s is not the pod's IP %s or its loopback", prober.ErrRefused, address, d.ip)
	}
	if d.port == nil {
		return nil
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("%w: port %q", ErrInvalidAddress, portText)
	}
	return d.port(int32(port))
}

// Forget closes the pod's namespace handle, if any.
func (n *Network) Forget(podUID string) {
	n.mu.Lock()
	pn, ok := n.pods[podUID]
	delete(n.pods, podUID)
	n.mu.Unlock()
	if ok && pn.d != n.host {
		pn.d.Close()
	}
}

// Close closes every namespace handle.
func (n *Network) Close() error {
	n.mu.Lock()
	pods := n.pods
	n.pods = map[string]*podNet{}
	n.mu.Unlock()
	var errs []error
	for _, pn := range pods {
		if pn.d != n.host {
			errs = append(errs, pn.d.Close())
		}
	}
	return errors.Join(errs...)
}
