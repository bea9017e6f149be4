// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// fakeRuntime is containerd as far as the proxy can tell: CRI's generated
// server for the known methods, and an echo for every method it does not
// know (a newer CRI).
type fakeRuntime struct {
	criapi.UnimplementedRuntimeServiceServer

	mu          sync.Mutex
	versionReq  *criapi.VersionRequest
	incoming    metadata.MD
	unknownSeen [][]byte
	eventsDone  chan struct{} // closed when an open events stream was cut off
}

var bigResponse = &criapi.ListContainersResponse{Containers: func() []*criapi.Container {
	// About 10 MiB: over gRPC's default 4 MiB, under the kubelet's 16 MiB.
	var cs []*criapi.Container
	for i := range 10_000 {
		cs = append(cs, &criapi.Container{Id: fmt.Sprintf("%064d", i), Labels: map[string]string{"pad": strings.Repeat("x", 950)}})
	}
	return cs
}()}

func (f *fakeRuntime) Version(ctx context.Context, req *criapi.VersionRequest) (*criapi.VersionResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.versionReq, f.incoming = req, md
	f.mu.Unlock()
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "from-runtime"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "from-runtime"))
	return &criapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: req.GetVersion()}, nil
}

func (f *fakeRuntime) RunPodSandbox(context.Context, *criapi.RunPodSandboxRequest) (*criapi.RunPodSandboxResponse, error) {
	return &criapi.RunPodSandboxResponse{PodSandboxId: "sandbox-1"}, nil
}

func (f *fakeRuntime) CreateContainer(context.Context, *criapi.CreateContainerRequest) (*criapi.CreateContainerResponse, error) {
	return &criapi.CreateContainerResponse{ContainerId: "ctr-1"}, nil
}

func (f *fakeRuntime) StartContainer(context.Context, *criapi.StartContainerRequest) (*criapi.StartContainerResponse, error) {
	return &criapi.StartContainerResponse{}, nil
}

// StopContainer fails for "stuck", with details, as a runtime may.
func (f *fakeRuntime) StopContainer(_ context.Context, req *criapi.StopContainerRequest) (*criapi.StopContainerResponse, error) {
	if req.GetContainerId() == "stuck" {
		st, _ := status.New(codes.FailedPrecondition, "container is stuck").WithDetails(&criapi.VersionResponse{Version: "a detail"})
		return nil, st.Err()
	}
	return &criapi.StopContainerResponse{}, nil
}

func (f *fakeRuntime) RemoveContainer(context.Context, *criapi.RemoveContainerRequest) (*criapi.RemoveContainerResponse, error) {
	return &criapi.RemoveContainerResponse{}, nil
}

func (f *fakeRuntime) ExecSync(context.Context, *criapi.ExecSyncRequest) (*criapi.ExecSyncResponse, error) {
	return &criapi.ExecSyncResponse{Stdout: []byte("ok\n"), ExitCode: 3}, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *criapi.ListContainersRequest) (*criapi.ListContainersResponse, error) {
	return bigResponse, nil
}

// GetContainerEvents sends three events, then either ends ("end" in the
// metadata) or holds the stream open until the caller goes away.
func (f *fakeRuntime) GetContainerEvents(_ *criapi.GetEventsRequest, s criapi.RuntimeService_GetContainerEventsServer) error {
	for i := range 3 {
		if err := s.Send(&criapi.ContainerEventResponse{ContainerId: fmt.Sprint("ctr-", i)}); err != nil {
			return err
		}
	}
	if md, _ := metadata.FromIncomingContext(s.Context()); len(md.Get("end")) > 0 {
		return nil
	}
	<-s.Context().Done()
	f.mu.Lock()
	if f.eventsDone != nil {
		close(f.eventsDone)
		f.eventsDone = nil
	}
	f.mu.Unlock()
	return s.Context().Err()
}

// unknown echoes any method the server does not know: each message it
// receives, once, or twice on a stream ("Chat"). emptypb keeps every byte
// as unknown fields and writes them back unchanged.
func (f *fakeRuntime) unknown(_ any, s grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(s)
	echoes := 1
	if strings.HasSuffix(method, "/Chat") {
		echoes = 2
	}
	for {
		var m emptypb.Empty
		if err := s.RecvMsg(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		b, _ := proto.Marshal(&m)
		f.mu.Lock()
		f.unknownSeen = append(f.unknownSeen, b)
		f.mu.Unlock()
		for range echoes {
			if err := s.SendMsg(&m); err != nil {
				return err
			}
		}
	}
}

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string)                         { r.mu.Lock(); r.got = append(r.got, s); r.mu.Unlock() }
func (r *recorder) Created(_ context.Context, id string) { r.add("created " + id) }
func (r *recorder) Started(_ context.Context, id string) { r.add("started " + id) }
func (r *recorder) Stopped(_ context.Context, id string) { r.add("stopped " + id) }
func (r *recorder) Removed(_ context.Context, id string) { r.add("removed " + id) }
func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

type env struct {
	fake     *fakeRuntime
	proxy    *Proxy
	socket   string // the proxy's
	upstream string
	obs      *recorder
	reg      *prometheus.Registry
	logs     *test.Hook
	conn     *grpc.ClientConn // a kubelet-like client of the proxy
}

// shortDir is a temporary folder with a path short enough for a socket.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "criproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startFake(t *testing.T, path string) *fakeRuntime {
	t.Helper()
	f := &fakeRuntime{}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnknownServiceHandler(f.unknown), grpc.MaxSendMsgSize(MaxMessageSize))
	criapi.RegisterRuntimeServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return f
}

func dialUnix(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	// As the kubelet dials its runtime: 16 MiB messages, no waiting for ready.
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newEnv(t *testing.T, withUpstream bool) *env {
	t.Helper()
	dir := shortDir(t)
	e := &env{socket: filepath.Join(dir, "cri.sock"), upstream: filepath.Join(dir, "containerd.sock"),
		obs: &recorder{}, reg: prometheus.NewRegistry()}
	if withUpstream {
		e.fake = startFake(t, e.upstream)
	}
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	e.logs = hook
	p, err := New(Options{
		Upstream: e.upstream, Observer: e.obs, Registerer: e.reg, Log: logrus.NewEntry(logger),
		Pods: func(id string) (Pod, bool) {
			if id == "ctr-1" || id == "stuck" {
				return Pod{Namespace: "shop", Name: "web-0", UID: "uid-1", Container: "app"}, true
			}
			return Pod{}, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	e.conn = dialUnix(t, e.socket)
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestKnownMethodsForwardedUnchanged(t *testing.T) {
	e := newEnv(t, true)
	rs := criapi.NewRuntimeServiceClient(e.conn)

	// A request with a field this CRI does not know (as from a newer
	// kubelet) reaches the runtime with it; metadata goes both ways.
	req := &criapi.VersionRequest{Version: "v1"}
	extra := protowire.AppendBytes(protowire.AppendTag(nil, 77, protowire.BytesType), []byte("newer field"))
	req.ProtoReflect().SetUnknown(extra)
	var header, trailer metadata.MD
	c := metadata.AppendToOutgoingContext(ctx(t), "x-kubelet", "asks")
	resp, err := rs.Version(c, req, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRuntimeName() != "fake" || resp.GetRuntimeVersion() != "v1" {
		t.Fatalf("response %v", resp)
	}
	e.fake.mu.Lock()
	got, in := e.fake.versionReq, e.fake.incoming
	e.fake.mu.Unlock()
	if !bytes.Equal(got.ProtoReflect().GetUnknown(), extra) {
		t.Fatalf("unknown field lost on the way: %x", got.ProtoReflect().GetUnknown())
	}
	if in.Get("x-kubelet")[0] != "asks" {
		t.Fatalf("request metadata not forwarded: %v", in)
	}
	if header.Get("x-header")[0] != "from-runtime" || trailer.Get("x-trailer")[0] != "from-runtime" {
		t.Fatalf("header %v, trailer %v", header, trailer)
	}

	// The response's bytes are the runtime's.
	direct := dialUnix(t, e.upstream)
	var viaProxy, viaDirect frame
	raw := proto.Clone(req)
	in1, _ := proto.Marshal(raw)
	for _, x := range []struct {
		conn *grpc.ClientConn
		out  *frame
	}{{e.conn, &viaProxy}, {direct, &viaDirect}} {
		if err := x.conn.Invoke(ctx(t), "/runtime.v1.RuntimeService/Version", &frame{b: in1}, x.out, grpc.ForceCodec(rawCodec{})); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(viaProxy.b, viaDirect.b) || len(viaProxy.b) == 0 {
		t.Fatalf("response bytes differ: proxy %x, direct %x", viaProxy.b, viaDirect.b)
	}

	// Bigger than gRPC's default limit, as ListContainers on a busy node.
	list, err := rs.ListContainers(ctx(t), &criapi.ListContainersRequest{})
	if err != nil || len(list.GetContainers()) != len(bigResponse.Containers) {
		t.Fatalf("big ListContainers: %d containers, %v", len(list.GetContainers()), err)
	}
}

func TestUnknownMethodsForwarded(t *testing.T) {
	e := newEnv(t, true)
	payload := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("SomethingNew"))
	payload = protowire.AppendVarint(protowire.AppendTag(payload, 200, protowire.VarintType), 42)

	// Unary: a method of a known service that this CRI does not have.
	var out frame
	err := e.conn.Invoke(ctx(t), "/runtime.v1.RuntimeService/SomethingNew", &frame{b: payload}, &out, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.b, payload) {
		t.Fatalf("got %x, want %x", out.b, payload)
	}
	e.fake.mu.Lock()
	seen := e.fake.unknownSeen
	e.fake.mu.Unlock()
	if len(seen) != 1 || !bytes.Equal(seen[0], payload) {
		t.Fatalf("runtime received %x, want %x", seen, payload)
	}

	// Streaming both ways, on a service nobody knows.
	s, err := e.conn.NewStream(ctx(t), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/runtime.v2.FutureService/Chat", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]byte{payload, {}, protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 7)} {
		if err := s.SendMsg(&frame{b: m}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			var got frame
			if err := s.RecvMsg(&got); err != nil || !bytes.Equal(got.b, m) {
				t.Fatalf("echo of %x: %x, %v", m, got.b, err)
			}
		}
	}
	_ = s.CloseSend()
	if err := s.RecvMsg(&frame{}); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if v := counter(e.proxy.metrics.calls.WithLabelValues("runtime.v2.FutureService", "Chat", "OK")); v != 1 {
		t.Fatalf("calls_total for the unknown stream = %v", v)
	}
}

func TestStatusPassesThrough(t *testing.T) {
	e := newEnv(t, true)
	rs := criapi.NewRuntimeServiceClient(e.conn)
	_, err := rs.StopContainer(ctx(t), &criapi.StopContainerRequest{ContainerId: "stuck", Timeout: 30})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "container is stuck" || len(st.Details()) != 1 {
		t.Fatalf("status %v, details %v", st, st.Details())
	}
	if d, ok := st.Details()[0].(*criapi.VersionResponse); !ok || d.GetVersion() != "a detail" {
		t.Fatalf("details %v", st.Details())
	}
	// Not implemented by the runtime: the runtime's own answer.
	_, err = rs.Attach(ctx(t), &criapi.AttachRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Attach: %v, want the runtime's Unimplemented", err)
	}

	if v := counter(e.proxy.metrics.calls.WithLabelValues(runtimeService, "StopContainer", "FailedPrecondition")); v != 1 {
		t.Fatalf("calls_total{StopContainer,FailedPrecondition} = %v", v)
	}
	warn := findLog(e.logs, "StopContainer")
	if warn == nil || warn.Level != logrus.WarnLevel || warn.Data["code"] != "FailedPrecondition" ||
		warn.Data["container_id"] != "stuck" || warn.Data["pod"] != "web-0" {
		t.Fatalf("log line of a failed stop: %+v", warn)
	}
	if len(e.obs.list()) != 0 {
		t.Fatalf("a failed stop was observed: %v", e.obs.list())
	}
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func series(t *testing.T, g prometheus.Gatherer, name string) int {
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func findLog(h *test.Hook, method string) *logrus.Entry {
	for _, l := range h.AllEntries() {
		if l.Data["method"] == method {
			return l
		}
	}
	return nil
}

func TestObserverAndLog(t *testing.T) {
	e := newEnv(t, true)
	rs := criapi.NewRuntimeServiceClient(e.conn)
	c := ctx(t)
	sb, err := rs.RunPodSandbox(c, &criapi.RunPodSandboxRequest{Config: &criapi.PodSandboxConfig{
		Metadata: &criapi.PodSandboxMetadata{Name: "web-0", Namespace: "shop", Uid: "uid-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := rs.CreateContainer(c, &criapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId()})
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error {
			_, err := rs.StartContainer(c, &criapi.StartContainerRequest{ContainerId: ct.GetContainerId()})
			return err
		},
		func() error {
			_, err := rs.ExecSync(c, &criapi.ExecSyncRequest{ContainerId: "ctr-1", Cmd: []string{"/bin/check", "--now"}, Timeout: 1})
			return err
		},
		func() error {
			_, err := rs.StopContainer(c, &criapi.StopContainerRequest{ContainerId: ct.GetContainerId(), Timeout: 30})
			return err
		},
		func() error {
			_, err := rs.RemoveContainer(c, &criapi.RemoveContainerRequest{ContainerId: ct.GetContainerId()})
			return err
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"started sandbox-1", "created ctr-1", "started ctr-1", "stopped ctr-1", "removed ctr-1"}
	poll.Eventually(t, 5*time.Second, func() error {
		if got := e.obs.list(); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("observed %v, want %v", got, want)
		}
		return nil
	})

	stop := findLog(e.logs, "StopContainer")
	if stop == nil || stop.Level != logrus.InfoLevel {
		t.Fatalf("no Info line for StopContainer: %+v", stop)
	}
	for k, v := range map[string]any{"container_id": "ctr-1", "namespace": "shop", "pod": "web-0", "pod_uid": "uid-1",
		"container": "app", "code": "OK", "timeout": int64(30), "service": runtimeService} {
		if stop.Data[k] != v {
			t.Errorf("StopContainer log %s = %#v, want %#v (%v)", k, stop.Data[k], v, stop.Data)
		}
	}
	if _, ok := stop.Data["duration"]; !ok {
		t.Errorf("StopContainer log has no duration: %v", stop.Data)
	}
	if x := findLog(e.logs, "ExecSync"); x == nil || x.Level != logrus.InfoLevel || x.Data["exit_code"] != int32(3) || x.Data["cmd"] != "/bin/check" ||
		x.Data["cmd_line"] != "/bin/check --now" {
		t.Errorf("ExecSync log: %+v", x)
	}
	if r := findLog(e.logs, "RunPodSandbox"); r == nil || r.Data["sandbox_id"] != "sandbox-1" || r.Data["pod"] != "web-0" {
		t.Errorf("RunPodSandbox log: %+v", r)
	}
	_, _ = rs.Version(c, &criapi.VersionRequest{})
	if v := findLog(e.logs, "Version"); v == nil || v.Level != logrus.DebugLevel {
		t.Errorf("Version should be logged at Debug: %+v", v)
	}
	if n := series(t, e.reg, "probeshim_cri_proxy_call_duration_seconds"); n < 6 {
		t.Errorf("duration histogram has %d series", n)
	}
}

// An exec's arguments may hold secrets: at Info the proxy logs the program
// alone, the whole command line only at Debug.
func TestExecArgumentsOnlyAtDebug(t *testing.T) {
	e := newEnv(t, true)
	e.proxy.log.Logger.SetLevel(logrus.InfoLevel)
	rs := criapi.NewRuntimeServiceClient(e.conn)
	c := context.Background()
	for _, call := range []func() error{
		func() error {
			_, err := rs.ExecSync(c, &criapi.ExecSyncRequest{ContainerId: "ctr-1", Cmd: []string{"/bin/login", "--password=hunter2"}, Timeout: 1})
			return err
		},
		func() error {
			_, err := rs.Exec(c, &criapi.ExecRequest{ContainerId: "ctr-1", Cmd: []string{"mysql", "-phunter2"}, Stdout: true})
			return err
		},
	} {
		_ = call()
	}
	for method, prog := range map[string]string{"ExecSync": "/bin/login", "Exec": "mysql"} {
		x := findLog(e.logs, method)
		if x == nil {
			t.Fatalf("no log line for %s", method)
		}
		if x.Data["cmd"] != prog {
			t.Errorf("%s log cmd = %v, want %s", method, x.Data["cmd"], prog)
		}
		if line, _ := x.String(); strings.Contains(line, "hunter2") {
			t.Errorf("%s log at %s holds an argument: %s", method, x.Level, line)
		}
	}
}

func TestServerStreaming(t *testing.T) {
	e := newEnv(t, true)
	rs := criapi.NewRuntimeServiceClient(e.conn)
	s, err := rs.GetContainerEvents(metadata.AppendToOutgoingContext(ctx(t), "end", "1"), &criapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.GetContainerId())
	}
	if fmt.Sprint(ids) != "[ctr-0 ctr-1 ctr-2]" {
		t.Fatalf("events %v", ids)
	}
}

// proxyGoroutines counts the proxy's call handlers still running.
func proxyGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("criproxy.(*Proxy).pump")) || bytes.Contains(g, []byte("criproxy.(*Proxy).forward")) {
			n++
		}
	}
	return n
}

func TestCutOffClientLeavesNothing(t *testing.T) {
	e := newEnv(t, true)
	done := make(chan struct{})
	e.fake.eventsDone = done
	c, cancel := context.WithCancel(context.Background())
	s, err := criapi.NewRuntimeServiceClient(e.conn).GetContainerEvents(c, &criapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if proxyGoroutines() == 0 {
		t.Fatal("no handler running for the open stream")
	}
	cancel()
	e.conn.Close() // the kubelet went away altogether
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the runtime's stream was not cut off")
	}
	poll.Eventually(t, 5*time.Second, func() error {
		if n := proxyGoroutines(); n > 0 {
			return fmt.Errorf("%d proxy goroutines left after the client went away", n)
		}
		return nil
	})
}

func TestShutdownEndsEventStreams(t *testing.T) {
	e := newEnv(t, true)
	s, err := criapi.NewRuntimeServiceClient(e.conn).GetContainerEvents(ctx(t), &criapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.proxy.Shutdown(sctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown waited %s on the kubelet's event stream", d)
	}
	for {
		if _, err = s.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("event stream ended with %v, want Unavailable (reconnect)", err)
	}
	if _, err := os.Stat(e.socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket the proxy made is still there after shutdown: %v", err)
	}
}

func TestUpstreamDown(t *testing.T) {
	e := newEnv(t, false)
	rs := criapi.NewRuntimeServiceClient(e.conn)
	_, viaProxy := rs.Version(ctx(t), &criapi.VersionRequest{})
	_, direct := criapi.NewRuntimeServiceClient(dialUnix(t, e.upstream)).Version(ctx(t), &criapi.VersionRequest{})
	if status.Code(viaProxy) != codes.Unavailable || status.Code(direct) != codes.Unavailable {
		t.Fatalf("containerd down: via the proxy %v, direct %v; want Unavailable for both", viaProxy, direct)
	}

	// containerd comes up: the next calls go through, without a restart.
	startFake(t, e.upstream)
	poll.Eventually(t, 10*time.Second, func() error {
		if _, err := rs.Version(ctx(t), &criapi.VersionRequest{}); err != nil {
			return fmt.Errorf("still failing after containerd came up: %w", err)
		}
		return nil
	})
}

func TestListen(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "run", "cri.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v", fi, err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o750 {
		t.Fatalf("folder mode %v", di.Mode())
	}
	// Served: a second Listen must not steal it.
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another process is serving it") {
		t.Fatalf("second Listen: %v", err)
	}
	// A file that is not a socket is left alone.
	other := filepath.Join(dir, "plain")
	_ = os.WriteFile(other, nil, 0o600)
	if _, err := Listen(other); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen on a plain file: %v", err)
	}

	// A stale socket (its process died without removing it) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ul, _ := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	ul.SetUnlinkOnClose(false)
	ul.Close()
	l2, err := Listen(stale)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	// Taken over meanwhile (systemd's socket unit binds the path anew):
	// closing must not remove the new owner's socket.
	os.Remove(stale)
	nl, _ := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	defer nl.Close()
	l2.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("closing removed a socket that was not its own: %v", err)
	}
	l.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("own socket left after Close: %v", err)
	}
}

func TestRefusesItselfAsUpstream(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "cri.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "containerd.sock")
	_ = os.Symlink(path, link)
	for _, up := range []string{path, link} {
		p, err := New(Options{Upstream: up})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Serve(l); err == nil || !strings.Contains(err.Error(), "its own upstream") {
			t.Errorf("upstream %s: %v, want a refusal", up, err)
		}
		p.Shutdown(context.Background())
	}
}

// TestActivated passes a socket as systemd does (fd 3, LISTEN_FDS,
// LISTEN_FDNAMES, LISTEN_PID) to a child process running activatedChild.
func TestActivated(t *testing.T) {
	if os.Getenv("CRIPROXY_ACTIVATED_CHILD") != "" {
		activatedChild(t)
		return
	}
	t.Setenv("LISTEN_PID", "")
	t.Setenv("LISTEN_FDS", "")
	if l, err := Activated(); l != nil || err != nil {
		t.Fatalf("without LISTEN_FDS: %v, %v", l, err)
	}

	path := filepath.Join(shortDir(t), "cri.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	f, err := ul.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, names := range []string{"cri", "something-else"} { // by name, or the only unix socket
		cmd := exec.Command(os.Args[0], "-test.run=^TestActivated$", "-test.v")
		cmd.ExtraFiles = []*os.File{f}
		cmd.Env = append(os.Environ(), "CRIPROXY_ACTIVATED_CHILD="+path, "LISTEN_FDS=1", "LISTEN_FDNAMES="+names)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "activated ok") {
			t.Fatalf("child with LISTEN_FDNAMES=%s: %v\n%s", names, err, out)
		}
	}
}

// activatedChild is the service's side: it finds the socket, serves a
// call on it and, closing it, leaves the file (systemd's) in place.
func activatedChild(t *testing.T) {
	path := os.Getenv("CRIPROXY_ACTIVATED_CHILD")
	os.Setenv("LISTEN_PID", fmt.Sprint(os.Getpid()))
	l, err := Activated()
	if err != nil || l == nil {
		t.Fatalf("Activated: %v, %v", l, err)
	}
	if l.Addr().String() != path {
		t.Fatalf("activated socket %s, want %s", l.Addr(), path)
	}
	if os.Getenv("LISTEN_FDS") != "" {
		t.Fatal("LISTEN_FDS left for children")
	}
	p, err := New(Options{Upstream: filepath.Join(filepath.Dir(path), "none.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); err != nil {
		t.Fatal(err)
	}
	_, err = criapi.NewRuntimeServiceClient(dialUnix(t, path)).Version(ctx(t), &criapi.VersionRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call through the activated socket: %v, want the upstream's Unavailable", err)
	}
	p.Shutdown(context.Background())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the activated socket was removed: %v", err)
	}
	fmt.Println("activated ok")
}
