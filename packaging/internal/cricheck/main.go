// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command cricheck is a test fixture of the package tests for CRI proxy mode: a stand-in for
// containerd's CRI and a client that calls through the proxy's socket as the kubelet would (one
// connection, no wait-for-ready, a deadline per call). It is not shipped.
//
//	cricheck serve PATH           answer RuntimeService.Version on a Unix socket (containerd's place)
//	cricheck call PATH            one Version call; prints the runtime's name
//	cricheck loop PATH DURATION   a Version call every 50 ms for DURATION; says when the first one
//	                              was answered, prints how many failed and exits 1 if any did
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeName is what the stand-in answers, so that a reply through the proxy is known to be its.
const runtimeName = "cricheck-fake-containerd"

// callTimeout is the kubelet's default runtime request timeout.
const callTimeout = 2 * time.Minute

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: cricheck serve PATH | call PATH | loop PATH DURATION")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2])
	case "call":
		err = call(os.Args[2])
	case "loop":
		if len(os.Args) != 4 {
			os.Exit(2)
		}
		var d time.Duration
		if d, err = time.ParseDuration(os.Args[3]); err == nil {
			err = loop(os.Args[2], d)
		}
	default:
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cricheck:", err)
		os.Exit(1)
	}
}

type fake struct {
	criapi.UnimplementedRuntimeServiceServer
}

func (fake) Version(context.Context, *criapi.VersionRequest) (*criapi.VersionResponse, error) {
	return &criapi.VersionResponse{Version: "0.1.0", RuntimeName: runtimeName, RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func serve(path string) error {
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	criapi.RegisterRuntimeServiceServer(s, fake{})
	return s.Serve(l)
}

func dial(path string) (criapi.RuntimeServiceClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return criapi.NewRuntimeServiceClient(conn), func() { conn.Close() }, nil
}

func call(path string) error {
	c, done, err := dial(path)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, err := c.Version(ctx, &criapi.VersionRequest{})
	if err != nil {
		return err
	}
	fmt.Println(v.GetRuntimeName())
	return nil
}

func loop(path string, d time.Duration) error {
	c, done, err := dial(path)
	if err != nil {
		return err
	}
	defer done()
	var calls, failures int
	var first error
	var slowest time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		start := time.Now()
		v, err := c.Version(ctx, &criapi.VersionRequest{})
		cancel()
		slowest = max(slowest, time.Since(start))
		calls++
		if err == nil && v.GetRuntimeName() != runtimeName {
			err = fmt.Errorf("answered by %q", v.GetRuntimeName())
		}
		if err != nil {
			failures++
			if first == nil {
				first = err
			}
		} else if calls-failures == 1 {
			fmt.Println("first call answered") // the package test restarts the service after this
		}
	}
	fmt.Printf("calls=%d failures=%d slowest=%s\n", calls, failures, slowest.Round(time.Millisecond))
	if failures > 0 {
		return fmt.Errorf("%d of %d calls failed, the first with: %w", failures, calls, first)
	}
	return nil
}
