// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// httpTarget is a loopback server with the paths the table needs.
type httpTarget struct {
	srv     *httptest.Server
	port    int
	mu      sync.Mutex
	hits    map[string]int
	headers http.Header
	host    string
	release chan struct{}
}

func newHTTPTarget(t *testing.T, tls bool) *httpTarget {
	ht := &httpTarget{hits: map[string]int{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok body") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "secret body")
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("loc"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/remote-loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/remote-loop", ht.port), http.StatusFound)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		ht.mu.Lock()
		ht.headers, ht.host = r.Header.Clone(), r.Host
		ht.mu.Unlock()
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		// Exactly the cap, then hold the body open: a reader that wants
		// more than the cap hangs until its timeout.
		_, _ = w.Write([]byte(strings.Repeat("b", MaxOutput)))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-ht.release:
		}
	})
	mux.HandleFunc("/bigger", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("b", 3*MaxOutput)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-ht.release:
		}
	})
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ht.mu.Lock()
		ht.hits[r.URL.Path]++
		ht.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
	ht.srv = httptest.NewUnstartedServer(count)
	ht.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		ht.srv.StartTLS()
	} else {
		ht.srv.Start()
	}
	ht.port = ht.srv.Listener.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() {
		close(ht.release)
		ht.srv.Close()
	})
	return ht
}

func (ht *httpTarget) hitCount(path string) int {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	return ht.hits[path]
}

func get(path string, headers ...corev1.HTTPHeader) *corev1.HTTPGetAction {
	return &corev1.HTTPGetAction{Path: path, HTTPHeaders: headers}
}

func (ht *httpTarget) probe(t *testing.T, a *corev1.HTTPGetAction, timeout time.Duration) (Result, string, error) {
	t.Helper()
	return probeHTTP(context.Background(), &net.Dialer{}, net.JoinHostPort("127.0.0.1", strconv.Itoa(ht.port)), a, timeout)
}

// SEMANTICS HTTP: status codes, redirects, body cap, message.
func TestHTTPProbe(t *testing.T) {
	ht := newHTTPTarget(t, false)
	remote := func(p string) string { return fmt.Sprintf("http://localhost:%d%s", ht.port, p) }
	cases := []struct {
		name string
		path string
		want Result
		msg  string
	}{
		{"200", "/ok", Success, ""},
		{"204", "/status/204", Success, ""},
		{"399 not followed", "/status/399", Success, "Probe terminated redirects"},
		{"400", "/status/400", Failure, "HTTP probe failed with statuscode: 400"},
		{"500 never shows the body", "/fail", Failure, "HTTP probe failed with statuscode: 500"},
		{"local redirect followed", "/redirect?loc=/ok", Success, ""},
		{"local redirect to a failure", "/redirect?loc=/fail", Failure, "HTTP probe failed with statuscode: 500"},
		{"remote redirect not followed", "/redirect?loc=" + url.QueryEscape(remote("/fail")), Success, "Probe terminated redirects"},
		{"remote redirect loop", "/remote-loop", Success, "Probe terminated redirects"},
		{"body larger than the cap", "/bigger", Success, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, msg, err := ht.probe(t, get(tc.path), 5*time.Second)
			if err != nil || r != tc.want || msg != tc.msg {
				t.Fatalf("got %v %q %v, want %v %q", r, msg, err, tc.want, tc.msg)
			}
		})
	}
	if n := ht.hitCount("/fail"); n != 2 {
		t.Fatalf("/fail hit %d times: the remote redirect was followed", n)
	}
	if n := ht.hitCount("/remote-loop"); n != 1 {
		t.Fatalf("/remote-loop hit %d times, want 1", n)
	}
}

func TestHTTPRedirectLoop(t *testing.T) {
	ht := newHTTPTarget(t, false)
	r, msg, err := ht.probe(t, get("/loop"), 5*time.Second)
	if err != nil || r != Failure || !strings.Contains(msg, "stopped after 10 redirects") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	if n := ht.hitCount("/loop"); n != 10 {
		t.Fatalf("%d requests, want 10", n)
	}
}

// The body is read up to 10 KiB only: a server that sends exactly that much
// and then stalls does not hold the probe to its timeout.
func TestHTTPBodyCap(t *testing.T) {
	ht := newHTTPTarget(t, false)
	start := time.Now()
	r, msg, err := ht.probe(t, get("/big"), 10*time.Second)
	if err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v: read past the cap", d)
	}
}

func TestHTTPTimeout(t *testing.T) {
	ht := newHTTPTarget(t, false)
	start := time.Now()
	r, msg, err := ht.probe(t, get("/slow"), 100*time.Millisecond)
	if err != nil || r != Failure || !strings.Contains(msg, "Client.Timeout") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timed out after %v", d)
	}
}

func TestHTTPSNotVerified(t *testing.T) {
	ht := newHTTPTarget(t, true)
	a := get("/ok")
	a.Scheme = "HTTPS" // lowercased
	if r, msg, err := ht.probe(t, a, 5*time.Second); err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	a.Scheme = ""
	if r, msg, _ := ht.probe(t, a, 5*time.Second); r != Failure || !strings.Contains(msg, "400") {
		t.Fatalf("default scheme is http, got %v %q", r, msg)
	}
}

// SEMANTICS HTTP headers.
func TestHTTPHeaders(t *testing.T) {
	ht := newHTTPTarget(t, false)
	hdr := func(n, v string) corev1.HTTPHeader { return corev1.HTTPHeader{Name: n, Value: v} }
	cases := []struct {
		name     string
		headers  []corev1.HTTPHeader
		want     map[string][]string
		wantHost string
	}{
		{"defaults exactly", nil, map[string][]string{
			"Accept": {"*/*"}, "Connection": {"close"}, "User-Agent": {"kube-probe/1.37"},
		}, ""},
		{"canonical names, duplicates kept, own agent and accept", []corev1.HTTPHeader{
			hdr("x-custom", "a"), hdr("X-Custom", "b"), hdr("user-agent", "mine/1"), hdr("ACCEPT", "text/plain"),
		}, map[string][]string{
			"Accept": {"text/plain"}, "Connection": {"close"}, "User-Agent": {"mine/1"}, "X-Custom": {"a", "b"},
		}, ""},
		{"empty user agent removes it", []corev1.HTTPHeader{hdr("User-Agent", "")}, map[string][]string{
			"Accept": {"*/*"}, "Connection": {"close"},
		}, ""},
		{"empty accept removes it", []corev1.HTTPHeader{hdr("Accept", "")}, map[string][]string{
			"Connection": {"close"}, "User-Agent": {"kube-probe/1.37"},
		}, ""},
		{"host header kept", []corev1.HTTPHeader{hdr("Host", "app.example")}, map[string][]string{
			"Accept": {"*/*"}, "Connection": {"close"}, "User-Agent": {"kube-probe/1.37"},
		}, "app.example"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if r, msg, err := ht.probe(t, get("/headers", tc.headers...), 5*time.Second); r != Success {
				t.Fatalf("got %v %q %v", r, msg, err)
			}
			ht.mu.Lock()
			got, host := ht.headers, ht.host
			ht.mu.Unlock()
			if fmt.Sprint(sortedHeader(got)) != fmt.Sprint(sortedHeader(tc.want)) {
				t.Fatalf("headers %v, want %v", got, tc.want)
			}
			wantHost := tc.wantHost
			if wantHost == "" {
				wantHost = fmt.Sprintf("127.0.0.1:%d", ht.port)
			}
			if host != wantHost {
				t.Fatalf("host %q, want %q", host, wantHost)
			}
		})
	}
}

func sortedHeader(h map[string][]string) []string {
	var out []string
	for k, v := range h {
		out = append(out, k+"="+strings.Join(v, "|"))
	}
	sort.Strings(out)
	return out
}

// redirectDialer sends every dial of from to to and records what it dialed.
type redirectDialer struct {
	from, to string
	mu       sync.Mutex
	dialed   []string
	lingered atomic.Int32
}

func (d *redirectDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	d.mu.Unlock()
	if addr == d.from {
		addr = d.to
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lingerRecorder{Conn: c, d: d}, nil
}

// lingerRecorder records SetLinger calls and passes them on.
type lingerRecorder struct {
	net.Conn
	d *redirectDialer
}

func (c *lingerRecorder) SetLinger(sec int) error {
	c.d.lingered.Store(int32(sec))
	return c.Conn.(*net.TCPConn).SetLinger(sec)
}

// SEMANTICS: no environment proxy. The target is a non-loopback address
// (net/http never proxies loopback), reached through the dialer.
func TestHTTPIgnoresEnvironmentProxy(t *testing.T) {
	ht := newHTTPTarget(t, false)
	var proxyHits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxyHits.Add(1) }))
	defer proxy.Close()
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	d := &redirectDialer{from: "10.255.255.1:80", to: ht.srv.Listener.Addr().String()}
	r, msg, err := probeHTTP(context.Background(), d, "10.255.255.1:80", get("/ok"), 5*time.Second)
	if err != nil || r != Success {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	if n := proxyHits.Load(); n != 0 {
		t.Fatalf("proxy got %d requests", n)
	}
	if fmt.Sprint(d.dialed) != "[10.255.255.1:80]" {
		t.Fatalf("dialed %v", d.dialed)
	}
	if d.lingered.Load() != 1 {
		t.Fatal("SO_LINGER not set to 1s")
	}
}

// Ports, named ports and the host through the engine's dispatch.
func TestHTTPThroughEngine(t *testing.T) {
	ht := newHTTPTarget(t, false)
	h := newHarness(t)
	spec := func(port intstr.IntOrString, host string) corev1.Probe {
		return corev1.Probe{TimeoutSeconds: 5, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: port, Host: host}}}
	}
	d := desired("p", spec(intstr.FromString("web"), ""))
	d.Ports = map[string]int32{"web": int32(ht.port)}
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("named port: %v %q %v", r, msg, err)
	}
	d.Spec = spec(intstr.FromString("nope"), "")
	if r, msg, _ := runOnce(t, h.m, d); r != Failure || msg != `port "nope" not found in the container's ports` {
		t.Fatalf("unknown named port: %v %q", r, msg)
	}
	for _, p := range []int{0, 65536} {
		d.Spec = spec(intstr.FromInt32(int32(p)), "")
		if r, msg, _ := runOnce(t, h.m, d); r != Failure || !strings.Contains(msg, "invalid port") {
			t.Fatalf("port %d: %v %q", p, r, msg)
		}
	}
	d.Spec = spec(intstr.FromInt32(int32(ht.port)), "192.0.2.1")
	if r, msg, err := runOnce(t, h.m, d); !refusal(r, msg, err, `probe refused: probe host "192.0.2.1" is not the pod`) {
		t.Fatalf("foreign host: %v %q %v", r, msg, err)
	}
	d.Spec = spec(intstr.FromInt32(int32(ht.port)), "127.0.0.1")
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success {
		t.Fatalf("pod host: %v %q %v", r, msg, err)
	}
	d.Spec, d.Pod.IP = spec(intstr.FromInt32(int32(ht.port)), ""), ""
	if r, msg, err := runOnce(t, h.m, d); !refusal(r, msg, err, "") || !strings.Contains(err.Error(), "the pod's IP is not known") {
		t.Fatalf("no pod IP: %v %q %v", r, msg, err)
	}
}

// Where a network probe connects: the pod IP unless the host field names loopback.
func TestTargetSelection(t *testing.T) {
	pod := PodRef{IP: "10.1.2.3"}
	hostNet := PodRef{IP: "192.168.1.5", HostNetwork: true}
	httpGet := func(host string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: host, Port: intstr.FromInt32(8080)}}
	}
	tcp := func(host string) corev1.ProbeHandler {
		return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: intstr.FromInt32(8080)}}
	}
	cases := []struct {
		name string
		pod  PodRef
		h    corev1.ProbeHandler
		want string // address dialled; "" for refused
	}{
		{"httpGet without host: the pod IP, never loopback first", pod, httpGet(""), "10.1.2.3:8080"},
		{"tcpSocket without host: the pod IP", pod, tcp(""), "10.1.2.3:8080"},
		{"grpc: the pod IP only", pod, corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}, "10.1.2.3:9090"},
		{"httpGet host 127.0.0.1", pod, httpGet("127.0.0.1"), "127.0.0.1:8080"},
		{"httpGet host localhost", pod, httpGet("localhost"), "127.0.0.1:8080"},
		{"tcpSocket host ::1", pod, tcp("::1"), "[::1]:8080"},
		{"hostNetwork without host: its IP", hostNet, tcp(""), "192.168.1.5:8080"},
		{"hostNetwork loopback: the pod's, which is the node's", hostNet, httpGet("127.0.0.1"), "127.0.0.1:8080"},
		{"hostNetwork localhost", hostNet, tcp("localhost"), "127.0.0.1:8080"},
		{"no pod IP: refused, not loopback", PodRef{}, httpGet(""), ""},
		{"no pod IP, hostNetwork: refused", PodRef{HostNetwork: true}, tcp(""), ""},
		{"another host", pod, httpGet("10.1.2.4"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &recordingDialer{}
			h := newHarness(t)
			h.m.network = NetworkFunc(func(PodRef) (Dialer, error) { return d, nil })
			dd := desired("p", corev1.Probe{TimeoutSeconds: 1, ProbeHandler: tc.h})
			dd.Pod = tc.pod
			r, msg, err := runOnce(t, h.m, dd)
			if tc.want == "" {
				if !refusal(r, msg, err, "") || !strings.HasPrefix(err.Error(), "probe refused: ") || len(d.dialed) != 0 {
					t.Errorf("got %v %q %v, dialled %v; want Unknown, refused, nothing dialled", r, msg, err, d.dialed)
				}
				return
			}
			if fmt.Sprint(d.dialed) != "["+tc.want+"]" {
				t.Errorf("dialled %v, want [%s] (result %v %q)", d.dialed, tc.want, r, msg)
			}
		})
	}
}

// recordingDialer records where it is asked to connect and refuses every connection.
type recordingDialer struct{ dialed []string }

func (d *recordingDialer) DialContext(_ context.Context, _, address string) (net.Conn, error) {
	d.dialed = append(d.dialed, address)
	return nil, syscall.ECONNREFUSED
}

func TestProbeHost(t *testing.T) {
	pod := PodRef{IP: "10.1.2.3"}
	hostNet := PodRef{IP: "192.168.1.5", HostNetwork: true}
	cases := []struct {
		pod        PodRef
		host, want string
	}{
		{pod, "", "10.1.2.3"},
		{pod, "10.1.2.3", "10.1.2.3"},
		{pod, "127.0.0.1", "127.0.0.1"}, // the pod's own loopback, in its netns
		{pod, "127.0.0.2", "127.0.0.2"},
		{pod, "localhost", "127.0.0.1"},
		{pod, "::1", "::1"},
		{pod, "10.1.2.4", ""},
		{pod, "metadata.google.internal", ""},
		{PodRef{}, "", ""}, // no IP: refused, never loopback instead
		{PodRef{}, "127.0.0.1", "127.0.0.1"},
		{hostNet, "", "192.168.1.5"},
		{hostNet, "127.0.0.1", "127.0.0.1"}, // the pod's loopback, which is the node's
		{hostNet, "localhost", "127.0.0.1"},
		{hostNet, "10.1.2.3", ""}, // another address of the node is still refused
		{PodRef{HostNetwork: true}, "", ""},
	}
	for _, tc := range cases {
		got, err := probeHost(tc.pod, tc.host)
		if got != tc.want || (err != nil) != (tc.want == "") || (err != nil && !errors.Is(err, ErrRefused)) {
			t.Errorf("probeHost(%+v, %q) = %q, %v; want %q", tc.pod, tc.host, got, err, tc.want)
		}
	}
}

// A body that breaks off is a probe error, as in the kubelet: the probe is
// discarded rather than counted.
func TestHTTPBodyErrorIsProbeError(t *testing.T) {
	ln := listenRaw(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
	port := ln.Addr().(*net.TCPAddr).Port
	r, msg, err := probeHTTP(context.Background(), &net.Dialer{}, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), get("/"), 5*time.Second)
	if err == nil {
		t.Fatalf("got %v %q, want a probe error", r, msg)
	}
}

// listenRaw answers every connection with a fixed response, then closes it.
func listenRaw(t *testing.T, response string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				_, _ = io.WriteString(c, response)
			}()
		}
	}()
	return ln
}

// passDialer records where it is asked to connect and connects there.
type passDialer struct {
	mu     sync.Mutex
	dialed []string
}

func (d *passDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, address)
}

// A Host header naming a virtual host only sets the header: every connection, redirects
// included, goes to the address the probe was given (the pod), never to the named host.
func TestHTTPHostHeaderNeverRedirects(t *testing.T) {
	ht := newHTTPTarget(t, false)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ht.port))
	for _, path := range []string{
		"/headers",
		"/redirect?loc=/headers", // relative: followed, to the pod
		"/redirect?loc=" + url.QueryEscape("http://vhost.example.com/headers"), // the virtual host: not followed
	} {
		t.Run(path, func(t *testing.T) {
			d := &passDialer{}
			a := get(path, corev1.HTTPHeader{Name: "Host", Value: "vhost.example.com"})
			r, msg, err := probeHTTP(context.Background(), d, addr, a, 5*time.Second)
			if err != nil || r != Success {
				t.Fatalf("result %v %q %v", r, msg, err)
			}
			for _, got := range d.dialed {
				if got != addr {
					t.Errorf("dialled %s, want only the pod %s", got, addr)
				}
			}
			if len(d.dialed) == 0 {
				t.Fatal("nothing dialled")
			}
			ht.mu.Lock()
			host := ht.host
			ht.mu.Unlock()
			if strings.Contains(path, "loc=/headers") || path == "/headers" {
				if host != "vhost.example.com" {
					t.Errorf("the server saw Host %q, want vhost.example.com", host)
				}
			}
		})
	}
}

// A path without a leading '/' is requested as the kubelet requests it: "ok" is "/ok".
func TestHTTPPathWithoutSlash(t *testing.T) {
	ht := newHTTPTarget(t, false)
	if r, msg, err := ht.probe(t, get("ok"), 5*time.Second); err != nil || r != Success {
		t.Fatalf("result %v %q %v", r, msg, err)
	}
	if n := ht.hitCount("/ok"); n != 1 {
		t.Errorf("%d requests for /ok, want 1", n)
	}
}
