// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Size limits of everything a tenant writes that ends up in a per-node object.
//
// Every tenant's probes share one NodePodProbe per node, and etcd refuses an object over its request
// limit (1.5 MiB by default): past it, every write of that node's NodePodProbe fails, for every
// tenant, liveness included. So each field is bounded here (webhook and node service), and the
// cluster controller keeps each node's spec under a budget (default 512 KiB, see
// cluster/controller/nodepodprobe) with fairness between namespaces.
//
// The budget math, largest probe: an exec probe of MaxExecCommandBytes, or an httpGet of
// MaxHTTPPathLength plus MaxHTTPHeaderBytes, is under 7 KiB of JSON (plain text; characters JSON
// escapes cost more); the controller counts a probe at about twice its JSON plus its status, so
// a marker of MaxProbesPerMarker such probes costs under 470 KiB on one pod and fits an otherwise
// empty node's budget. A node's status (one state per probe, messages shared out of
// NodeStatusMessageBudget) keeps the stored object under 1 MiB when every probe the budget admits
// fails. The limits stay generous for real probes: kubelet probes are a few hundred bytes.
const (
	// MaxProbesPerMarker bounds spec.probes of a PodProbeMarker.
	MaxProbesPerMarker = 32
	// MaxProbeNameLength bounds a marker probe's name, in bytes; "<marker>#<probe>" names each
	// NodePodProbe entry and its status. OpenKruise sets no bound; 253 (an object name's) takes
	// every name its users write and keeps "<marker>#<probe>" within 507 bytes.
	MaxProbeNameLength = 253

	// MaxExecArgs bounds exec.command's argument count.
	MaxExecArgs = 64
	// MaxExecCommandBytes bounds exec.command's total size (all arguments), enough for a sh -c script.
	MaxExecCommandBytes = 4096

	// MaxHTTPPathLength bounds httpGet.path.
	MaxHTTPPathLength = 2048
	// MaxHTTPHeaders bounds httpGet.httpHeaders' count.
	MaxHTTPHeaders = 16
	// MaxHTTPHeaderNameLength bounds one header name.
	MaxHTTPHeaderNameLength = 128
	// MaxHTTPHeaderValueLength bounds one header value.
	MaxHTTPHeaderValueLength = 1024
	// MaxHTTPHeaderBytes bounds all header names and values of one probe together.
	MaxHTTPHeaderBytes = 4096

	// MaxGRPCServiceLength bounds grpc.service.
	MaxGRPCServiceLength = 256

	// MaxPolicyLabels and MaxPolicyAnnotations bound one markerPolicy entry's labels and annotations.
	MaxPolicyLabels      = 16
	MaxPolicyAnnotations = 16
	// MaxPolicyAnnotationValueLength bounds one markerPolicy annotation value.
	MaxPolicyAnnotationValueLength = 4096
	// MaxMarkerMetadataBytes bounds the keys and values of all markerPolicy labels and annotations of
	// one marker together: they all land on every selected pod, whose annotations may total 256 KiB.
	MaxMarkerMetadataBytes = 64 << 10

	// MaxProbeMessageBytes bounds one probe's status message (and a refusal reason, and the pod
	// condition message the cluster copies from it) as JSON-encoded bytes.
	MaxProbeMessageBytes = 1024
	// NodeStatusMessageBudget is what all messages of one node's status may take together: with many
	// probes each message gets an equal share (see MessageCap).
	NodeStatusMessageBudget = 192 << 10
	// MinProbeMessageBytes is the share below which a message is not cut further, so that even a
	// node at the spec budget's probe count says what failed. The spec budget keeps count*min small.
	MinProbeMessageBytes = 32
)

// MessageCap is the JSON-encoded size each of n messages of one node's status may take: the whole
// MaxProbeMessageBytes while the node has few probes, an equal share of NodeStatusMessageBudget
// when it has many, never below MinProbeMessageBytes.
func MessageCap(n int) int {
	if n <= 0 {
		return MaxProbeMessageBytes
	}
	return max(MinProbeMessageBytes, min(MaxProbeMessageBytes, NodeStatusMessageBudget/n))
}

// TruncateMessage cuts s so that its JSON encoding (without quotes) takes at most limit bytes,
// on a rune boundary, ending in "…" when cut. Invalid UTF-8 becomes U+FFFD, as encoding/json
// would make it. Counting encoded bytes matters: '<' alone encodes to 6.
func TruncateMessage(s string, limit int) string {
	const ellipsis = "…"
	if limit <= 0 {
		return ""
	}
	n := 0
	cut := -1 // byte index where the text must end so the ellipsis still fits
	for i, r := range s {
		w := jsonRuneLen(r)
		if cut < 0 && n+w > limit-len(ellipsis) {
			cut = i
		}
		if n+w > limit {
			if cut < 0 || limit < len(ellipsis) {
				return ""
			}
			return toValid(s[:cut]) + ellipsis
		}
		n += w
	}
	return toValid(s)
}

func toValid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, r) // range yields U+FFFD for every invalid byte
	}
	return string(out)
}

// jsonRuneLen is how many bytes encoding/json writes for r.
func jsonRuneLen(r rune) int {
	switch {
	case r == utf8.RuneError:
		return 3 // an invalid byte is written as U+FFFD too
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	default:
		return utf8.RuneLen(r)
	}
}

// validateHandlerBounds checks the sizes of a probe or preStop handler.
func validateHandlerBounds(h *corev1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e := h.Exec; e != nil {
		cPath := fldPath.Child("exec", "command")
		if len(e.Command) > MaxExecArgs {
			errs = append(errs, field.TooMany(cPath, len(e.Command), MaxExecArgs))
		}
		total := 0
		for _, a := range e.Command {
			total += len(a)
		}
		if total > MaxExecCommandBytes {
			errs = append(errs, tooLong(cPath, fmt.Sprintf("all arguments together may not be more than %d bytes (have %d); "+
				"put a longer script in the image and run that", MaxExecCommandBytes, total)))
		}
	}
	if g := h.HTTPGet; g != nil {
		gPath := fldPath.Child("httpGet")
		if len(g.Path) > MaxHTTPPathLength {
			errs = append(errs, field.TooLong(gPath.Child("path"), "", MaxHTTPPathLength))
		}
		hPath := gPath.Child("httpHeaders")
		if len(g.HTTPHeaders) > MaxHTTPHeaders {
			errs = append(errs, field.TooMany(hPath, len(g.HTTPHeaders), MaxHTTPHeaders))
		}
		total := 0
		for i, hdr := range g.HTTPHeaders {
			total += len(hdr.Name) + len(hdr.Value)
			if len(hdr.Name) > MaxHTTPHeaderNameLength {
				errs = append(errs, field.TooLong(hPath.Index(i).Child("name"), "", MaxHTTPHeaderNameLength))
			}
			if len(hdr.Value) > MaxHTTPHeaderValueLength {
				errs = append(errs, field.TooLong(hPath.Index(i).Child("value"), "", MaxHTTPHeaderValueLength))
			}
		}
		if total > MaxHTTPHeaderBytes {
			errs = append(errs, tooLong(hPath, fmt.Sprintf("all header names and values together may not be more than %d bytes (have %d)",
				MaxHTTPHeaderBytes, total)))
		}
	}
	if g := h.GRPC; g != nil && g.Service != nil && len(*g.Service) > MaxGRPCServiceLength {
		errs = append(errs, field.TooLong(fldPath.Child("grpc", "service"), "", MaxGRPCServiceLength))
	}
	return errs
}

// validateMarkerBounds checks the sizes of a PodProbeMarker spec that no single field check covers.
func validateMarkerBounds(spec *v1alpha1.PodProbeMarkerSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	probesPath := fldPath.Child("probes")
	if len(spec.Probes) > MaxProbesPerMarker {
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooMany, Field: probesPath.String(), BadValue: len(spec.Probes),
			Detail: fmt.Sprintf("must have at most %d probes; split them over several PodProbeMarkers", MaxProbesPerMarker)})
	}
	metadata := 0
	for i := range spec.Probes {
		p := &spec.Probes[i]
		pPath := probesPath.Index(i)
		if len(p.Name) > MaxProbeNameLength {
			errs = append(errs, field.TooLong(pPath.Child("name"), "", MaxProbeNameLength))
		}
		for j := range p.MarkerPolicy {
			pol := &p.MarkerPolicy[j]
			polPath := pPath.Child("markerPolicy").Index(j)
			if len(pol.Labels) > MaxPolicyLabels {
				errs = append(errs, field.TooMany(polPath.Child("labels"), len(pol.Labels), MaxPolicyLabels))
			}
			if len(pol.Annotations) > MaxPolicyAnnotations {
				errs = append(errs, field.TooMany(polPath.Child("annotations"), len(pol.Annotations), MaxPolicyAnnotations))
			}
			for k, v := range pol.Labels {
				metadata += len(k) + len(v)
			}
			for _, k := range sortedKeys(pol.Annotations) {
				v := pol.Annotations[k]
				metadata += len(k) + len(v)
				if len(v) > MaxPolicyAnnotationValueLength {
					errs = append(errs, field.TooLong(polPath.Child("annotations").Key(k), "", MaxPolicyAnnotationValueLength))
				}
			}
		}
	}
	if metadata > MaxMarkerMetadataBytes {
		errs = append(errs, tooLong(probesPath, fmt.Sprintf("the markerPolicy labels and annotations of all probes together may not be more than %d bytes (have %d): "+
			"they are written onto every selected pod", MaxMarkerMetadataBytes, metadata)))
	}
	return errs
}

// tooLong is a TooLong error with its own detail and without the value.
func tooLong(p *field.Path, detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeTooLong, Field: p.String(), BadValue: "", Detail: detail}
}

// maxBadValue is how much of a bad value an error repeats: a 1 MiB header value must not come
// back in a 1 MiB admission response, event or status message.
const maxBadValue = 128

// capBadValues shortens long string values in errs, in place.
func capBadValues(errs field.ErrorList) field.ErrorList {
	for _, e := range errs {
		if s, ok := e.BadValue.(string); ok && len(s) > maxBadValue {
			e.BadValue = TruncateMessage(s, maxBadValue)
		}
	}
	return errs
}
