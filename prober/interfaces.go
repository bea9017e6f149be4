// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package prober is probeshim's probe engine: exec, HTTP, TCP and gRPC health
// handlers, one worker per probe with the kubelet's result semantics, and a
// manager fed a desired set. It knows nothing of the API server; the node
// service plugs in runtime and network access through the interfaces below.
package prober

import (
	"context"
	"errors"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Result is a probe outcome. The zero value is Unknown.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// Key names one probe. Two probes on one container differ by Probe, so their
// results never collide.
type Key struct {
	PodUID    string
	Container string
	Probe     string
}

// PodRef is what the engine knows about a pod: enough to label metrics and
// logs and for a Network to pick the pod's network namespace.
type PodRef struct {
	UID         string
	Namespace   string
	Name        string
	IP          string
	HostNetwork bool
	// DeclaredPortsOnly asks the Network to refuse, for a pod on the host network, every port
	// the pod does not declare (a marker's probe; the pod's own liveness probes go where its
	// spec says, as the kubelet's do).
	DeclaredPortsOnly bool
}

// Desired is one probe the manager should run.
type Desired struct {
	Key  Key
	Pod  PodRef
	Spec corev1.Probe
	// ProbeType is the probe_type metrics label, e.g. "custom" or "liveness".
	ProbeType string
	// Ports maps the container's named ports to numbers, for httpGet and
	// tcpSocket probes that name a port. Optional.
	Ports map[string]int32
	// ReadFile, on an exec probe, is an absolute path inside the container
	// that the engine reads through its FileReader instead of running the
	// command: the caller sets it only where the command means exactly that
	// (`cat <path>`). Without a FileReader the command runs.
	ReadFile string
}

// Update is a published result of one probe. Result is Unknown from the
// moment a new container (ID) is seen until a run of its results reaches a
// threshold. Message is at most MaxMessage bytes of valid UTF-8: the exec
// output, or why a probe failed; empty for a plain network success. Time is
// when the result or message last changed.
type Update struct {
	Key     Key
	Result  Result
	Message string
	Time    time.Time
	// Reason, on an Unknown, says why the probe could not run: one of the Reason constants
	// (ErrorReasons), with Message the error's text. Empty for a result, and for an Unknown of a
	// container that is not running or is new.
	Reason string
	// Errored: an Unknown that says why the probe could not run (Reason, Message), while the
	// engine knows no result of it. A result its consumer kept from before (a previous run of the
	// service) is better than that. A refused target (ReasonTargetRefused) is not Errored: nothing
	// was probed, and no result kept from before stands for it.
	Errored bool
}

// ExecResult is the outcome of a command that ran to completion.
type ExecResult struct {
	ExitCode int
	// Output is stdout then stderr. Implementations should cap it; the engine
	// caps it again at MaxOutput.
	Output []byte
}

// ErrExecTimeout is returned (possibly wrapped) by an Execer when the command
// outlived its timeout and was killed. The engine maps it to Failure; every
// other error is a probe error and is discarded.
var ErrExecTimeout = errors.New("exec probe timed out")

// Execer runs a command inside a container; it is called concurrently. On
// timeout it must kill the process and return ErrExecTimeout. Any other error
// (runtime unreachable, container gone) is a probe error. cmd must not be
// modified.
type Execer interface {
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error)
}

// ErrFileUnreadable is wrapped by a FileReader error that is the probe's
// result, as `cat` exiting 1 is: the file is missing, a directory, or not
// readable for the container's user. The probe fails with the error's text
// as its message. Every other error is a probe error and is discarded.
var ErrFileUnreadable = errors.New("file unreadable")

// ErrReadUnsupported is wrapped by a FileReader error that says it cannot
// read files as a container's user here (e.g. the process lacks the
// privileges); the engine then runs the probe's command instead.
var ErrReadUnsupported = errors.New("exec-free read not supported here")

// FileReader reads a file inside a container, resolved within the
// container's root and as the container's user, without starting a process
// there; it is called concurrently. It returns at most limit bytes. After
// timeout it returns an error wrapping ErrExecTimeout. A file it never reads
// without exec gives an error wrapping ErrReadRefused.
type FileReader interface {
	ReadFile(ctx context.Context, containerID, path string, limit int, timeout time.Duration) ([]byte, error)
}

// Dialer opens connections for HTTP, TCP and gRPC probes.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// AddressChecker is a Dialer that says before a probe whether it would refuse an address
// (host:port): the engine then makes the probe Unknown rather than Failed by a dial error.
type AddressChecker interface {
	CheckAddress(address string) error
}

// ErrRefused marks a network probe the engine or its Network will not dial: a host that is not
// the pod, a pod without an IP, an IP that is not the pod's own, or a port a hostNetwork pod
// does not declare. Such a probe is Unknown with the reason as its message (never Failure: a
// forged or incomplete entry must not make anyone restart a container), and nothing is dialled.
var ErrRefused = errors.New("probe refused")

// Network gives the dialer for a pod, e.g. one that dials inside the pod's
// network namespace. It is called before every network probe, so it should
// be cheap. An error wrapping ErrRefused makes the probe Unknown with that
// message; any other error is a probe error and is discarded (one wrapping
// ErrNamespaceGone or ErrRuntimeUnavailable says why).
type Network interface {
	DialerFor(pod PodRef) (Dialer, error)
}

// NetworkFunc adapts a function to Network.
type NetworkFunc func(pod PodRef) (Dialer, error)

func (f NetworkFunc) DialerFor(pod PodRef) (Dialer, error) { return f(pod) }

// HostNetwork dials from the host's network namespace. It is the default.
var HostNetwork Network = NetworkFunc(func(PodRef) (Dialer, error) { return hostDialer, nil })

var hostDialer = &net.Dialer{}

// ContainerStatus is the runtime's view of one container.
type ContainerStatus struct {
	ID        string
	Running   bool
	StartedAt time.Time
}

// ContainerSource answers from memory (kept current from runtime events); it is
// called before every probe, so it must not call the runtime.
type ContainerSource interface {
	Container(podUID, containerName string) (ContainerStatus, bool)
}
