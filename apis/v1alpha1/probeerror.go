// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import "strings"

// A probe that could not run is Unknown in NodePodProbe status with a message that gives the reason
// first, "probe error (CommandNotFound): exec: ...": the node service writes it (ProbeErrorMessage),
// the cluster part reads the reason back for the pod condition (ParseProbeError). The message
// carries it because the status, OpenKruise's, has no reason field.
const probeErrorPrefix = "probe error ("

// EventReasonProbeError is the reason of the Warning event on a pod whose probe became Unknown
// because it could not run.
const EventReasonProbeError = "ProbeError"

// maxProbeErrorReason bounds a reason read back from a message.
const maxProbeErrorReason = 64

// ProbeErrorMessage is the status message of a probe that could not run: "probe error (<reason>):
// <detail>", or without ": <detail>" when detail is empty. reason is a CamelCase word (the
// engine's, e.g. CommandNotFound); another is written as EventReasonProbeError, so that every
// message this makes parses.
func ProbeErrorMessage(reason, detail string) string {
	if !validProbeErrorReason(reason) {
		reason = EventReasonProbeError
	}
	if detail == "" {
		return probeErrorPrefix + reason + ")"
	}
	return probeErrorPrefix + reason + "): " + detail
}

// ParseProbeError returns the reason and detail of a message ProbeErrorMessage made; ok is false
// for any other message. Only a probe's Unknown state comes from the node service's engine: a
// Succeeded or Failed message is what the probe printed, and must not be parsed.
func ParseProbeError(msg string) (reason, detail string, ok bool) {
	rest, found := strings.CutPrefix(msg, probeErrorPrefix)
	if !found {
		return "", "", false
	}
	reason, after, found := strings.Cut(rest, ")")
	if !found || !validProbeErrorReason(reason) {
		return "", "", false
	}
	if after == "" {
		return reason, "", true
	}
	detail, found = strings.CutPrefix(after, ": ")
	if !found {
		return "", "", false
	}
	return reason, detail, true
}

// validProbeErrorReason: an upper-case ASCII letter, then letters and digits, as Kubernetes'
// CamelCase reasons are.
func validProbeErrorReason(r string) bool {
	if r == "" || len(r) > maxProbeErrorReason || r[0] < 'A' || r[0] > 'Z' {
		return false
	}
	for i := 1; i < len(r); i++ {
		c := r[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
