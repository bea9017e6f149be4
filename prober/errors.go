// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"
)

// Why a probe could not run, CamelCase like Kubernetes reasons: Update.Reason of its Unknown, and
// the reason label of probeshim_probe_errors_total. The set is closed, so the metric's series are
// bounded; ErrorReason returns one of them for any error.
const (
	// ReasonCommandNotFound: the exec probe's command does not exist in the container.
	ReasonCommandNotFound = "CommandNotFound"
	// ReasonPermissionDenied: the command, or a file the probe needed, may not be run or opened.
	ReasonPermissionDenied = "PermissionDenied"
	// ReasonNetworkNamespaceGone: the pod's network namespace is gone or was replaced (its
	// sandbox was removed or recreated).
	ReasonNetworkNamespaceGone = "NetworkNamespaceGone"
	// ReasonTargetRefused: a network probe the engine or its Network will not dial (ErrRefused).
	ReasonTargetRefused = "TargetRefused"
	// ReasonExecFreeReadRefused: an exec-free probe's file is one never read without exec
	// (ErrReadRefused).
	ReasonExecFreeReadRefused = "ExecFreeReadRefused"
	// ReasonRuntimeUnavailable: the container runtime could not be reached or did not answer.
	ReasonRuntimeUnavailable = "RuntimeUnavailable"
	// ReasonRuntimeError: any other error.
	ReasonRuntimeError = "RuntimeError"
)

var errorReasons = [...]string{ReasonCommandNotFound, ReasonPermissionDenied, ReasonNetworkNamespaceGone,
	ReasonTargetRefused, ReasonExecFreeReadRefused, ReasonRuntimeUnavailable, ReasonRuntimeError}

// ErrorReasons returns every reason ErrorReason gives.
func ErrorReasons() []string { return errorReasons[:] }

// ErrNamespaceGone is wrapped by an error of a Network, or of a Dialer it gave, when the pod's
// network namespace no longer exists (or its path names another one): the probe cannot run.
var ErrNamespaceGone = errors.New("network namespace not found")

// ErrRuntimeUnavailable is wrapped by an error of an Execer, FileReader or Network when the
// container runtime cannot be reached or did not answer in time.
var ErrRuntimeUnavailable = errors.New("runtime unavailable")

// ErrReadRefused is wrapped by a FileReader error for a file it never reads without exec (one of
// a kernel file system, a FIFO or a device): the probe cannot run, which is no result of it.
var ErrReadRefused = errors.New("exec-free read refused")

// ErrorReason says why a probe could not run ("" for no error): by the kind its error wraps, and by runc's words
// where the error is the runtime's text (an exec of a command that is not there).
func ErrorReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrRefused):
		return ReasonTargetRefused
	case errors.Is(err, ErrNamespaceGone):
		return ReasonNetworkNamespaceGone
	case errors.Is(err, ErrReadRefused):
		return ReasonExecFreeReadRefused
	case errors.Is(err, ErrRuntimeUnavailable):
		return ReasonRuntimeUnavailable
	case errors.Is(err, fs.ErrPermission):
		return ReasonPermissionDenied
	}
	switch lower := strings.ToLower(err.Error()); {
	// Not in $PATH, or a path that does not exist (`exec: "/bin/x": stat /bin/x: no such file`);
	// a runtime's own missing file (a FIFO under /proc) names no `exec: "`.
	case strings.Contains(lower, "executable file not found") ||
		(strings.Contains(lower, `exec: "`) && strings.Contains(lower, "no such file or directory")):
		return ReasonCommandNotFound
	case strings.Contains(lower, "permission denied"):
		return ReasonPermissionDenied
	}
	return ReasonRuntimeError
}

// NoResultYet is the message of a new container's Unknown until its first result (or error): not
// started, in its initialDelaySeconds, or its first run not done.
const NoResultYet = "no result yet"

// maxErrorDetail bounds the error text of an Unknown: runc's are a few hundred bytes, and the
// status adds the reason before it and may add a late start after it, within MaxMessage.
const maxErrorDetail = 512

// errorDetail is the message of a probe error: its text, cut to maxErrorDetail, and note.
func errorDetail(err error, note string) string {
	s := err.Error()
	if len(s) > maxErrorDetail {
		i := maxErrorDetail
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return s + note
}

// runStart is how a probe run began: how late after its scheduled time, and why it waited.
type runStart struct {
	late time.Duration
	why  string // set when late > LateAfter
}

// note says, for a run that started more than LateAfter late, by how much and why, for the
// message of a run that then errs or times out: the node, not the target, may be the cause.
// Whole seconds, so that a steadily late node does not change the message every run.
func (s runStart) note() string {
	if s.late <= LateAfter {
		return ""
	}
	return fmt.Sprintf(" (started %s late: %s)", s.late.Round(time.Second), s.why)
}
