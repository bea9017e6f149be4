// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package validation checks PodProbeMarker, NodePodProbe and ContainerRecreateRequest objects
// beyond what the CRD schema can say. The admission webhook calls it to reject bad objects with a
// message a person can act on, and the node service calls it again before it runs anything, so a
// NodePodProbe or ContainerRecreateRequest written past the webhook cannot make a node probe or
// call anything but the pod itself.
//
// Every function returns a field.ErrorList whose paths point at the offending field.
package validation

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ProbeOptions says what a probe is aimed at and what it is used for.
type ProbeOptions struct {
	// PodIP is the IP of the probed pod, empty when the pod is not known yet (a PodProbeMarker covers
	// many pods). Nothing depends on it since a Host header may name any host: it never changes
	// where the probe connects.
	PodIP string
	// Liveness marks a probe whose failure restarts the container. As with the kubelet, its
	// successThreshold must be 1: a single success ends a run of failures.
	Liveness bool
}

// ValidateProbe checks a probe spec: exactly one handler, a sane target, non-negative timing.
//
// A probe always runs against the pod itself: its IP, or, when the host field names it, its own
// loopback inside its network namespace (see NamesLoopback); any other host is forbidden. A Host
// header may name any host (a virtual host of the pod's server), as with the kubelet: it only sets
// the header, never where the probe connects.
//
// The v1.37 probe modes (httpGet.protocol HTTP2, h2c; grpc.mode TLS) are accepted as the kubelet
// accepts them behind its gates; unknown values are refused: ignoring them would probe something
// else than the user asked.
func ValidateProbe(probe *corev1.Probe, opts ProbeOptions, fldPath *field.Path) field.ErrorList {
	if probe == nil {
		return field.ErrorList{field.Required(fldPath, "a probe is required")}
	}
	errs := validateHandler(&probe.ProbeHandler, fldPath)
	errs = append(errs, nonNegative(int64(probe.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	errs = append(errs, nonNegative(int64(probe.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	errs = append(errs, nonNegative(int64(probe.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	errs = append(errs, nonNegative(int64(probe.SuccessThreshold), fldPath.Child("successThreshold"))...)
	errs = append(errs, nonNegative(int64(probe.FailureThreshold), fldPath.Child("failureThreshold"))...)
	// Zero means "default" (1) for successThreshold, as everywhere in the probe spec.
	if opts.Liveness && probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), probe.SuccessThreshold,
			"must be 1 for a liveness probe"))
	}
	// The kubelet refuses 0 on a liveness probe (the only probe whose failure kills). A marker's
	// probe never kills, so OpenKruise accepts and ignores it, and so does probeshim.
	if g := probe.TerminationGracePeriodSeconds; g != nil && *g <= 0 && (opts.Liveness || *g < 0) {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *g,
			"must be greater than 0 when set; leave it unset to use the pod's grace period"))
	} else if g != nil {
		errs = append(errs, validateSeconds(*g, fldPath.Child("terminationGracePeriodSeconds"))...)
	}
	return errs
}

// DefaultMaxTimeoutSeconds is the default ceiling on a probe's timeoutSeconds: a check that takes
// longer is no health check, and each running probe holds one of its node's probe runners.
const DefaultMaxTimeoutSeconds = 30

// ValidateTimeoutCeiling refuses a probe whose timeoutSeconds is above maxSeconds (the
// cluster's ceiling; 0: none).
func ValidateTimeoutCeiling(probe *corev1.Probe, maxSeconds int32, fldPath *field.Path) field.ErrorList {
	if maxSeconds <= 0 || probe == nil || probe.TimeoutSeconds <= maxSeconds {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Child("timeoutSeconds"), probe.TimeoutSeconds, fmt.Sprintf(
		"must be at most %d, this cluster's ceiling on probe timeouts (probeshim-cluster --max-probe-timeout-seconds): a running probe holds one of its node's probe runners", maxSeconds))}
}

// validateHandler checks that exactly one handler is set and checks that handler. It serves both
// probes and preStop hooks (which have no grpc).
func validateHandler(h *corev1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	return capBadValues(append(validateHandlerTargets(h, fldPath), validateHandlerBounds(h, fldPath)...))
}

// validateHandlerTargets checks what a handler runs or dials, not its size.
func validateHandlerTargets(h *corev1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	var first string
	count := func(set bool, name string) bool {
		if !set {
			return false
		}
		if first != "" {
			errs = append(errs, field.Forbidden(fldPath.Child(name),
				"only one handler may be set, and "+first+" is already set"))
		} else {
			first = name
		}
		return true
	}
	if count(h.Exec != nil, "exec") {
		errs = append(errs, validateExec(h.Exec, fldPath.Child("exec"))...)
	}
	if count(h.HTTPGet != nil, "httpGet") {
		errs = append(errs, validateHTTPGet(h.HTTPGet, fldPath.Child("httpGet"))...)
	}
	if count(h.TCPSocket != nil, "tcpSocket") {
		errs = append(errs, validateTCPSocket(h.TCPSocket, fldPath.Child("tcpSocket"))...)
	}
	if count(h.GRPC != nil, "grpc") {
		errs = append(errs, validateGRPC(h.GRPC, fldPath.Child("grpc"))...)
	}
	if first == "" {
		errs = append(errs, field.Required(fldPath, "exactly one of exec, httpGet, tcpSocket or grpc must be set"))
	}
	return errs
}

func validateExec(exec *corev1.ExecAction, fldPath *field.Path) field.ErrorList {
	if len(exec.Command) == 0 {
		return field.ErrorList{field.Required(fldPath.Child("command"),
			`the command to run in the container, e.g. ["cat", "/tmp/healthy"]`)}
	}
	if exec.Command[0] == "" {
		return field.ErrorList{field.Invalid(fldPath.Child("command").Index(0), "", "must name the program to run")}
	}
	return nil
}

func validateHTTPGet(get *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	errs := validateHost(get.Host, fldPath.Child("host"))
	// A path without a leading '/' ("healthz") is what the kubelet accepts and requests as
	// "/healthz"; the node service builds the URL the same way (see prober.newHTTPRequest).
	if p := get.Path; p != "" {
		u, err := url.Parse(p)
		switch {
		case strings.HasPrefix(p, "//"):
			// A URL parser reads "//name/x" as a host name, never as a path.
			errs = append(errs, field.Invalid(fldPath.Child("path"), p, "must not start with '//'"))
		case err != nil:
			errs = append(errs, field.Invalid(fldPath.Child("path"), p, "must be a valid URL path: "+err.Error()))
		case u.Scheme != "" || u.Host != "":
			errs = append(errs, field.Invalid(fldPath.Child("path"), p,
				"must be a path such as /healthz, not a URL: the probe always goes to the pod"))
		}
	}
	errs = append(errs, validatePort(get.Port, fldPath.Child("port"))...)
	// The kubelet lowercases the scheme, so any case is accepted; empty means HTTP.
	if s := get.Scheme; s != "" {
		if u := corev1.URIScheme(strings.ToUpper(string(s))); u != corev1.URISchemeHTTP && u != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(fldPath.Child("scheme"), s,
				[]corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
	}
	for i, hdr := range get.HTTPHeaders {
		hdrPath := fldPath.Child("httpHeaders").Index(i)
		for _, msg := range utilvalidation.IsHTTPHeaderName(hdr.Name) {
			errs = append(errs, field.Invalid(hdrPath.Child("name"), hdr.Name, msg))
		}
		if strings.ContainsAny(hdr.Value, "\r\n\x00") {
			errs = append(errs, field.Invalid(hdrPath.Child("value"), hdr.Value,
				"must not contain carriage return, line feed or NUL characters"))
		}
		if http.CanonicalHeaderKey(hdr.Name) == "Host" && !validHostHeader(hdr.Value) {
			errs = append(errs, field.Invalid(hdrPath.Child("value"), hdr.Value,
				"a Host header must be a host name or IP address, optionally with a port (1-65535), e.g. app.example.com:8080"))
		}
	}
	return append(errs, validateHTTPProtocol(get, fldPath)...)
}

// validateHTTPProtocol accepts what the kubelet's H2CContainerProbe accepts: HTTP2 is h2c, HTTP
// only, and with no host (the kubelet refuses both).
func validateHTTPProtocol(get *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	pr := get.Protocol
	switch {
	case pr == nil || *pr == corev1.HTTPProtocolHTTP1:
		return nil
	case *pr != corev1.HTTPProtocolHTTP2:
		return field.ErrorList{field.NotSupported(fldPath.Child("protocol"), *pr,
			[]corev1.HTTPProtocol{corev1.HTTPProtocolHTTP1, corev1.HTTPProtocolHTTP2})}
	case strings.EqualFold(string(get.Scheme), string(corev1.URISchemeHTTPS)):
		return field.ErrorList{field.Invalid(fldPath.Child("protocol"), *pr,
			"HTTP2 is HTTP/2 over cleartext (h2c) and needs scheme HTTP, as with the kubelet; an HTTPS probe negotiates HTTP/2 by itself: leave protocol unset")}
	case get.Host != "":
		return field.ErrorList{field.Invalid(fldPath.Child("host"), get.Host,
			`must be empty when protocol is "HTTP2", as with the kubelet`)}
	}
	return nil
}

// refuseHookProtocol refuses protocol HTTP2 on a preStop hook: the kubelet runs lifecycle hooks
// over HTTP/1.1 whatever protocol says, so running it over h2c would differ from the kubelet and
// running it over HTTP/1.1 would be something else than asked.
func refuseHookProtocol(get *corev1.HTTPGetAction, fldPath *field.Path) field.ErrorList {
	if get == nil || get.Protocol == nil || *get.Protocol != corev1.HTTPProtocolHTTP2 {
		return nil
	}
	return field.ErrorList{field.Forbidden(fldPath.Child("httpGet", "protocol"),
		"HTTP2 (h2c) is for probes: the kubelet runs lifecycle hooks over HTTP/1.1; leave protocol unset")}
}

// validHostHeader reports whether value is a Host header value: an IP address or a host name
// (letters, digits, '-', '_' and '.'), with an optional port. Empty is accepted, as by the kubelet:
// the request then carries the address it connects to.
func validHostHeader(value string) bool {
	if value == "" {
		return true
	}
	host := value
	if h, port, err := net.SplitHostPort(value); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.Zone() == ""
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func validateTCPSocket(tcp *corev1.TCPSocketAction, fldPath *field.Path) field.ErrorList {
	errs := validateHost(tcp.Host, fldPath.Child("host"))
	return append(errs, validatePort(tcp.Port, fldPath.Child("port"))...)
}

func validateGRPC(g *corev1.GRPCAction, fldPath *field.Path) field.ErrorList {
	if m := g.Mode; m != nil && *m != corev1.GRPCProbeModePlaintext && *m != corev1.GRPCProbeModeTLS {
		e := field.NotSupported(fldPath.Child("mode"), *m, []corev1.GRPCProbeMode{corev1.GRPCProbeModePlaintext, corev1.GRPCProbeModeTLS})
		return append(field.ErrorList{e}, validateGRPCPort(g, fldPath)...)
	}
	return validateGRPCPort(g, fldPath)
}

func validateGRPCPort(g *corev1.GRPCAction, fldPath *field.Path) field.ErrorList {
	if g.Port == 0 {
		return field.ErrorList{field.Required(fldPath.Child("port"), "a port number between 1 and 65535")}
	}
	if len(utilvalidation.IsValidPortNum(int(g.Port))) > 0 {
		return field.ErrorList{field.Invalid(fldPath.Child("port"), g.Port, "must be between 1 and 65535, inclusive")}
	}
	return nil
}

// validatePort accepts a port number or the name of a container port (IANA_SVC_NAME), as the
// kubelet resolves them.
func validatePort(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch port.Type {
	case intstr.Int:
		if port.IntVal == 0 {
			return field.ErrorList{field.Required(fldPath, "a port number (1-65535) or a container port name")}
		}
		if len(utilvalidation.IsValidPortNum(int(port.IntVal))) > 0 {
			return field.ErrorList{field.Invalid(fldPath, port.IntVal, "must be between 1 and 65535, inclusive")}
		}
	case intstr.String:
		if port.StrVal == "" {
			return field.ErrorList{field.Required(fldPath, "a port number (1-65535) or a container port name")}
		}
		if _, err := strconv.Atoi(port.StrVal); err == nil {
			// The kubelet looks a string up by name and never parses it as a number.
			return field.ErrorList{field.Invalid(fldPath, port.StrVal,
				"a port number must be written as a number, not a string (drop the quotes)")}
		}
		var errs field.ErrorList
		for _, msg := range utilvalidation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath, port.StrVal, "not a valid container port name: "+msg))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(fldPath, port.String(), "must be a port number or a port name")}
	}
	return nil
}

func nonNegative(v int64, fldPath *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(fldPath, v, "must be greater than or equal to 0")}
	}
	return nil
}
