// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

// h2cTarget is a loopback server that speaks HTTP/2 over cleartext with prior
// knowledge and nothing else, and records what it saw.
type h2cTarget struct {
	addr    string
	mu      sync.Mutex
	protos  []int // r.ProtoMajor of each request
	agent   string
	headers http.Header
	host    string
}

func newH2CTarget(t *testing.T) *h2cTarget {
	t.Helper()
	ht := &h2cTarget{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/bigger", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("b", 3*MaxOutput)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ht.mu.Lock()
			ht.protos = append(ht.protos, r.ProtoMajor)
			ht.agent, ht.headers, ht.host = r.UserAgent(), r.Header.Clone(), r.Host
			ht.mu.Unlock()
			mux.ServeHTTP(w, r)
		}),
		Protocols:         h2cOnly(),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	ht.addr = ln.Addr().String()
	return ht
}

func h2cOnly() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

func (ht *h2cTarget) seen() (protos []int, agent, host string, headers http.Header) {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	return append([]int(nil), ht.protos...), ht.agent, ht.host, ht.headers
}

func h2cGet(path string, headers ...corev1.HTTPHeader) *corev1.HTTPGetAction {
	a := get(path, headers...)
	a.Protocol = ptrTo(corev1.HTTPProtocolHTTP2)
	return a
}

func ptrTo[T any](v T) *T { return &v }

// SEMANTICS h2c: protocol HTTP2 speaks HTTP/2 over cleartext with prior
// knowledge, through the pod's dialer, with the HTTP/1.1 probe's status
// mapping, redirects, headers, body cap and timeout.
func TestH2CProbe(t *testing.T) {
	ht := newH2CTarget(t)
	cases := []struct {
		name    string
		a       *corev1.HTTPGetAction
		timeout time.Duration
		want    Result
		msg     string
	}{
		{"ok", h2cGet("/ok"), 5 * time.Second, Success, ""},
		{"status", h2cGet("/fail"), 5 * time.Second, Failure, "HTTP probe failed with statuscode: 503"},
		{"same-host redirect followed", h2cGet("/moved"), 5 * time.Second, Success, ""},
		{"body over the cap", h2cGet("/bigger"), 5 * time.Second, Success, ""},
		{"timeout", h2cGet("/slow"), 300 * time.Millisecond, Failure, "Client.Timeout exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &redirectDialer{}
			start := time.Now()
			r, msg, err := probeHTTP(context.Background(), d, ht.addr, tc.a, tc.timeout)
			if err != nil || r != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %v %q %v, want %v containing %q", r, msg, err, tc.want, tc.msg)
			}
			if took := time.Since(start); took > tc.timeout+2*time.Second {
				t.Fatalf("took %v", took)
			}
			if len(d.dialed) == 0 || d.dialed[0] != ht.addr || d.lingered.Load() != 1 {
				t.Fatalf("dialer saw %v (linger %d), want %s", d.dialed, d.lingered.Load(), ht.addr)
			}
		})
	}
	// A dial error says nothing of the protocol: no h2c hint.
	r, msg, err := probeHTTP(context.Background(), &net.Dialer{}, closedPort(t), h2cGet("/ok"), 5*time.Second)
	if err != nil || r != Failure || !strings.Contains(msg, "connection refused") || strings.Contains(msg, "h2c") {
		t.Fatalf("refused: %v %q %v", r, msg, err)
	}
	protos, _, _, _ := ht.seen()
	for _, p := range protos {
		if p != 2 {
			t.Fatalf("server saw HTTP/%d requests: %v", p, protos)
		}
	}
	if len(protos) < len(cases)+1 { // the redirect is a second request
		t.Fatalf("server saw %d requests, want at least %d", len(protos), len(cases)+1)
	}
}

// The h2c request carries the probe's user agent, headers and Host.
func TestH2CHeaders(t *testing.T) {
	ht := newH2CTarget(t)
	a := h2cGet("/ok", corev1.HTTPHeader{Name: "X-Probe", Value: "1"}, hostHeader("app.example"))
	if r, msg, err := probeHTTP(context.Background(), &net.Dialer{}, ht.addr, a, 5*time.Second); r != Success || err != nil {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	_, agent, host, headers := ht.seen()
	if !strings.HasPrefix(agent, "kube-probe/1.37") || host != "app.example" || headers.Get("X-Probe") != "1" || headers.Get("Accept") != "*/*" {
		t.Fatalf("agent %q host %q headers %v", agent, host, headers)
	}
}

func hostHeader(v string) corev1.HTTPHeader { return corev1.HTTPHeader{Name: "Host", Value: v} }

// The mode matters both ways: an h2c probe of an HTTP/1.1-only server fails
// and says h2c was asked for; an HTTP/1.1 probe of an h2c-only server fails.
func TestH2CModeMismatch(t *testing.T) {
	h1 := newHTTPTarget(t, false)
	h1addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(h1.port))
	r, msg, err := probeHTTP(context.Background(), &net.Dialer{}, h1addr, h2cGet("/ok"), 5*time.Second)
	t.Logf("h2c probe of an HTTP/1.1 server: %v %q", r, msg)
	if err != nil || r != Failure || !strings.Contains(msg, "HTTP/2 over cleartext (h2c, prior knowledge) failed; does the server speak h2c?") {
		t.Fatalf("h2c probe of an HTTP/1.1 server: %v %q %v", r, msg, err)
	}
	ht := newH2CTarget(t)
	r, msg, err = probeHTTP(context.Background(), &net.Dialer{}, ht.addr, get("/ok"), 5*time.Second)
	t.Logf("HTTP/1.1 probe of an h2c server: %v %q", r, msg)
	if err != nil || r != Failure {
		t.Fatalf("HTTP/1.1 probe of an h2c server: %v %q %v", r, msg, err)
	}
}

func TestH2CThroughEngine(t *testing.T) {
	ht := newH2CTarget(t)
	h := newHarness(t)
	d := desired("p", corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(addr2port(t, ht.addr)), Protocol: ptrTo(corev1.HTTPProtocolHTTP2)}}})
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	if protos, _, _, _ := ht.seen(); len(protos) != 1 || protos[0] != 2 {
		t.Fatalf("server saw %v", protos)
	}
}

// selfSigned is a throwaway server certificate: the probes do not verify it.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	leaf := testpki.NewCA(t).Issue(t, testpki.Leaf{CN: "probe-target", DNS: []string{"localhost"}})
	return tls.Certificate{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}
}

// SEMANTICS gRPC TLS: mode TLS speaks TLS without verifying the certificate
// (self-signed here), with the plaintext probe's health semantics; a mode
// that does not match the server fails the probe and says so.
func TestGRPCTLSProbe(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS12})
	secure, agents := grpcServer(t, hs, grpc.Creds(creds))
	plain, _ := grpcServer(t, hs)
	cases := []struct {
		name, addr, service string
		tls                 bool
		want                Result
		msg, hint           string
	}{
		{"TLS serving", secure, "", true, Success, "", ""},
		{"TLS not serving", secure, "down", true, Failure, `service unhealthy (responded with "NOT_SERVING")`, ""},
		{"TLS unknown service", secure, "nope", true, Failure, "error: health rpc probe failed", ""},
		{"plaintext probe of a TLS server", secure, "", false, Failure, "error: failed to connect service at", "set grpc.mode: TLS"},
		{"TLS probe of a plaintext server", plain, "", true, Failure, "error: failed to connect service at", "the server does not serve TLS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &redirectDialer{}
			r, msg := probeGRPC(context.Background(), d, tc.addr, tc.service, tc.tls, 5*time.Second)
			t.Logf("%v %q", r, msg)
			if r != tc.want || !strings.HasPrefix(msg, tc.msg) || !strings.Contains(msg, tc.hint) {
				t.Fatalf("got %v %q, want %v %q...%q", r, msg, tc.want, tc.msg, tc.hint)
			}
			if len(d.dialed) == 0 || d.dialed[0] != tc.addr {
				t.Fatalf("dialer saw %v, want %s", d.dialed, tc.addr)
			}
		})
	}
	if ua := agents(); len(ua) == 0 || !strings.HasPrefix(ua[0], "kube-probe/1.37 ") {
		t.Fatalf("user agents %q", ua)
	}
}

func TestGRPCTLSThroughEngine(t *testing.T) {
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS12})
	addr, _ := grpcServer(t, health.NewServer(), grpc.Creds(creds))
	h := newHarness(t)
	d := desired("p", corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{
		GRPC: &corev1.GRPCAction{Port: int32(addr2port(t, addr)), Mode: ptrTo(corev1.GRPCProbeModeTLS)}}})
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("TLS: got %v %q %v", r, msg, err)
	}
	d.Spec.GRPC.Mode = ptrTo(corev1.GRPCProbeModePlaintext)
	if r, msg, _ := runOnce(t, h.m, d); r != Failure {
		t.Fatalf("Plaintext: got %v %q", r, msg)
	}
}
