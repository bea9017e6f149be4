// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateProbe(t *testing.T) {
	port := intstr.FromInt32
	name := intstr.FromString
	with := func(p corev1.Probe, f func(*corev1.Probe)) corev1.Probe { f(&p); return p }
	const podIP = "10.244.1.7"

	cases := []struct {
		name  string
		probe corev1.Probe
		opts  ProbeOptions
		want  []wantErr
	}{
		// Accepted.
		{name: "exec", probe: execProbe("cat", "/tmp/healthy")},
		{name: "httpGet minimal", probe: httpProbe("", port(8080))},
		{name: "httpGet named port", probe: httpProbe("/healthz", name("http"))},
		{name: "httpGet scheme any case", probe: with(httpProbe("/", port(443)), func(p *corev1.Probe) { p.HTTPGet.Scheme = "hTTpS" })},
		{name: "httpGet scheme HTTP", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Scheme = corev1.URISchemeHTTP })},
		{name: "httpGet path with query", probe: httpProbe("/healthz?verbose=1", port(80))},
		// The kubelet requests "healthz" as "/healthz" (prober.TestHTTPPathWithoutSlash).
		{name: "httpGet path without a slash", probe: httpProbe("healthz", port(80))},
		{name: "httpGet headers", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "X-Probe", Value: "1"}, corev1.HTTPHeader{Name: "User-Agent", Value: ""})},
		{name: "Host localhost", probe: httpProbe("/", port(80), hostHeader("localhost"))},
		{name: "Host LOCALHOST:8080", probe: httpProbe("/", port(80), hostHeader("LOCALHOST:8080"))},
		{name: "Host 127.0.0.1", probe: httpProbe("/", port(80), hostHeader("127.0.0.1"))},
		{name: "Host 127.0.0.1:80", probe: httpProbe("/", port(80), hostHeader("127.0.0.1:80"))},
		{name: "Host ::1", probe: httpProbe("/", port(80), hostHeader("::1"))},
		{name: "Host [::1]", probe: httpProbe("/", port(80), hostHeader("[::1]"))},
		{name: "Host [::1]:8080", probe: httpProbe("/", port(80), hostHeader("[::1]:8080"))},
		{name: "Host pod IP", probe: httpProbe("/", port(80), hostHeader(podIP)), opts: ProbeOptions{PodIP: podIP}},
		{name: "Host pod IP with port", probe: httpProbe("/", port(80), hostHeader(podIP+":8080")), opts: ProbeOptions{PodIP: podIP}},
		{name: "host header name lower case, pod IPv6", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "host", Value: "[fd00::7]:80"}), opts: ProbeOptions{PodIP: "fd00::7"}},
		{name: "httpGet host 127.0.0.1", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Host = "127.0.0.1" })},
		{name: "httpGet host localhost", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Host = "LocalHost" })},
		{name: "httpGet host ::1", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Host = "::1" })},
		{name: "tcpSocket host 127.0.0.1", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port(22), Host: "127.0.0.1"}}}},
		{name: "tcpSocket", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port(5432)}}}},
		{name: "tcpSocket named port", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: name("postgres")}}}},
		{name: "grpc", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: ptr("my.Service")}}}},
		{name: "grpc max port", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 65535}}}},
		{name: "timing zero means defaults", probe: execProbe("true")},
		{name: "timing set", probe: with(execProbe("true"), func(p *corev1.Probe) {
			p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold = 5, 2, 10, 3, 3
			p.TerminationGracePeriodSeconds = ptr[int64](1)
		})},
		{name: "liveness successThreshold 1", probe: with(execProbe("true"), func(p *corev1.Probe) { p.SuccessThreshold = 1 }), opts: ProbeOptions{Liveness: true}},
		{name: "liveness successThreshold defaulted", probe: execProbe("true"), opts: ProbeOptions{Liveness: true}},

		// Handler count.
		{name: "no handler", probe: corev1.Probe{PeriodSeconds: 5}, want: []wantErr{
			required("probe", "exactly one of exec, httpGet, tcpSocket or grpc must be set")}},
		{name: "exec and httpGet", probe: with(execProbe("true"), func(p *corev1.Probe) { p.HTTPGet = &corev1.HTTPGetAction{Port: port(80)} }), want: []wantErr{
			forbidden("probe.httpGet", "only one handler may be set, and exec is already set")}},
		{name: "tcpSocket and grpc", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: port(80)}, GRPC: &corev1.GRPCAction{Port: 80}}}, want: []wantErr{
			forbidden("probe.grpc", "tcpSocket is already set")}},
		{name: "all four", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}, HTTPGet: &corev1.HTTPGetAction{Port: port(80)},
			TCPSocket: &corev1.TCPSocketAction{Port: port(80)}, GRPC: &corev1.GRPCAction{Port: 80}}}, want: []wantErr{
			forbidden("probe.httpGet", "exec is already set"),
			forbidden("probe.tcpSocket", "exec is already set"),
			forbidden("probe.grpc", "exec is already set")}},

		// exec.
		{name: "exec no command", probe: execProbe(), want: []wantErr{
			required("probe.exec.command", "the command to run in the container")}},
		{name: "exec empty program", probe: execProbe("", "x"), want: []wantErr{
			invalid("probe.exec.command[0]", "must name the program to run")}},

		// httpGet.
		{name: "httpGet host", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Host = "169.254.169.254" }), want: []wantErr{
			forbidden("probe.httpGet.host", "must be empty (the probe goes to the pod's IP) or name the pod's own loopback")}},
		{name: "httpGet host naming the pod is still forbidden", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Host = podIP }), opts: ProbeOptions{PodIP: podIP}, want: []wantErr{
			forbidden("probe.httpGet.host", "must be empty")}},
		{name: "httpGet absolute URL as path", probe: httpProbe("http://example.com/", port(80)), want: []wantErr{
			invalid("probe.httpGet.path", "must be a path such as /healthz, not a URL")}},
		{name: "httpGet path starting with //", probe: httpProbe("//example.com/x", port(80)), want: []wantErr{
			invalid("probe.httpGet.path", "must not start with '//'")}},
		{name: "httpGet path control character", probe: httpProbe("/a\x7fb", port(80)), want: []wantErr{
			invalid("probe.httpGet.path", "must be a valid URL path")}},
		{name: "httpGet scheme", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Scheme = "ftp" }), want: []wantErr{
			notSupported("probe.httpGet.scheme", `supported values: "HTTP", "HTTPS"`)}},
		{name: "httpGet header name", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "X Probe", Value: "1"}), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].name", "a valid HTTP header must consist of alphanumeric characters or '-'")}},
		{name: "httpGet header name empty", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "", Value: "1"}), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].name", "a valid HTTP header")}},
		{name: "httpGet header value with newline", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "X-A", Value: "1\r\nX-B: 2"}), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "must not contain carriage return, line feed or NUL")}},

		// Host header.
		// A Host header names any host, as with the kubelet: it only sets the header, never where
		// the probe connects (prober.TestHTTPHostHeaderNeverRedirects).
		{name: "Host virtual host", probe: httpProbe("/", port(80), hostHeader("example.com"))},
		{name: "Host virtual host with port", probe: httpProbe("/", port(80), corev1.HTTPHeader{Name: "hOsT", Value: "App_1.example.com:8443"})},
		{name: "Host another IP", probe: httpProbe("/", port(80), hostHeader("10.244.1.8")), opts: ProbeOptions{PodIP: podIP}},
		{name: "Host empty", probe: httpProbe("/", port(80), hostHeader(""))},
		{name: "Host localhost with bad port", probe: httpProbe("/", port(80), hostHeader("localhost:0")), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "a Host header must be a host name or IP address, optionally with a port (1-65535)")}},
		{name: "Host localhost with named port", probe: httpProbe("/", port(80), hostHeader("localhost:http")), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "a Host header must be")}},
		{name: "Host with zone", probe: httpProbe("/", port(80), hostHeader("[fe80::1%eth0]:80")), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "a Host header must be")}},
		{name: "Host user info", probe: httpProbe("/", port(80), hostHeader("localhost@example.com")), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "a Host header must be")}},
		{name: "Host with a path", probe: httpProbe("/", port(80), hostHeader("example.com/x")), want: []wantErr{
			invalid("probe.httpGet.httpHeaders[0].value", "a Host header must be")}},

		// v1.37 probe modes: accepted as the kubelet accepts them; unknown values are refused.
		{name: "HTTP/2 (h2c)", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Protocol = ptr(corev1.HTTPProtocolHTTP2) })},
		{name: "HTTP/2 with scheme http", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) {
			p.HTTPGet.Protocol, p.HTTPGet.Scheme = ptr(corev1.HTTPProtocolHTTP2), "http"
		})},
		{name: "HTTP/2 with HTTPS", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) {
			p.HTTPGet.Protocol, p.HTTPGet.Scheme = ptr(corev1.HTTPProtocolHTTP2), "HTTPS"
		}), want: []wantErr{invalid("probe.httpGet.protocol", "HTTP2 is HTTP/2 over cleartext (h2c) and needs scheme HTTP")}},
		{name: "HTTP/2 with a host", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) {
			p.HTTPGet.Protocol, p.HTTPGet.Host = ptr(corev1.HTTPProtocolHTTP2), "localhost"
		}), want: []wantErr{invalid("probe.httpGet.host", `must be empty when protocol is "HTTP2"`)}},
		{name: "HTTP protocol unknown", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Protocol = ptr(corev1.HTTPProtocol("HTTP3")) }), want: []wantErr{
			notSupported("probe.httpGet.protocol", `supported values: "HTTP1", "HTTP2"`)}},
		{name: "HTTP1 explicitly", probe: with(httpProbe("/", port(80)), func(p *corev1.Probe) { p.HTTPGet.Protocol = ptr(corev1.HTTPProtocolHTTP1) })},
		{name: "gRPC TLS", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Mode: ptr(corev1.GRPCProbeModeTLS)}}}},
		{name: "gRPC mode unknown", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Mode: ptr(corev1.GRPCProbeMode("mTLS"))}}}, want: []wantErr{
			notSupported("probe.grpc.mode", `supported values: "Plaintext", "TLS"`)}},
		{name: "gRPC Plaintext explicitly", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Mode: ptr(corev1.GRPCProbeModePlaintext)}}}},

		// Ports.
		{name: "httpGet port missing", probe: httpProbe("/", intstr.IntOrString{}), want: []wantErr{
			required("probe.httpGet.port", "a port number (1-65535) or a container port name")}},
		{name: "httpGet port too big", probe: httpProbe("/", port(65536)), want: []wantErr{
			invalid("probe.httpGet.port", "must be between 1 and 65535, inclusive")}},
		{name: "httpGet port negative", probe: httpProbe("/", port(-1)), want: []wantErr{
			invalid("probe.httpGet.port", "must be between 1 and 65535, inclusive")}},
		{name: "httpGet port quoted number", probe: httpProbe("/", name("8080")), want: []wantErr{
			invalid("probe.httpGet.port", "must be written as a number, not a string")}},
		{name: "httpGet port name empty", probe: httpProbe("/", name("")), want: []wantErr{
			required("probe.httpGet.port", "a port number")}},
		{name: "httpGet port name upper case", probe: httpProbe("/", name("HTTP")), want: []wantErr{
			invalid("probe.httpGet.port", "not a valid container port name: must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
			invalid("probe.httpGet.port", "not a valid container port name: must contain at least one letter (a-z)")}},
		{name: "tcpSocket port name too long", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: name("a-very-long-port-name")}}}, want: []wantErr{
			invalid("probe.tcpSocket.port", "not a valid container port name: must be no more than 15 characters")}},
		{name: "tcpSocket host", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port(22), Host: "10.0.0.1"}}}, want: []wantErr{
			forbidden("probe.tcpSocket.host", "must be empty (the probe goes to the pod's IP) or name the pod's own loopback")}},
		{name: "tcpSocket port zero", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port(0)}}}, want: []wantErr{
			required("probe.tcpSocket.port", "")}},
		{name: "grpc port zero", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{}}}, want: []wantErr{
			required("probe.grpc.port", "a port number between 1 and 65535")}},
		{name: "grpc port too big", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 70000}}}, want: []wantErr{
			invalid("probe.grpc.port", "must be between 1 and 65535, inclusive")}},

		// Timing.
		{name: "negative timing", probe: with(execProbe("true"), func(p *corev1.Probe) {
			p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold = -1, -2, -3, -4, -5
		}), want: []wantErr{
			invalid("probe.initialDelaySeconds", "must be greater than or equal to 0"),
			invalid("probe.timeoutSeconds", "must be greater than or equal to 0"),
			invalid("probe.periodSeconds", "must be greater than or equal to 0"),
			invalid("probe.successThreshold", "must be greater than or equal to 0"),
			invalid("probe.failureThreshold", "must be greater than or equal to 0")}},
		{name: "liveness successThreshold 2", probe: with(execProbe("true"), func(p *corev1.Probe) { p.SuccessThreshold = 2 }), opts: ProbeOptions{Liveness: true}, want: []wantErr{
			invalid("probe.successThreshold", "must be 1 for a liveness probe")}},
		{name: "non-liveness successThreshold 2", probe: with(execProbe("true"), func(p *corev1.Probe) { p.SuccessThreshold = 2 })},
		{name: "liveness terminationGracePeriodSeconds zero", probe: with(execProbe("true"), func(p *corev1.Probe) { p.TerminationGracePeriodSeconds = ptr[int64](0) }),
			opts: ProbeOptions{Liveness: true}, want: []wantErr{invalid("probe.terminationGracePeriodSeconds", "must be greater than 0 when set")}},
		// A marker probe never kills: OpenKruise accepts 0 there.
		{name: "non-liveness terminationGracePeriodSeconds zero", probe: with(execProbe("true"), func(p *corev1.Probe) { p.TerminationGracePeriodSeconds = ptr[int64](0) })},
		{name: "terminationGracePeriodSeconds negative", probe: with(execProbe("true"), func(p *corev1.Probe) { p.TerminationGracePeriodSeconds = ptr[int64](-1) }), want: []wantErr{
			invalid("probe.terminationGracePeriodSeconds", "must be greater than 0 when set")}},

		// Several problems are all reported.
		{name: "several", probe: with(httpProbe("//x", port(0), hostHeader("ev il")), func(p *corev1.Probe) { p.HTTPGet.Host = "evil"; p.PeriodSeconds = -1 }), want: []wantErr{
			forbidden("probe.httpGet.host", ""),
			invalid("probe.httpGet.path", ""),
			required("probe.httpGet.port", ""),
			invalid("probe.httpGet.httpHeaders[0].value", ""),
			invalid("probe.periodSeconds", "")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, ValidateProbe(&tc.probe, tc.opts, field.NewPath("probe")), tc.want...)
		})
	}
}

func TestValidateProbeNil(t *testing.T) {
	checkErrs(t, ValidateProbe(nil, ProbeOptions{}, field.NewPath("spec", "probe")), required("spec.probe", "a probe is required"))
}

// The rendered message is what a user reads in kubectl's output; pin one in full.
func TestValidateProbeMessage(t *testing.T) {
	p := httpProbe("/", intstr.FromInt32(80), hostHeader("a@169.254.169.254"))
	errs := ValidateProbe(&p, ProbeOptions{PodIP: "10.244.1.7"}, field.NewPath("spec", "probes").Index(0).Child("probe"))
	const want = `spec.probes[0].probe.httpGet.httpHeaders[0].value: Invalid value: "a@169.254.169.254": ` +
		`a Host header must be a host name or IP address, optionally with a port (1-65535), e.g. app.example.com:8080`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
}
