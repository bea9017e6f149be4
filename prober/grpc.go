// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Caps on what a gRPC target may send: a health answer is a few bytes, and
// the library defaults (4 MiB messages, 16 MiB of headers) would let one probe
// cost megabytes of the node service's memory.
const (
	maxGRPCMessage = 16 << 10
	maxGRPCHeaders = 32 << 10
	grpcBuffer     = 4 << 10 // the defaults are 32 KiB each way per connection
)

// probeGRPC calls grpc.health.v1.Health/Check on addr through d, over TLS
// when useTLS (grpc.mode TLS, the kubelet's GRPCContainerProbeTLS).
func probeGRPC(ctx context.Context, d Dialer, addr, service string, useTLS bool, timeout time.Duration) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := lingerDial(d)
	// passthrough: the address is already an IP; no resolver may run.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(grpcCredentials(useTLS)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dial(ctx, "tcp", a)
		}),
		grpc.WithUserAgent(UserAgent),
		grpc.WithNoProxy(),
		grpc.WithDisableRetry(),
		grpc.WithDisableServiceConfig(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage), grpc.MaxCallSendMsgSize(maxGRPCMessage)),
		grpc.WithMaxHeaderListSize(maxGRPCHeaders),
		grpc.WithReadBufferSize(grpcBuffer),
		grpc.WithWriteBufferSize(grpcBuffer),
	)
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err)
	}
	defer conn.Close()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
		case codes.DeadlineExceeded:
			if conn.GetState() != connectivity.Ready {
				return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v", addr, timeout)
			}
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
		case codes.Unavailable:
			return Failure, fmt.Sprintf("error: failed to connect service at %q: %s%s", addr, st.Message(), modeHint(st.Message(), useTLS))
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", s.String())
	}
	return Success, ""
}

// grpcCredentials are TLS without verification or plaintext.
func grpcCredentials(useTLS bool) credentials.TransportCredentials {
	if useTLS {
		// Like the kubelet's gRPC TLS probes and HTTPS probes: a probe checks liveness, not identity.
		return credentials.NewTLS(probeTLS)
	}
	return insecure.NewCredentials()
}

// modeHint names the likely cause when the connection failed the way a
// mismatched grpc.mode does: a TLS server closes on a plaintext preface, a
// plaintext server's first bytes are no TLS record.
func modeHint(msg string, useTLS bool) string {
	switch {
	case !useTLS && strings.Contains(msg, "server preface"):
		return " (if the server serves TLS, set grpc.mode: TLS)"
	case useTLS && strings.Contains(msg, "does not look like a TLS handshake"):
		return " (the server does not serve TLS: leave grpc.mode unset or Plaintext)"
	}
	return ""
}
