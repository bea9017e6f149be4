// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"net"
	"testing"
)

func TestInPodPrefersLoopbackThenPodIP(t *testing.T) {
	// 127.0.0.2 plays the pod IP, so every dial stays on loopback.
	onLoopback, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer onLoopback.Close()
	_, port, _ := net.SplitHostPort(onLoopback.Addr().String())
	d := inPod{Dialer: HostDialer(), ip: "127.0.0.2"}
	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("127.0.0.2", port))
	if err != nil {
		t.Fatalf("a server bound to loopback only must be reached: %v", err)
	}
	if got := conn.RemoteAddr().String(); got != onLoopback.Addr().String() {
		t.Errorf("dialled %s, want the loopback listener %s", got, onLoopback.Addr())
	}
	conn.Close()

	onPodIP, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer onPodIP.Close()
	conn, err = d.DialContext(context.Background(), "tcp", onPodIP.Addr().String())
	if err != nil {
		t.Fatalf("a server bound to the pod IP only must be reached after loopback refuses: %v", err)
	}
	conn.Close()
}
