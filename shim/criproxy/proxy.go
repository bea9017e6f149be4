// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package criproxy is the node service's optional CRI proxy: the kubelet's
// container runtime endpoint points at a socket the proxy serves, and the
// proxy forwards every call to containerd's CRI socket.
//
// Every call, of every service and method (a CRI newer than this code
// included), goes through one generic stream handler that moves the gRPC
// messages as raw bytes, with the metadata both ways and the status
// unchanged. Nothing is altered in flight. For the few calls that matter to
// probing the proxy decodes a copy of the request and the response once the
// runtime answered and tells an Observer (the node service's container
// tracker); it also counts, times and logs every call, so a person can see
// what the kubelet asked the runtime to do.
package criproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxMessageSize bounds one message each way. The kubelet allows 16 MiB
// (a busy node's ListContainers); the proxy allows more so that the
// kubelet's own limit, not the proxy's, decides, as without the proxy.
const MaxMessageSize = 64 << 20

// drainReason ends streams the kubelet holds open (GetContainerEvents)
// when the service stops: they would otherwise hold up a graceful stop to
// its deadline. The kubelet reconnects, to the socket that systemd queues.
const drainReason = "probeshim CRI proxy is restarting; reconnect"

// Observer learns what the kubelet had the runtime do, once the runtime did
// it: the IDs are of containers or pod sandboxes. Calls come from one
// goroutine, in the order the runtime answered; they may block briefly
// (they delay only later observations, never a kubelet call).
type Observer interface {
	Created(ctx context.Context, id string)
	Started(ctx context.Context, id string)
	Stopped(ctx context.Context, id string)
	Removed(ctx context.Context, id string)
}

// Pod names the pod a container or sandbox ID belongs to, for the log.
type Pod struct {
	Namespace, Name, UID string
	Container            string // "" for a sandbox
}

// Options configure a Proxy.
type Options struct {
	// Upstream is containerd's CRI socket.
	Upstream string
	// Observer, if not nil, is told of successful starts, stops and
	// removals.
	Observer Observer
	// Pods, if not nil, names the pod of a container or sandbox ID for the
	// log lines.
	Pods func(id string) (Pod, bool)
	// Registerer takes the proxy's metrics (default: none registered).
	Registerer prometheus.Registerer
	Log        *logrus.Entry
}

// Proxy is a CRI server that forwards to containerd.
type Proxy struct {
	opts     Options
	log      *logrus.Entry
	upstream *grpc.ClientConn
	server   *grpc.Server
	metrics  *metrics

	observations chan observation
	observeCtx   context.Context
	stopObserve  context.CancelFunc
	observeDone  chan struct{}

	mu       sync.Mutex
	calls    map[*call]struct{}
	draining atomic.Bool
	serving  sync.WaitGroup
}

// call is one call in flight, as far as shutdown needs to know it.
type call struct {
	cancel    context.CancelCauseFunc
	streaming atomic.Bool // sends the kubelet several messages
}

// New makes a Proxy. It does not connect to the upstream: the connection
// is made on the first call and re-made by gRPC after containerd restarts,
// and while containerd is down each call fails as it would without the
// proxy (Unavailable).
func New(o Options) (*Proxy, error) {
	if o.Log == nil {
		o.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	bc := backoff.DefaultConfig
	// Reconnect within seconds of a containerd restart, not gRPC's up to
	// two minutes: the kubelet is waiting.
	bc.MaxDelay = 3 * time.Second
	conn, err := grpc.NewClient("unix://"+o.Upstream,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
			grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("CRI proxy upstream %s: %w", o.Upstream, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		opts: o, log: o.Log, upstream: conn, metrics: m,
		observations: make(chan observation, 1024),
		observeCtx:   ctx, stopObserve: cancel, observeDone: make(chan struct{}),
		calls: map[*call]struct{}{},
	}
	p.server = grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(p.forward),
		grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
	)
	go p.observe()
	return p, nil
}

// Serve serves l in the background until Shutdown. It refuses a listener
// that is the upstream itself: the kubelet's calls would loop forever.
func (p *Proxy) Serve(l net.Listener) error {
	if err := CheckNotUpstream(l.Addr().String(), p.opts.Upstream); err != nil {
		return err
	}
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		if err := p.server.Serve(l); err != nil {
			p.log.WithError(err).Error("CRI proxy stopped serving")
		}
	}()
	return nil
}

// CheckNotUpstream returns an error when the socket at path and upstream
// are the same socket (by path, or the same file behind two paths).
func CheckNotUpstream(path, upstream string) error {
	same := normPath(path) == normPath(upstream)
	if !same {
		a, errA := os.Stat(path)
		b, errB := os.Stat(upstream)
		same = errA == nil && errB == nil && os.SameFile(a, b)
	}
	if same {
		return fmt.Errorf("CRI proxy socket %s is its own upstream (criSocket %s): calls would loop; point criSocket at containerd's socket", path, upstream)
	}
	return nil
}

// Shutdown stops accepting calls, ends the kubelet's event streams, waits
// for the calls in flight until ctx is done, then cuts the rest off and
// closes the upstream connection.
func (p *Proxy) Shutdown(ctx context.Context) {
	p.draining.Store(true)
	p.mu.Lock()
	for c := range p.calls {
		if c.streaming.Load() {
			c.cancel(errors.New(drainReason))
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		p.log.Warn("CRI proxy: calls still in flight at shutdown are cut off")
		p.server.Stop()
		<-done
	}
	p.serving.Wait()
	p.stopObserve()
	<-p.observeDone
	p.upstream.Close()
}

func (p *Proxy) track(c *call) func() {
	p.mu.Lock()
	p.calls[c] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.calls, c)
		p.mu.Unlock()
	}
}

// streamDesc treats every call as bidirectional: a unary call is one
// message each way, which a stream carries just the same.
var streamDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// forward is the handler of every call: it opens the same method upstream
// and copies messages both ways until the upstream ends the call, whose
// status it returns as it came.
func (p *Proxy) forward(_ any, down grpc.ServerStream) error {
	start := time.Now()
	method, ok := grpc.MethodFromServerStream(down)
	if !ok {
		return status.Error(codes.Internal, "CRI proxy: no method name on the stream")
	}
	info := lookupMethod(method)
	ctx, cancel := context.WithCancelCause(down.Context())
	defer cancel(nil)
	c := &call{cancel: cancel}
	c.streaming.Store(info.eventStream)
	defer p.track(c)()
	if info.eventStream && p.draining.Load() {
		cancel(errors.New(drainReason))
	}

	obs := &observed{info: info}
	err := p.pump(ctx, down, method, obs, c)
	if cause := context.Cause(ctx); errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		if cause != nil && cause.Error() == drainReason {
			err = status.Error(codes.Unavailable, drainReason)
		}
	}
	p.finish(info, obs, err, time.Since(start))
	return err
}

// pump copies the call both ways. Its error is the upstream's status (or
// the downstream's failure), returned to the kubelet unchanged.
func (p *Proxy) pump(ctx context.Context, down grpc.ServerStream, method string, obs *observed, c *call) error {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		// gRPC itself drops the headers that belong to the transport
		// (content-type, :authority, grpc-timeout, ...); the deadline
		// travels as ctx's.
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	up, err := p.upstream.NewStream(ctx, streamDesc, method)
	if err != nil {
		return err
	}

	// Kubelet to runtime, in its own goroutine: it ends when the kubelet
	// half-closes (then so does the upstream side) or the call ends.
	go func() {
		first := true
		for {
			var f frame
			if err := down.RecvMsg(&f); err != nil {
				if errors.Is(err, io.EOF) {
					_ = up.CloseSend() // a failed half-close ends the call, which Recv reports
				} else {
					c.cancel(err) // the kubelet went away: so does the upstream call
				}
				return
			}
			if first && obs.info.decodeRequest {
				obs.setRequest(f.b, p.opts.Pods)
			}
			first = false
			if err := up.SendMsg(&f); err != nil {
				return // the upstream ended the call; RecvMsg below has its status
			}
		}
	}()

	// Runtime to kubelet.
	md, err := up.Header()
	if err == nil && len(md) > 0 {
		if err := down.SendHeader(md); err != nil {
			return err
		}
	}
	sent := 0
	for {
		var f frame
		if err := up.RecvMsg(&f); err != nil {
			down.SetTrailer(up.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if sent == 0 && obs.info.decodeResponse {
			obs.setResponse(f.b)
		}
		if err := down.SendMsg(&f); err != nil {
			return err
		}
		if sent++; sent == 2 {
			// A second message: a stream the kubelet keeps open, to be
			// ended at shutdown rather than waited for.
			c.streaming.Store(true)
			if p.draining.Load() {
				c.cancel(errors.New(drainReason))
			}
		}
	}
}

// finish counts, logs and observes a call that ended.
func (p *Proxy) finish(info methodInfo, obs *observed, err error, took time.Duration) {
	code := status.Code(err)
	p.metrics.calls.WithLabelValues(info.service, info.method, code.String()).Inc()
	p.metrics.duration.WithLabelValues(info.service, info.method).Observe(took.Seconds())

	defer p.observeCall(obs, code)
	quiet := (code == codes.OK || code == codes.Canceled) && !info.logInfo
	debug := p.log.Logger.IsLevelEnabled(logrus.DebugLevel)
	if quiet && !debug {
		return // the kubelet's steady polling (ListContainers, ...): no log line to build
	}
	fields := obs.fields(debug)
	fields["service"], fields["method"] = info.service, info.method
	fields["code"], fields["duration"] = code.String(), took.Round(time.Microsecond).String()
	log := p.log.WithFields(fields)
	switch {
	case code != codes.OK && code != codes.Canceled:
		// Canceled is the kubelet giving up on a call, not the runtime
		// failing it.
		log.WithError(err).Warn("CRI call failed: " + info.method)
	case info.logInfo:
		log.Info("CRI call: " + info.method)
	default:
		log.Debug("CRI call: " + info.method)
	}
}

// observeCall queues what a successful call tells the Observer.
func (p *Proxy) observeCall(obs *observed, code codes.Code) {
	if code == codes.OK && p.opts.Observer != nil {
		if o, ok := obs.observation(); ok {
			select {
			case p.observations <- o:
			default:
				// The tracker learns it from containerd's events anyway.
				p.log.WithField("container_id", o.id).Debug("CRI proxy: observation queue full, dropped")
			}
		}
	}
}

// observe hands observations to the Observer, in order, until Shutdown.
func (p *Proxy) observe() {
	defer close(p.observeDone)
	for {
		select {
		case <-p.observeCtx.Done():
			return
		case o := <-p.observations:
			o.kind.apply(p.observeCtx, p.opts.Observer, o.id)
		}
	}
}

// splitMethod splits "/runtime.v1.RuntimeService/StopContainer".
func splitMethod(full string) (service, method string) {
	s, m, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return "unknown", full
	}
	return s, m
}
