// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/filters"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/prober"
)

// fakeCRI serves canned CRI answers on a unix socket; the sandbox "info"
// JSON is what containerd 1.6.20 returned (testdata/).
type fakeCRI struct {
	criapi.UnimplementedRuntimeServiceServer
	mu         sync.Mutex
	sandboxes  []*criapi.PodSandbox
	info       map[string]string // sandbox ID -> verbose info JSON
	hostNet    map[string]bool
	containers []*criapi.Container
	startedAt  map[string]int64
	calls      map[string]int
}

func (f *fakeCRI) count(m string) {
	f.mu.Lock()
	f.calls[m]++
	f.mu.Unlock()
}

func (f *fakeCRI) Version(context.Context, *criapi.VersionRequest) (*criapi.VersionResponse, error) {
	return &criapi.VersionResponse{RuntimeName: "fake"}, nil
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeCRI) ListPodSandbox(_ context.Context, r *criapi.ListPodSandboxRequest) (*criapi.ListPodSandboxResponse, error) {
	f.count("ListPodSandbox")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*criapi.PodSandbox
	for _, s := range f.sandboxes {
		if matches(s.Labels, r.GetFilter().GetLabelSelector()) {
			out = append(out, s)
		}
	}
	return &criapi.ListPodSandboxResponse{Items: out}, nil
}

func (f *fakeCRI) PodSandboxStatus(_ context.Context, r *criapi.PodSandboxStatusRequest) (*criapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sandboxes {
		if s.Id != r.PodSandboxId {
			continue
		}
		mode := criapi.NamespaceMode_POD
		if f.hostNet[s.Id] {
			mode = criapi.NamespaceMode_NODE
		}
		return &criapi.PodSandboxStatusResponse{
			Status: &criapi.PodSandboxStatus{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt,
				Network: &criapi.PodSandboxNetworkStatus{Ip: "10.88.0." + s.Id[:1], AdditionalIps: []*criapi.PodIP{{Ip: "fd00::" + s.Id[:1]}}},
				Linux:   &criapi.LinuxPodSandboxStatus{Namespaces: &criapi.Namespace{Options: &criapi.NamespaceOption{Network: mode}}}},
			Info: map[string]string{"info": f.info[s.Id]},
		}, nil
	}
	return nil, status.Error(codes.NotFound, "no such sandbox")
}

func (f *fakeCRI) ListContainers(_ context.Context, r *criapi.ListContainersRequest) (*criapi.ListContainersResponse, error) {
	f.count("ListContainers")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*criapi.Container
	for _, c := range f.containers {
		if matches(c.Labels, r.GetFilter().GetLabelSelector()) {
			out = append(out, c)
		}
	}
	return &criapi.ListContainersResponse{Containers: out}, nil
}

func (f *fakeCRI) ContainerStatus(_ context.Context, r *criapi.ContainerStatusRequest) (*criapi.ContainerStatusResponse, error) {
	f.count("ContainerStatus")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.Id == r.ContainerId {
			return &criapi.ContainerStatusResponse{Status: &criapi.ContainerStatus{Id: c.Id, State: c.State, CreatedAt: c.CreatedAt, StartedAt: f.startedAt[c.Id]}}, nil
		}
	}
	return nil, status.Error(codes.NotFound, "no such container")
}

func (f *fakeCRI) StopContainer(_ context.Context, r *criapi.StopContainerRequest) (*criapi.StopContainerResponse, error) {
	f.count("StopContainer")
	if r.Timeout < 2 {
		return nil, status.Error(codes.InvalidArgument, "grace below 2 s")
	}
	return &criapi.StopContainerResponse{}, nil
}

func serveFake(t *testing.T, f *fakeCRI) (sock string, stop func()) {
	t.Helper()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	sock = filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	criapi.RegisterRuntimeServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return sock, srv.Stop
}

func newFakeClient(t *testing.T, f *fakeCRI) (*Client, func()) {
	t.Helper()
	sock, stop := serveFake(t, f)
	c, err := New(WithContainerdSocket(sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, stop
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func podLabels(uid, ns, name string) map[string]string {
	return map[string]string{LabelPodUID: uid, LabelPodNamespace: ns, LabelPodName: name}
}

func ctrLabels(uid, name string) map[string]string {
	l := podLabels(uid, "default", "web-0")
	l[LabelContainerName] = name
	return l
}

func TestPodSandbox(t *testing.T) {
	podInfo := readTestdata(t, "sandbox-info-pod.json")
	f := &fakeCRI{
		sandboxes: []*criapi.PodSandbox{
			// An old, stopped sandbox of the same pod must not win over the
			// ready one, even though it is listed first.
			{Id: "old", State: criapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 300, Labels: podLabels("u1", "default", "web-0"),
				Metadata: &criapi.PodSandboxMetadata{Name: "web-0", Namespace: "default", Uid: "u1"}},
			{Id: "ready", State: criapi.PodSandboxState_SANDBOX_READY, CreatedAt: 200, Labels: podLabels("u1", "default", "web-0"),
				Metadata: &criapi.PodSandboxMetadata{Name: "web-0", Namespace: "default", Uid: "u1"}},
			{Id: "host", State: criapi.PodSandboxState_SANDBOX_READY, CreatedAt: 100, Labels: podLabels("u2", "kube-system", "agent"),
				Metadata: &criapi.PodSandboxMetadata{Name: "agent", Namespace: "kube-system", Uid: "u2"}},
			{Id: "garbage", State: criapi.PodSandboxState_SANDBOX_READY, CreatedAt: 100, Labels: podLabels("u3", "default", "x")},
			{Id: "stopped", State: criapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 100, Labels: podLabels("u4", "default", "y")},
		},
		info: map[string]string{
			"old": podInfo, "ready": podInfo, "stopped": podInfo,
			"host":    readTestdata(t, "sandbox-info-hostnetwork.json"),
			"garbage": `{"runtimeSpec": [not json`,
		},
		hostNet: map[string]bool{"host": true},
	}
	c, _ := newFakeClient(t, f)
	ctx := context.Background()

	sb, err := c.PodSandbox(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	const wantPath = "/tmp/psdev/state/io.containerd.grpc.v1.cri/netns/cni-8c69bb19-4061-22de-e8c1-95035e53ff7b"
	if sb.ID != "ready" || !sb.Ready || sb.HostNetwork || sb.NetNSPath != wantPath || sb.Name != "web-0" || sb.Namespace != "default" {
		t.Fatalf("PodSandbox(u1) = %+v", sb)
	}
	if p, host, ips, err := c.PodNetwork(ctx, "u1"); p != wantPath || host || fmt.Sprint(ips) != "[10.88.0.r fd00::r]" || err != nil {
		t.Fatalf("PodNetwork(u1) = %q %t %v %v", p, host, ips, err)
	}

	sb, err = c.PodSandbox(ctx, "u2")
	if err != nil || !sb.HostNetwork || sb.NetNSPath != "" {
		t.Fatalf("PodSandbox(hostNetwork) = %+v, %v", sb, err)
	}
	if p, host, ips, err := c.PodNetwork(ctx, "u2"); p != "" || !host || len(ips) != 0 || err != nil {
		t.Fatalf("PodNetwork(hostNetwork) = %q %t %v %v", p, host, ips, err)
	}

	// Unparsable info: no path, no panic; PodNetwork says not found, and the engine that the
	// namespace is gone.
	if sb, err := c.PodSandbox(ctx, "u3"); err != nil || sb.NetNSPath != "" {
		t.Fatalf("PodSandbox(garbage) = %+v, %v", sb, err)
	}
	for _, uid := range []string{"u3", "u4", "nope"} {
		_, _, _, err := c.PodNetwork(ctx, uid)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("PodNetwork(%s) = %v, want ErrNotFound", uid, err)
		}
		if r := prober.ErrorReason(err); r != prober.ReasonNetworkNamespaceGone {
			t.Errorf("PodNetwork(%s) = %v: reason %s, want %s", uid, err, r, prober.ReasonNetworkNamespaceGone)
		}
	}
	// The runtime's absence is the engine's kind too.
	if r := prober.ErrorReason(wrapErr(fmt.Errorf("%w: connection refused", ErrUnavailable), "exec in container c1")); r != prober.ReasonRuntimeUnavailable {
		t.Errorf("an unavailable runtime: reason %s", r)
	}
}

func TestNetNSPath(t *testing.T) {
	for _, tc := range []struct {
		info, want string
	}{
		{`{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}}`, "/var/run/netns/cni-1"},
		{`{"netNamespaceClosed":true,"runtimeSpec":{"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/cni-1"}]}}}`, ""},
		{`{"runtimeSpec":{"linux":{"namespaces":[{"type":"network"}]}}}`, ""},
		{`{"runtimeSpec":{"linux":null}}`, ""},
		{`{"runtimeSpec":null}`, ""},
		{`{}`, ""},
		{``, ""},
		{`[]`, ""},
		{`{"runtimeSpec":{"linux":{"namespaces":"x"}}}`, ""},
		// containerd 1.7's and 2.x's sandbox controllers add sandboxMetadata;
		// 2.x leaves runtimeSpec out of a sandbox it has no container of.
		{`{"runtimeSpec":null,"sandboxMetadata":{"Version":"v1","Metadata":{"NetNSPath":"/run/netns/cni-2"}}}`, "/run/netns/cni-2"},
		{`{"sandboxMetadata":{"Version":"v1","Metadata":{"NetNSPath":"/run/netns/cni-2"}}}`, "/run/netns/cni-2"},
		{`{"runtimeSpec":{"linux":{"namespaces":[{"type":"network","path":"/run/netns/a"}]}},"sandboxMetadata":{"Version":"v1","Metadata":{"NetNSPath":"/run/netns/b"}}}`, "/run/netns/a"},
		{`{"netNamespaceClosed":true,"sandboxMetadata":{"Version":"v1","Metadata":{"NetNSPath":"/run/netns/cni-2"}}}`, ""},
		{`{"sandboxMetadata":{"Version":"v9","Metadata":{"NetNSPath":"/run/netns/cni-2"}}}`, ""},
		{`{"sandboxMetadata":{"Version":"v1","Metadata":{"NetNSPath":""}}}`, ""},
	} {
		if got := netNSPath(map[string]string{"info": tc.info}); got != tc.want {
			t.Errorf("netNSPath(%s) = %q, want %q", tc.info, got, tc.want)
		}
	}
	if got := netNSPath(nil); got != "" {
		t.Errorf("netNSPath(nil) = %q", got)
	}
}

func TestPodContainers(t *testing.T) {
	f := &fakeCRI{
		containers: []*criapi.Container{
			{Id: "a0", State: criapi.ContainerState_CONTAINER_EXITED, CreatedAt: 100, Labels: ctrLabels("u1", "app"), Metadata: &criapi.ContainerMetadata{Name: "app"}},
			{Id: "a1", State: criapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 200, Labels: ctrLabels("u1", "app"), Metadata: &criapi.ContainerMetadata{Name: "app", Attempt: 1}},
			{Id: "b", State: criapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 150, Labels: ctrLabels("u2", "app")},
			// What the runtime may return and must not break anything.
			{Id: "", Labels: ctrLabels("u1", "x")},
			{Id: "nolabels", Labels: map[string]string{LabelPodUID: "u1"}},
			{Id: "bare"},
		},
		startedAt: map[string]int64{"a1": 1_700_000_000_000_000_000},
	}
	c, _ := newFakeClient(t, f)
	cs, err := c.PodContainers(context.Background(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ID != "a1" || cs[1].ID != "a0" {
		t.Fatalf("PodContainers = %+v", cs)
	}
	if !cs[0].Running() || !cs[0].StartedAt.Equal(time.Unix(0, 1_700_000_000_000_000_000)) || cs[0].Attempt != 1 || cs[0].Namespace != "default" || cs[0].PodName != "web-0" {
		t.Fatalf("running container = %+v", cs[0])
	}
	if cs[1].Running() || !cs[1].StartedAt.IsZero() {
		t.Fatalf("exited container = %+v", cs[1])
	}
}

func TestErrorKinds(t *testing.T) {
	f := &fakeCRI{}
	c, stop := newFakeClient(t, f)
	ctx := context.Background()
	if err := c.Ping(ctx); err == nil {
		// The fake serves CRI only; containerd's Version is unimplemented.
		t.Fatal("Ping succeeded without containerd")
	}
	if err := c.StopContainer(ctx, "x", 0); err != nil {
		t.Fatalf("StopContainer with a short grace: %v (grace must be raised to 2 s)", err)
	}
	stop()
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := c.PodSandbox(tctx, "u1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CRI down: %v, want ErrUnavailable", err)
	}
	if _, err := c.Exec(tctx, "c1", []string{"true"}, time.Second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("exec with containerd down: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("calls to a dead runtime took %s; they must fail fast", d)
	}

	for _, tc := range []struct {
		err  error
		kind error
	}{
		{status.Error(codes.NotFound, "x"), ErrNotFound},
		{status.Error(codes.Unavailable, "x"), ErrUnavailable},
		{status.Error(codes.DeadlineExceeded, "x"), ErrUnavailable},
		{errdefs.ErrNotFound, ErrNotFound},
		{errdefs.ErrUnavailable, ErrUnavailable},
		{context.DeadlineExceeded, ErrUnavailable},
		// containerd 2.x, a task whose shim just exited.
		{status.Error(codes.Unknown, "ttrpc: closed"), ErrNotFound},
		{fmt.Errorf("exec: %w", errors.New("ttrpc: closed")), ErrNotFound},
		{status.Error(codes.Internal, "x"), nil},
		{errors.New("x"), nil},
	} {
		err := wrapErr(tc.err, "doing")
		if tc.kind != nil && !errors.Is(err, tc.kind) {
			t.Errorf("wrapErr(%v) = %v, not %v", tc.err, err, tc.kind)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("wrapErr(%v) lost the cause", tc.err)
		}
		if tc.kind == nil && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable)) {
			t.Errorf("wrapErr(%v) = %v has a kind", tc.err, err)
		}
	}
	if wrapErr(nil, "x") != nil {
		t.Error("wrapErr(nil) != nil")
	}
}

func TestDefaultSocket(t *testing.T) {
	if s := DefaultSocket(); !slices.Contains(socketCandidates, s) {
		t.Fatalf("DefaultSocket() = %q", s)
	}
}

func TestCappedOutput(t *testing.T) {
	out, errb := &cappedBuffer{max: 8}, &cappedBuffer{max: 8}
	if n, err := out.Write([]byte("0123456789")); n != 10 || err != nil {
		t.Fatalf("Write = %d, %v: a capped writer must accept everything", n, err)
	}
	_, _ = out.Write([]byte("more"))
	_, _ = errb.Write([]byte("err"))
	if got := string(out.Bytes()); got != "01234567" {
		t.Fatalf("capped stdout = %q", got)
	}
	if got := string(joinOutput(out, errb)); got != "01234567err" {
		t.Fatalf("joined = %q", got)
	}
	big := &cappedBuffer{max: MaxExecOutput}
	_, _ = big.Write(make([]byte, MaxExecOutput))
	if got := joinOutput(big, errb); len(got) != MaxExecOutput {
		t.Fatalf("joined output is %d bytes, want the cap %d", len(got), MaxExecOutput)
	}
}

// pids lists the PIDs of refs and closes their pidfds.
func pids(refs []pidRef, err error) []int {
	defer closeRefs(refs)
	var out []int
	for _, r := range refs {
		out = append(out, r.pid)
	}
	return out
}

// startTree starts sh with two sleeping children and waits until both have
// exec'd sleep (a forked child shows the shell's command line until then).
func startTree(t *testing.T) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 31")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sleeping := func(ds []int) bool {
		for _, p := range ds {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if !strings.HasPrefix(string(b), "sleep") {
				return false
			}
		}
		return len(ds) == 2
	}
	var ds []int
	err := poll.Until(context.Background(), 3*time.Second, "sh's two children to exec sleep", func(context.Context) (bool, string, error) {
		ds = pids(descendants(cmd.Process.Pid, 0))
		return sleeping(ds), fmt.Sprintf("descendants %v", ds), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cmd, ds
}

func TestDescendants(t *testing.T) {
	cmd, ds := startTree(t)
	all := pids(descendants(os.Getpid(), 0))
	if !slices.Contains(all, cmd.Process.Pid) || !slices.Contains(all, ds[0]) {
		t.Errorf("descendants of the test = %v: sh or its children missing", all)
	}
	if d := pids(descendants(1<<30, 0)); len(d) != 0 {
		t.Errorf("descendants of a missing pid = %v", d)
	}
}

// A PID read from /proc/PID/task/TID/children may belong to another
// process by the time it is signalled: one that is not (or no longer) a
// child of the parent it was listed under, or that sits in a shallower PID
// namespace (the host's, for an exec in a container), is left alone.
func TestDescendantsRefuseReusedPIDs(t *testing.T) {
	cmd, ds := startTree(t)
	// The test process stands for a PID reused by an unrelated process:
	// listed under sh, it is not sh's child.
	if r, ok := openChild(os.Getpid(), cmd.Process.Pid, 1); ok {
		unix.Close(r.fd)
		t.Errorf("the test process was taken for a child of sh")
	}
	// A real child, but the exec ran one PID namespace deeper than it.
	_, depth, err := procStatus(ds[0])
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := openChild(ds[0], cmd.Process.Pid, depth+1); ok {
		unix.Close(r.fd)
		t.Errorf("a process of a shallower PID namespace was accepted")
	}
	if r, ok := openChild(ds[0], cmd.Process.Pid, depth); !ok {
		t.Errorf("sh's own child was refused")
	} else {
		unix.Close(r.fd)
	}
}

func TestKillDescendants(t *testing.T) {
	cmd, ds := startTree(t)
	// sh stands for the exec, its first child for a process the exec
	// started, and another child of the test for the container's first
	// process: a sibling of the exec, as both are children of the shim.
	sibling := exec.Command("sleep", "100")
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sibling.Process.Kill(); _ = sibling.Wait() })

	// The PID of an exec that exited, taken by another process: here sh
	// with sh's own child as the container's first process, so that the
	// parents differ. Nothing below it is touched.
	if n, err := killDescendants(cmd.Process.Pid, ds[1]); n != 0 || err == nil || !strings.Contains(err.Error(), "is no longer the exec") {
		t.Fatalf("killDescendants of a PID with another parent = %d, %v; want 0 and why", n, err)
	}
	for _, p := range ds {
		if err := syscall.Kill(p, 0); err != nil {
			t.Fatalf("process %d below a refused PID was killed: %v", p, err)
		}
	}
	n, err := killDescendants(cmd.Process.Pid, sibling.Process.Pid)
	if err != nil || n != 2 {
		t.Fatalf("killDescendants = %d, %v; want 2", n, err)
	}
	for _, p := range ds {
		eventuallyGone(t, p)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("sh itself was killed: %v", err)
	}
}

// The tree walk never starts at PID 1, the service or one of its ancestors:
// their descendants include the service and everything else. (It only asks;
// no process is signalled.)
func TestKillableRoot(t *testing.T) {
	for _, pid := range []int{-1, 0, 1, os.Getpid(), os.Getppid()} {
		if err := killableRoot(pid); err == nil {
			t.Errorf("killableRoot(%d) = nil, want a refusal", pid)
		}
	}
	cmd, _ := startTree(t)
	if err := killableRoot(cmd.Process.Pid); err != nil {
		t.Errorf("killableRoot(child %d) = %v, want nil", cmd.Process.Pid, err)
	}
}

// eventuallyGone waits for pid to exit (a zombie counts).
func eventuallyGone(t *testing.T, pid int) {
	t.Helper()
	poll.Eventually(t, 3*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return nil
		}
		return fmt.Errorf("process %d still running", pid)
	})
}

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		in          string
		ppid, depth int
		err         bool
	}{
		{"Name:\tsleep\nPPid:\t42\nNSpid:\t1234\n", 42, 1, false},
		{"PPid:\t7\nNSpid:\t1234\t5\t1\n", 7, 3, false},
		{"Name:\tx\nNSpid:\t1\n", 0, 0, true},
		{"PPid:\tx\nNSpid:\t1\n", 0, 0, true},
		{"PPid:\t1\n", 0, 0, true},
	} {
		ppid, depth, err := parseStatus([]byte(tc.in))
		if (err != nil) != tc.err || ppid != tc.ppid || depth != tc.depth {
			t.Errorf("parseStatus(%q) = %d, %d, %v", tc.in, ppid, depth, err)
		}
	}
}

func envelope(t *testing.T, topic string, ev any, ts time.Time) *events.Envelope {
	t.Helper()
	a, err := typeurl.MarshalAny(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &events.Envelope{Timestamp: ts, Namespace: DefaultNamespace, Topic: topic, Event: a}
}

func TestTrackerResyncAndEvents(t *testing.T) {
	f := &fakeCRI{
		sandboxes: []*criapi.PodSandbox{
			{Id: "s1", State: criapi.PodSandboxState_SANDBOX_READY, Labels: podLabels("u1", "default", "web-0"), Metadata: &criapi.PodSandboxMetadata{Name: "web-0", Namespace: "default"}},
		},
		containers: []*criapi.Container{
			{Id: "a0", State: criapi.ContainerState_CONTAINER_EXITED, CreatedAt: 100, Labels: ctrLabels("u1", "app")},
			{Id: "a1", State: criapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 200, Labels: ctrLabels("u1", "app")},
			{Id: "b0", State: criapi.ContainerState_CONTAINER_CREATED, CreatedAt: 150, Labels: ctrLabels("u1", "side")},
		},
		startedAt: map[string]int64{"a1": 5e18},
	}
	c, _ := newFakeClient(t, f)
	var mu sync.Mutex
	var changes []Change
	tr := NewTracker(c, func(ch Change) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })
	took := func() []Change {
		mu.Lock()
		defer mu.Unlock()
		out := changes
		changes = nil
		slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.PodUID+a.Container, b.PodUID+b.Container) })
		return out
	}
	ctx := context.Background()

	if tr.Healthy() == nil {
		t.Fatal("healthy before running")
	}
	if err := tr.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := took(); !slices.Equal(got, []Change{{"u1", ""}, {"u1", "app"}, {"u1", "side"}}) {
		t.Fatalf("changes after the first sync = %v", got)
	}
	if f.calls["ContainerStatus"] != 1 {
		t.Fatalf("ContainerStatus called %d times; only the newest running container needs it", f.calls["ContainerStatus"])
	}
	st, ok := tr.Container("u1", "app")
	if !ok || st.ID != "a1" || !st.Running || !st.StartedAt.Equal(time.Unix(0, 5e18)) {
		t.Fatalf("app = %+v, %t", st, ok)
	}
	if st, ok := tr.Container("u1", "side"); !ok || st.Running {
		t.Fatalf("side = %+v, %t", st, ok)
	}

	// Answers come from memory: no CRI call per lookup.
	before := f.calls["ListContainers"] + f.calls["ContainerStatus"]
	for range 1000 {
		tr.Container("u1", "app")
	}
	if f.calls["ListContainers"]+f.calls["ContainerStatus"] != before {
		t.Fatal("Container() called the runtime")
	}

	now := time.Unix(1_800_000_000, 0)
	// An exec process exiting is not the container exiting.
	tr.handle(ctx, envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: "probe-1"}, now))
	if st, _ := tr.Container("u1", "app"); !st.Running {
		t.Fatal("an exec exit stopped the container")
	}
	tr.handle(ctx, envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "b0", Pid: 42}, now))
	if st, _ := tr.Container("u1", "side"); !st.Running || !st.StartedAt.Equal(now) {
		t.Fatalf("side after start = %+v", st)
	}
	// A start replayed for a container already running keeps CRI's time.
	tr.handle(ctx, envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "a1"}, now))
	if st, _ := tr.Container("u1", "app"); !st.StartedAt.Equal(time.Unix(0, 5e18)) {
		t.Fatalf("replayed start changed StartedAt: %+v", st)
	}
	tr.handle(ctx, envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: "a1", ExitStatus: 137}, now))
	if st, _ := tr.Container("u1", "app"); st.Running || st.ID != "a1" {
		t.Fatalf("app after exit = %+v", st)
	}
	if got := took(); !slices.Equal(got, []Change{{"u1", "app"}, {"u1", "side"}}) {
		t.Fatalf("changes from events = %v", got)
	}
	// Deleting an old container of the name changes nothing visible;
	// deleting the current one removes it.
	tr.handle(ctx, envelope(t, "/containers/delete", &eventtypes.ContainerDelete{ID: "a0"}, now))
	if st, ok := tr.Container("u1", "app"); !ok || st.ID != "a1" {
		t.Fatalf("app after deleting an old container = %+v, %t", st, ok)
	}
	tr.handle(ctx, envelope(t, "/containers/delete", &eventtypes.ContainerDelete{ID: "a1"}, now))
	if _, ok := tr.Container("u1", "app"); ok {
		t.Fatal("deleted container still found")
	}
	if got := took(); !slices.Equal(got, []Change{{"u1", "app"}}) {
		t.Fatalf("changes from deletes = %v", got)
	}

	// Garbage does not panic and changes nothing.
	tr.handle(ctx, nil)
	tr.handle(ctx, &events.Envelope{Topic: "/tasks/start"})
	tr.handle(ctx, &events.Envelope{Topic: "/tasks/start", Event: &typeurlAny{url: "nonsense", value: []byte{1, 2, 3}}})
	tr.handle(ctx, envelope(t, "/tasks/exit", &eventtypes.TaskExit{}, now))
	tr.handle(ctx, envelope(t, "/tasks/delete", &eventtypes.TaskDelete{ContainerID: "unknown"}, now))
	tr.handle(ctx, envelope(t, "/containers/delete", &eventtypes.ContainerDelete{ID: "unknown"}, now))
	if got := took(); len(got) != 0 {
		t.Fatalf("garbage changed: %v", got)
	}

	// A resync that finds the same state reports nothing; one that finds a
	// change reports just that.
	f.mu.Lock()
	f.containers = f.containers[1:] // a0 gone, as deleted above
	f.containers[0].State = criapi.ContainerState_CONTAINER_EXITED
	f.containers = slices.Delete(f.containers, 0, 1) // a1 gone too
	f.containers[0].State = criapi.ContainerState_CONTAINER_RUNNING
	f.startedAt["b0"] = now.UnixNano()
	f.mu.Unlock()
	if err := tr.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := took(); len(got) != 0 {
		t.Fatalf("resync of an unchanged state reported %v", got)
	}
	f.mu.Lock()
	f.sandboxes[0].State = criapi.PodSandboxState_SANDBOX_NOTREADY
	f.mu.Unlock()
	if err := tr.resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := took(); !slices.Equal(got, []Change{{"u1", ""}}) {
		t.Fatalf("resync after the sandbox stopped reported %v", got)
	}
}

// What a caller saw the runtime do (the CRI proxy) applies at once, and a
// start reported after the container stopped never makes it run again.
func TestTrackerObserved(t *testing.T) {
	f := &fakeCRI{
		sandboxes: []*criapi.PodSandbox{
			{Id: "s1", State: criapi.PodSandboxState_SANDBOX_READY, Labels: podLabels("u1", "default", "web-0"), Metadata: &criapi.PodSandboxMetadata{Name: "web-0", Namespace: "default"}},
		},
		containers: []*criapi.Container{
			{Id: "a0", State: criapi.ContainerState_CONTAINER_EXITED, CreatedAt: 100, Labels: ctrLabels("u1", "app")},
			{Id: "b0", State: criapi.ContainerState_CONTAINER_CREATED, CreatedAt: 150, Labels: ctrLabels("u1", "side")},
		},
	}
	c, _ := newFakeClient(t, f)
	var mu sync.Mutex
	var changes []Change
	tr := NewTracker(c, func(ch Change) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })
	took := func() []Change {
		mu.Lock()
		defer mu.Unlock()
		out := changes
		changes = nil
		return out
	}
	ctx := context.Background()
	if err := tr.resync(ctx); err != nil {
		t.Fatal(err)
	}
	took()

	before := time.Now()
	tr.Started(ctx, "b0")
	if st, _ := tr.Container("u1", "side"); !st.Running || st.StartedAt.Before(before) {
		t.Fatalf("side after Started = %+v", st)
	}
	if got := took(); !slices.Equal(got, []Change{{"u1", "side"}}) {
		t.Fatalf("changes after Started = %v", got)
	}
	// The event arriving after it changes nothing.
	tr.handle(ctx, envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "b0"}, time.Unix(1, 0)))
	if got := took(); len(got) != 0 {
		t.Fatalf("the start event after Started reported %v", got)
	}
	tr.Stopped(ctx, "b0")
	if st, _ := tr.Container("u1", "side"); st.Running {
		t.Fatalf("side after Stopped = %+v", st)
	}
	// Late starts, from the proxy or a queued event, of a container that
	// exited: it stays stopped.
	tr.Started(ctx, "b0")
	tr.handle(ctx, envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "b0"}, time.Now()))
	tr.Started(ctx, "a0") // listed as exited
	if st, _ := tr.Container("u1", "side"); st.Running {
		t.Fatalf("a late start made an exited container run: %+v", st)
	}
	if o, ok := tr.Owner("a0"); !ok || o.Container != "app" || o.PodUID != "u1" || o.PodName != "web-0" || o.Namespace != "default" {
		t.Fatalf("Owner(a0) = %+v, %t", o, ok)
	}
	if o, ok := tr.Owner("s1"); !ok || o.Container != "" || o.PodName != "web-0" {
		t.Fatalf("Owner(s1) = %+v, %t", o, ok)
	}
	tr.Removed(ctx, "b0")
	if _, ok := tr.Container("u1", "side"); ok {
		t.Fatal("removed container still found")
	}
	if _, ok := tr.Owner("b0"); ok {
		t.Fatal("removed container still has an owner")
	}
	// An ID containerd cannot tell about is ignored.
	took()
	tr.Created(ctx, "unknown")
	tr.Started(ctx, "unknown")
	if got := took(); len(got) != 0 {
		t.Fatalf("unknown ID changed %v", got)
	}
}

// typeurlAny is an Any with a type nobody registered.
type typeurlAny struct {
	url   string
	value []byte
}

func (a *typeurlAny) GetTypeUrl() string { return a.url } //nolint:revive // var-naming: typeurl.Any's method name
func (a *typeurlAny) GetValue() []byte   { return a.value }

// Without containerd's event service the tracker keeps retrying, reports
// why through Healthy, never claims to be synced, and stops with its
// context.
func TestTrackerRunWithoutEvents(t *testing.T) {
	c, _ := newFakeClient(t, &fakeCRI{})
	tr := NewTracker(c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	// Until a session has failed, Healthy says the tracker has not started.
	notStarted := tr.Healthy()
	poll.Eventually(t, 5*time.Second, func() error {
		switch err := tr.Healthy(); {
		case err == nil:
			return errors.New("healthy without an event stream")
		case err.Error() == notStarted.Error():
			return fmt.Errorf("Healthy() = %w, want why there are no events", err)
		}
		return nil
	})
	select {
	case <-tr.Synced():
		t.Fatal("synced without an event stream")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// A container's exit drops its cached exec target (its task and process spec:
// a restarted container's new task must be loaded again) and ends the waits on
// its end; an exec's exit is handed to the Exec waiting for it and leaves the
// container's target and end alone.
func TestTrackerExitsForgetTargetsAndRouteExecs(t *testing.T) {
	c, _ := newFakeClient(t, &fakeCRI{})
	tr := NewTracker(c, nil)
	ctx := context.Background()
	c.targets["a1"], c.targets["b1"] = &execTarget{}, &execTarget{}
	c.exits.streamUp()
	evc, ok := c.exits.watch("probe-x")
	if !ok {
		t.Fatal("no waiter registered while a stream is up")
	}

	aEnd, releaseA := c.exits.watchEnd("a1")
	defer releaseA()
	bEnd, releaseB := c.exits.watchEnd("b1")
	defer releaseB()

	tr.handle(ctx, envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "b1", ID: "probe-x", ExitStatus: 9}, time.Now()))
	select {
	case ev := <-evc:
		if ev.lost || ev.code != 9 {
			t.Fatalf("exec exit delivered as %+v, want code 9", ev)
		}
	default:
		t.Fatal("the exec's exit was not delivered")
	}
	tr.handle(ctx, envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: "a1", ExitStatus: 0}, time.Now()))
	c.mu.Lock()
	_, a1 := c.targets["a1"]
	_, b1 := c.targets["b1"]
	c.mu.Unlock()
	if a1 || !b1 {
		t.Fatalf("targets after a1's exit and an exec's in b1: a1 cached %v (want false), b1 cached %v (want true)", a1, b1)
	}
	if !endedWithin(aEnd, 0) || endedWithin(bEnd, 0) {
		t.Fatalf("ends after a1's exit and an exec's in b1: a1 ended %v (want true), b1 ended %v (want false)",
			endedWithin(aEnd, 0), endedWithin(bEnd, 0))
	}
}

// The Tracker's subscription, as containerd's own filter parser reads it: the container events and
// every exit pass (our execs learn their exits and their containers' ends from the stream); exec
// starts and another namespace's events do not.
func TestEventFiltersSelect(t *testing.T) {
	var fs []filters.Filter
	for _, expr := range eventFilters(DefaultNamespace) {
		f, err := filters.Parse(expr)
		if err != nil {
			t.Fatalf("containerd does not parse %q: %v", expr, err)
		}
		fs = append(fs, f)
	}
	matches := func(env *events.Envelope) bool {
		return slices.ContainsFunc(fs, func(f filters.Filter) bool { return f.Match(env) })
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		env  *events.Envelope
		want bool
	}{
		{"own exec exit", envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: newExecID()}, now), true},
		{"another client's exec exit", envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: "5f0c1e"}, now), true},
		{"container exit", envelope(t, "/tasks/exit", &eventtypes.TaskExit{ContainerID: "a1", ID: "a1"}, now), true},
		{"container's task deleted", envelope(t, "/tasks/delete", &eventtypes.TaskDelete{ContainerID: "a1", ID: "a1"}, now), true},
		{"task start", envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "a1"}, now), true},
		{"container create", envelope(t, "/containers/create", &eventtypes.ContainerCreate{ID: "a1"}, now), true},
		{"container delete", envelope(t, "/containers/delete", &eventtypes.ContainerDelete{ID: "a1"}, now), true},
		{"exec started", envelope(t, "/tasks/exec-started", &eventtypes.TaskExecStarted{ContainerID: "a1", ExecID: newExecID()}, now), false},
	} {
		if got := matches(tc.env); got != tc.want {
			t.Errorf("%s: selected %v, want %v", tc.name, got, tc.want)
		}
	}
	other := envelope(t, "/tasks/start", &eventtypes.TaskStart{ContainerID: "a1"}, now)
	other.Namespace = "moby"
	if matches(other) {
		t.Error("another namespace's event selected")
	}
}
