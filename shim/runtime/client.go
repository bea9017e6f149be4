// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package runtime is probeshim's access to the container runtime on its
// node: the CRI API (over containerd's socket) to find a pod's sandbox,
// network namespace and containers; the containerd client (namespace k8s.io)
// to run exec probes as task execs; and a Tracker that keeps every
// container's state in memory from containerd's events, so probes never list
// containers.
//
// Errors wrap a small set of kinds, ErrNotFound and ErrUnavailable, so that
// callers branch with errors.Is; nothing the runtime returns makes a call
// panic.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/prober"
)

// Error kinds. Every error of this package that comes from the runtime
// wraps one of them (and the runtime's own error).
var (
	// ErrNotFound: the pod, sandbox, container or task does not exist (any
	// more).
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the runtime cannot be reached or did not answer in
	// time. It is the engine's prober.ErrRuntimeUnavailable, so that the
	// engine tells a probe error of the runtime's absence by its kind.
	ErrUnavailable = prober.ErrRuntimeUnavailable
)

const (
	// DefaultNamespace is the containerd namespace of CRI (Kubernetes)
	// containers.
	DefaultNamespace = "k8s.io"
	// maxMsgSize bounds CRI and containerd replies (a node's container list).
	maxMsgSize = 16 << 20
)

// socketCandidates are where containerd listens on the distributions
// probeshim targets; /var/run is a symlink to /run on most, not all.
var socketCandidates = []string{"/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock"}

// DefaultSocket returns the first containerd socket that exists, or the
// conventional path when none does (containerd may simply not be up yet).
// containerd serves CRI on the same socket.
func DefaultSocket() string {
	for _, p := range socketCandidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p
		}
	}
	return socketCandidates[0]
}

// Option configures a Client.
type Option func(*options)

type options struct {
	containerdSocket string
	criSocket        string
	namespace        string
	fifoDir          string
	log              *logrus.Entry
}

// WithContainerdSocket sets containerd's socket path (default: DefaultSocket).
func WithContainerdSocket(path string) Option { return func(o *options) { o.containerdSocket = path } }

// WithCRISocket sets the CRI socket path (default: containerd's socket).
func WithCRISocket(path string) Option { return func(o *options) { o.criSocket = path } }

// WithNamespace sets the containerd namespace (default k8s.io).
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithFIFODir makes exec output go through FIFOs made in dir rather than
// through pipes (see pipeio.go).
func WithFIFODir(dir string) Option { return func(o *options) { o.fifoDir = dir } }

// WithLogger sets the logger (default logrus' standard logger).
func WithLogger(l *logrus.Entry) Option { return func(o *options) { o.log = l } }

// Client talks to containerd and its CRI service. Connections are made
// lazily and re-made by gRPC when the runtime restarts, so New succeeds
// while containerd is down and calls fail with ErrUnavailable until it is
// back.
type Client struct {
	opts  options
	conns []*grpc.ClientConn
	cri   criapi.RuntimeServiceClient
	ctd   *containerd.Client
	log   *logrus.Entry

	mu       sync.Mutex
	targets  map[string]*execTarget // by container ID; see exec.go
	reads    chan struct{}          // file reads in flight; see readfile.go
	readWarn sync.Once
	// deletes are exec deletes that finish after their Exec returned.
	deletes sync.WaitGroup
	// pipes: exec output through pipes (pipeio.go) rather than FIFOs, unless
	// containerd is in another PID namespace or its shim is seen unable to
	// open them.
	pipes atomic.Bool
	// pidNSKnown: whether containerd shares our PID namespace has been told
	// (checkPIDNamespace).
	pidNSKnown atomic.Bool
	// exits delivers exec exits from the Tracker's event stream (exits.go).
	exits exitRouter
}

// New makes a Client. It does not wait for the runtime.
func New(opts ...Option) (*Client, error) {
	o := options{namespace: DefaultNamespace}
	for _, f := range opts {
		f(&o)
	}
	if o.containerdSocket == "" {
		o.containerdSocket = DefaultSocket()
	}
	if o.criSocket == "" {
		o.criSocket = o.containerdSocket
	}
	if o.log == nil {
		o.log = logrus.NewEntry(logrus.StandardLogger())
	}

	c := &Client{opts: o, log: o.log, targets: map[string]*execTarget{}, reads: make(chan struct{}, maxReadsInFlight)}
	c.pipes.Store(o.fifoDir == "")
	c.pidNSKnown.Store(o.fifoDir != "")
	c.checkPIDNamespace()
	ctdConn, err := dial(o.containerdSocket)
	if err != nil {
		return nil, err
	}
	c.conns = append(c.conns, ctdConn)
	criConn := ctdConn
	if o.criSocket != o.containerdSocket {
		if criConn, err = dial(o.criSocket); err != nil {
			c.Close()
			return nil, err
		}
		c.conns = append(c.conns, criConn)
	}
	c.cri = criapi.NewRuntimeServiceClient(criConn)
	// A default runtime is given so that NewWithConn makes no call now; it
	// is never used (probeshim creates no containers).
	c.ctd, err = containerd.NewWithConn(ctdConn, containerd.WithDefaultRuntime("io.containerd.runc.v2"))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd client: %w", err)
	}
	return c, nil
}

// checkPIDNamespace switches exec output to FIFOs when containerd, whose shims open the output
// paths, is in another PID namespace: told before an exec rather than by its failure. Until
// containerd answers on its socket, every exec asks again first; an exec the shim still cannot
// give its output to switches too (exec.go).
func (c *Client) checkPIDNamespace() {
	if c.pidNSKnown.Load() {
		return
	}
	shared, err := sharesPIDNamespace(c.opts.containerdSocket)
	if errors.Is(err, errNotServed) {
		return
	}
	if c.pidNSKnown.Swap(true) {
		return
	}
	if err != nil {
		// Asked once: pipes, and the switch on a failed start stays.
		c.log.WithError(err).Warn("cannot tell whether containerd shares this PID namespace; exec output goes through pipes until a shim cannot open them")
		return
	}
	if !shared {
		c.pipes.Store(false)
		c.log.WithField("socket", c.opts.containerdSocket).Info("containerd runs in another PID namespace: exec output goes through FIFOs")
	}
}

func dial(socket string) (*grpc.ClientConn, error) {
	bc := backoff.DefaultConfig
	// Reconnect within a few seconds of a containerd restart, not gRPC's
	// default of up to two minutes.
	bc.MaxDelay = 3 * time.Second
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("runtime socket %s: %w", socket, err)
	}
	return conn, nil
}

// Close closes the connections. Call it once in-flight Execs have returned:
// an Exec deletes its process through these connections, before it returns
// or, when a child of the process holds its output open, afterwards; Close
// waits for those deletes (at most heldDeleteTimeout).
func (c *Client) Close() error {
	c.deletes.Wait()
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// ContainerdSocket and CRISocket are the socket paths in use.
func (c *Client) ContainerdSocket() string { return c.opts.containerdSocket }
func (c *Client) CRISocket() string        { return c.opts.criSocket }

// Ping checks that both containerd and its CRI service answer.
func (c *Client) Ping(ctx context.Context) error {
	if _, err := c.ctd.Version(ctx); err != nil {
		return wrapErr(err, "containerd version")
	}
	if _, err := c.cri.Version(ctx, &criapi.VersionRequest{}); err != nil {
		return wrapErr(err, "CRI version")
	}
	return nil
}

// nsCtx puts the containerd namespace on ctx.
func (c *Client) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, c.opts.namespace)
}

// wrapErr adds the kind (ErrNotFound, ErrUnavailable) that err is of, if
// any, and what was being done.
func wrapErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	if kind := kindOf(err); kind != nil {
		return fmt.Errorf("%s: %w: %w", what, kind, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// shimClosed ends the error containerd 2.x answers a call on a task with
// while the task's shim has just exited (its container stopped) and the task
// is not yet deleted; 1.6 answers NotFound. The task is gone either
// way: never a runtime outage, which is Unavailable.
const shimClosed = "ttrpc: closed"

func kindOf(err error) error {
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable):
		return nil // already has one
	case errdefs.IsNotFound(err):
		return ErrNotFound
	case errdefs.IsUnavailable(err), errors.Is(err, context.DeadlineExceeded):
		return ErrUnavailable
	case strings.HasSuffix(err.Error(), shimClosed):
		return ErrNotFound
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.NotFound:
			return ErrNotFound
		case codes.Unavailable, codes.DeadlineExceeded:
			return ErrUnavailable
		}
	}
	return nil
}
