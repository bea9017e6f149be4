// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The hostile targets run in a child process (this test binary re-executed),
// so the memory measured is the engine's alone.
const hostileServerEnv = "PROBESHIM_HOSTILE_SERVER"

// serveHostileTargets prints "header:P body:P drip:P grpc:P" and serves until
// stdin closes. The HTTP ones write raw HTTP/1.1 without looking at the
// request, as an attacker's server would: an 8 MiB response header, a body
// that never ends, a header dripped a byte every 100 ms. The gRPC one answers
// SERVING with 1 MiB of unknown fields and 1 MiB of response headers.
func serveHostileTargets() {
	raiseFDLimit()
	bigHeader := []byte("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("h", 8<<20) + "\r\nContent-Length: 0\r\n\r\n")
	chunk := []byte(strings.Repeat("b", 64<<10))
	handlers := map[string]func(net.Conn){
		"header": func(c net.Conn) { _, _ = c.Write(bigHeader) },
		"body": func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		},
		"drip": func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nX-Drip: "))
			for {
				if _, err := c.Write([]byte("d")); err != nil {
					return
				}
				// the drip's pace, one byte per 100 ms for as long as the test measures the prober against it
				time.Sleep(100 * time.Millisecond)
			}
		},
	}
	var ports []string
	for _, kind := range []string{"header", "body", "drip"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ports = append(ports, fmt.Sprintf("%s:%d", kind, ln.Addr().(*net.TCPAddr).Port))
		h := handlers[kind]
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_, _ = bufio.NewReader(c).ReadString('\n')
					h(c)
				}()
			}
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, bigHealth{})
	go func() { _ = s.Serve(ln) }()
	ports = append(ports, fmt.Sprintf("grpc:%d", ln.Addr().(*net.TCPAddr).Port))
	ports = append(ports, "h2c:"+serveHostileH2C())
	fmt.Println(strings.Join(ports, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// serveHostileH2C serves h2c only: /header answers an 8 MiB header, /body
// a body that never ends. It returns the port.
func serveHostileH2C() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	big, chunk := strings.Repeat("h", 8<<20), []byte(strings.Repeat("b", 64<<10))
	mux := http.NewServeMux()
	mux.HandleFunc("/header", func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Big", big) })
	mux.HandleFunc("/body", func(w http.ResponseWriter, _ *http.Request) {
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: p, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// bigHealth answers SERVING, well-formed, just large.
type bigHealth struct {
	healthpb.UnimplementedHealthServer
}

func (bigHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-big", strings.Repeat("h", 1<<20)))
	resp := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	pad := protowire.AppendTag(nil, 99, protowire.BytesType)
	resp.ProtoReflect().SetUnknown(protowire.AppendBytes(pad, make([]byte, 1<<20)))
	return resp, nil
}

// hostileTargets starts the child and returns its ports by kind.
func hostileTargets(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostileServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("hostile targets: %v", err)
	}
	ports := map[string]string{}
	for _, f := range strings.Fields(line) {
		kind, port, _ := strings.Cut(f, ":")
		ports[kind] = port
	}
	return ports
}

// allocated returns the bytes f allocates, from the runtime's cumulative
// count.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxProbeAlloc is what one probe of a hostile target may cost. Before the
// caps, an 8 MiB header cost 48 MiB and a 1 MiB gRPC answer 8 MiB.
const maxProbeAlloc = 512 << 10

// A hostile target costs the engine a bounded amount per probe: an 8 MiB
// header is refused after MaxResponseHeader, an endless body is read to
// MaxOutput, a dripped header ends at the probe's timeout, and a gRPC answer
// over the cap fails the probe; over h2c as over HTTP/1.1.
func TestHostileTargetsAreBounded(t *testing.T) {
	ports := hostileTargets(t)
	for _, tc := range []struct {
		kind    string
		timeout time.Duration
		want    Result
		msg     string
	}{
		{"header", 5 * time.Second, Failure, "headers exceeded"},
		{"body", 5 * time.Second, Success, ""},
		{"drip", 300 * time.Millisecond, Failure, "Timeout"},
		{"grpc", 5 * time.Second, Failure, "error"},
		{"h2c/header", 5 * time.Second, Failure, "h2c"},
		{"h2c/body", 5 * time.Second, Success, ""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			kind, path, h2c := strings.Cut(tc.kind, "/")
			addr := "127.0.0.1:" + ports[kind]
			var r Result
			var msg string
			var err error
			start := time.Now()
			n := allocated(func() {
				if tc.kind == "grpc" {
					r, msg = probeGRPC(context.Background(), hostDialer, addr, "", false, tc.timeout)
					return
				}
				a := &corev1.HTTPGetAction{Path: "/" + path, Port: intstr.FromString(ports[kind])}
				if h2c {
					a.Protocol = ptrTo(corev1.HTTPProtocolHTTP2)
				}
				r, msg, err = probeHTTP(context.Background(), hostDialer, addr, a, tc.timeout)
			})
			t.Logf("%s: %s %q in %v, allocated %d KiB", tc.kind, r, msg, time.Since(start).Round(time.Millisecond), n>>10)
			if err != nil {
				t.Fatalf("probe error %v", err)
			}
			if r != tc.want || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %s %q, want %s containing %q", r, msg, tc.want, tc.msg)
			}
			if n > maxProbeAlloc {
				t.Errorf("one probe allocated %d KiB, want at most %d KiB", n>>10, maxProbeAlloc>>10)
			}
		})
	}
}

// rssMB is this process's resident set.
func rssMB(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// The whole engine under a hostile tenant: a thousand probes a second to
// servers that answer an 8 MiB header, an endless body or a dripped header
// (more than the network pool can run at once). The process's memory stays
// bounded, and another namespace's probe still starts on time: queued probes
// are taken round-robin between namespaces, not first come first served.
func TestHostileLoadStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a thousand probes for 8 s")
	}
	raiseFDLimit()
	ports := hostileTargets(t)

	// The victim: a TCP server that notes when each probe connects.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var hits []time.Time
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			hits = append(hits, time.Now())
			mu.Unlock()
			c.Close()
		}
	}()

	m, err := NewManager(allRunning{ContainerStatus{ID: "c", Running: true, StartedAt: time.Now().Add(-time.Hour)}},
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	spec := func(port string) corev1.Probe {
		p, _ := strconv.Atoi(port)
		return corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(p)}},
			PeriodSeconds: 1, TimeoutSeconds: 1}
	}
	hostile := PodRef{UID: "hostile", Namespace: "hostile", Name: "hostile", IP: "127.0.0.1"}
	var ds []Desired
	for kind, n := range map[string]int{"header": 40, "body": 60, "drip": 900} {
		for i := range n {
			ds = append(ds, Desired{Key: Key{PodUID: "hostile", Container: kind, Probe: fmt.Sprintf("%s-%d", kind, i)},
				Pod: hostile, Spec: spec(ports[kind]), ProbeType: "custom"})
		}
	}
	victimPort := ln.Addr().(*net.TCPAddr).Port
	ds = append(ds, Desired{Key: Key{PodUID: "victim", Container: "app", Probe: "tcp"},
		Pod:       PodRef{UID: "victim", Namespace: "victim", Name: "victim", IP: "127.0.0.1"},
		Spec:      corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(victimPort)}}, PeriodSeconds: 1, TimeoutSeconds: 1},
		ProbeType: "custom"})

	runtime.GC()
	before := rssMB(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	go func() {
		for range m.Updates() {
		}
	}()
	m.Sync(ds)
	peak := before
	// measures: peak RSS over 8 s of hostile probes, sampled every 100 ms
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, rssMB(t))
	}
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	// The first probe of each may wait for jitter of up to a period. First
	// come first served, the gaps were 3 s; CPU contention with other tests
	// may stretch a fair 1 s a little.
	var gap time.Duration
	for i := 2; i < len(hits); i++ {
		gap = max(gap, hits[i].Sub(hits[i-1]))
	}
	t.Logf("RSS %.0f MB before, peak %.0f MB with 1,000 hostile probes; the victim was probed %d times in 8 s, longest gap %v",
		before, peak, len(hits), gap.Round(time.Millisecond))
	if peak-before > 100 {
		t.Errorf("RSS grew by %.0f MB, want at most 100 MB", peak-before)
	}
	if len(hits) < 6 || gap > 2*time.Second {
		t.Errorf("the victim's 1 s probe ran %d times in 8 s, longest gap %v: not on time", len(hits), gap)
	}
}
