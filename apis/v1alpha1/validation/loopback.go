// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A network probe goes to the pod IP, as the kubelet's does. Its host field may only name the
// pod's own loopback, which the node service then dials inside the pod's network namespace: a
// boundary of its own, since loopback-only endpoints are what `pods/portforward` guards. So a
// marker that names it passes a pods/portforward access check at admission.

// IsLoopbackHost reports whether a probe's host field names the pod's own loopback: 127.0.0.1
// (any 127/8 address), ::1 or localhost.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Zone() == "" && addr.Unmap().IsLoopback()
}

// NamesLoopback reports whether a probe or hook handler dials the pod's own loopback (its
// httpGet or tcpSocket host names it). gRPC has no host field: it always goes to the pod IP.
func NamesLoopback(h *corev1.ProbeHandler) bool {
	switch {
	case h.HTTPGet != nil:
		return IsLoopbackHost(h.HTTPGet.Host)
	case h.TCPSocket != nil:
		return IsLoopbackHost(h.TCPSocket.Host)
	}
	return false
}

const hostForbidden = "must be empty (the probe goes to the pod's IP) or name the pod's own loopback " +
	"(127.0.0.1, ::1 or localhost): the probe always targets the pod itself"

func validateHost(host string, fldPath *field.Path) field.ErrorList {
	if host == "" || IsLoopbackHost(host) {
		return nil
	}
	return field.ErrorList{field.Forbidden(fldPath, hostForbidden)}
}
