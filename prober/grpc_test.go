// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
)

// grpcServer serves on loopback; health may be nil (no health service).
func grpcServer(t *testing.T, hs healthpb.HealthServer, opts ...grpc.ServerOption) (addr string, agents func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	s := grpc.NewServer(append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, md.Get("user-agent")...)
		mu.Unlock()
		return h(ctx, req)
	}))...)
	if hs != nil {
		healthpb.RegisterHealthServer(s, hs)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// slowHealth answers Check only when the caller gives up.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
}

func (slowHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// SEMANTICS gRPC: Health/Check with the optional service; SERVING = Success;
// NOT_SERVING, Unimplemented, connect or RPC timeout = Failure.
func TestGRPCProbe(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthy, agents := grpcServer(t, hs)
	bare, _ := grpcServer(t, nil)
	slow, _ := grpcServer(t, slowHealth{})

	// Accepts connections but never speaks HTTP/2.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	var heldMu sync.Mutex
	var held []net.Conn
	defer func() {
		mute.Close()
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			held = append(held, c)
			heldMu.Unlock()
		}
	}()

	cases := []struct {
		name, addr, service string
		timeout             time.Duration
		want                Result
		msg                 string
	}{
		{"serving", healthy, "", 5 * time.Second, Success, ""},
		{"not serving", healthy, "down", 5 * time.Second, Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", healthy, "nope", 5 * time.Second, Failure, "error: health rpc probe failed"},
		{"unimplemented", bare, "", 5 * time.Second, Failure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)"},
		{"rpc timeout", slow, "", 500 * time.Millisecond, Failure, "timeout: health rpc did not complete within 500ms"},
		{"connect timeout", mute.Addr().String(), "", 200 * time.Millisecond, Failure, "timeout: failed to connect service"},
		{"refused", closedPort(t), "", 5 * time.Second, Failure, "error: failed to connect service at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &redirectDialer{}
			start := time.Now()
			r, msg := probeGRPC(context.Background(), d, tc.addr, tc.service, false, tc.timeout)
			if r != tc.want || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("got %v %q, want %v %q...", r, msg, tc.want, tc.msg)
			}
			if took := time.Since(start); took > tc.timeout+2*time.Second {
				t.Fatalf("took %v", took)
			}
			if len(d.dialed) == 0 || d.dialed[0] != tc.addr {
				t.Fatalf("dialer saw %v, want %s", d.dialed, tc.addr)
			}
		})
	}
	for _, ua := range agents() {
		if !strings.HasPrefix(ua, "kube-probe/1.37 ") {
			t.Fatalf("user agent %q", ua)
		}
	}
}

// The target is passed to the dialer as given: no name resolution, so a name
// cannot be resolved outside the pod's network namespace.
func TestGRPCNoNameResolution(t *testing.T) {
	hs := health.NewServer()
	addr, _ := grpcServer(t, hs)
	d := &redirectDialer{from: "probe.invalid:1234", to: addr}
	if r, msg := probeGRPC(context.Background(), d, "probe.invalid:1234", "", false, 5*time.Second); r != Success {
		t.Fatalf("got %v %q", r, msg)
	}
	if d.dialed[0] != "probe.invalid:1234" || d.lingered.Load() != 1 {
		t.Fatalf("dialed %v, linger %d", d.dialed, d.lingered.Load())
	}
}

func TestGRPCThroughEngine(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	addr, _ := grpcServer(t, hs)
	port := int32(addr2port(t, addr))
	h := newHarness(t)
	svc := "svc"
	d := desired("p", corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port}}})
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	d.Spec.GRPC.Service = &svc
	if r, msg, _ := runOnce(t, h.m, d); r != Failure || !strings.Contains(msg, "NOT_SERVING") {
		t.Fatalf("service: %v %q", r, msg)
	}
	d.Spec.GRPC.Port = 0
	if r, msg, _ := runOnce(t, h.m, d); r != Failure || !strings.Contains(msg, "invalid port") {
		t.Fatalf("port 0: %v %q", r, msg)
	}
}

func addr2port(t *testing.T, addr string) int {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a.Port
}
