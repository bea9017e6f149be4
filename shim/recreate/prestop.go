// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

// userAgent is what the kubelet of the same minor version sends with lifecycle hooks.
const userAgent = "kube-lifecycle/1.37"

// maxHookOutput caps what of a hook's output goes into a message.
const maxHookOutput = 256

// runPreStop runs h, the container's preStop hook from the pod spec (ports are the container's),
// bounded by grace (the kubelet's rule: the hook runs inside the grace period). Network hooks are dialled inside the pod's network namespace
// and reach only the pod. An error says why the hook failed; the container is stopped anyway.
func runPreStop(ctx context.Context, rt Runtime, network prober.Network, pod *corev1.Pod,
	h *v1alpha1.ProbeHandler, ports []corev1.ContainerPort, containerID string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	switch {
	case h.Exec != nil:
		type result struct {
			res prober.ExecResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := rt.Exec(ctx, containerID, h.Exec.Command, grace)
			done <- result{res, err}
		}()
		var res prober.ExecResult
		var err error
		select {
		case r := <-done:
			res, err = r.res, r.err
		case <-ctx.Done():
			// As the kubelet: the grace bounds the hook from when it is started, the exec's setup
			// included, and the stop does not wait for the hook to be killed; the exec's own
			// cleanup finishes in the background (ctx is cancelled on return), and stopping the
			// container ends the hook anyway. Waiting made the stop late by the setup and the kill
			// on a loaded machine.
			err = ctx.Err()
		}
		if errors.Is(err, prober.ErrExecTimeout) || (err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)) {
			return fmt.Errorf("preStop hook did not finish within the grace period (%v)", grace)
		}
		if err != nil {
			return fmt.Errorf("preStop hook: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("preStop hook exited with code %d: %s", res.ExitCode, capOutput(res.Output))
		}
		return nil
	case h.HTTPGet != nil:
		return httpHook(ctx, network, pod, ports, h.HTTPGet)
	case h.TCPSocket != nil:
		d, addr, err := target(network, pod, ports, h.TCPSocket.Host, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("preStop hook: %w", err)
		}
		return conn.Close()
	}
	return nil
}

func httpHook(ctx context.Context, network prober.Network, pod *corev1.Pod, ports []corev1.ContainerPort, a *corev1.HTTPGetAction) error {
	d, addr, err := target(network, pod, ports, a.Host, a.Port)
	if err != nil {
		return err
	}
	code, err := prober.HTTPGet(ctx, d, addr, a, userAgent, 0) // bounded by ctx: the grace
	if err != nil {
		return fmt.Errorf("preStop hook: %w", err)
	}
	if code < 200 || code >= 400 {
		return fmt.Errorf("preStop hook: HTTP GET %s answered %d", a.Path, code)
	}
	return nil
}

// target is where a network hook connects, and the dialer for the pod: only the pod itself,
// whatever the hook says (a request written around admission must not reach other machines).
func target(network prober.Network, pod *corev1.Pod, ports []corev1.ContainerPort,
	host string, port intstr.IntOrString) (prober.Dialer, string, error) {
	ref := prober.PodRef{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name,
		IP: pod.Status.PodIP, HostNetwork: pod.Spec.HostNetwork}
	named := make(map[string]int32, len(ports))
	for _, cp := range ports {
		if cp.Name != "" {
			named[cp.Name] = cp.ContainerPort
		}
	}
	addr, err := prober.Address(ref, host, port, named)
	if err != nil {
		return nil, "", fmt.Errorf("preStop hook: %w", err)
	}
	d, err := network.DialerFor(ref)
	if err != nil {
		return nil, "", fmt.Errorf("preStop hook: network of the pod: %w", err)
	}
	return d, addr, nil
}

func capOutput(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(b)), "\uFFFD")
	if len(s) > maxHookOutput {
		s = s[:maxHookOutput] + "..."
	}
	return s
}
