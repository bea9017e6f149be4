// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/prober"
)

// containers is what a node service keeps current from runtime events.
type containers map[[2]string]prober.ContainerStatus

func (c containers) Container(podUID, name string) (prober.ContainerStatus, bool) {
	st, ok := c[[2]string{podUID, name}]
	return st, ok
}

func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // stands in for the pod
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	src := containers{{"uid-1", "app"}: {ID: "c1", Running: true, StartedAt: time.Now()}}
	m, err := prober.NewManager(src,
		// prober.WithExecer(containerdExecer),
		prober.WithNetwork(prober.NetworkFunc(func(pod prober.PodRef) (prober.Dialer, error) {
			return &net.Dialer{}, nil // a node service dials inside pod's netns here
		})),
		prober.WithRegisterer(prometheus.NewRegistry()),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = m.Run(ctx) }()

	// The first Sync after start spreads its probes over their period (a
	// restarted service does not probe everything at once); probes added by
	// later Syncs run at once, which this example wants.
	m.Sync(nil)
	m.Sync([]prober.Desired{{
		Key:       prober.Key{PodUID: "uid-1", Container: "app", Probe: "ready"},
		Pod:       prober.PodRef{UID: "uid-1", Namespace: "default", Name: "web-0", IP: "127.0.0.1"},
		Spec:      corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}},
		ProbeType: "custom",
	}})
	for u := range m.Updates() {
		if u.Result != prober.Unknown {
			fmt.Println(u.Key.Probe, u.Result)
			break
		}
	}
	// Output: ready Success
}
