// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fakeTasks is containerd's containers and tasks services for one running
// container whose exec start fails although the runtime started the
// process: what happens when the caller's context ends during Start.
type fakeTasks struct {
	tasks.UnimplementedTasksServer
	mu      sync.Mutex
	running bool // the exec process
	killed  chan struct{}
	deleted bool
}

type fakeContainers struct {
	containersapi.UnimplementedContainersServer
}

func (fakeContainers) Get(_ context.Context, r *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
	spec := []byte(`{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["sleep"],"cwd":"/"}}`)
	return &containersapi.GetContainerResponse{Container: &containersapi.Container{ID: r.ID,
		Spec: &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Spec", Value: spec}}}, nil
}

func (f *fakeTasks) Get(_ context.Context, r *tasks.GetRequest) (*tasks.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.ExecID == "" {
		return &tasks.GetResponse{Process: &tasktypes.Process{ID: r.ContainerID, Pid: 1, Status: tasktypes.Status_RUNNING}}, nil
	}
	st := tasktypes.Status_STOPPED
	if f.running {
		st = tasktypes.Status_RUNNING
	}
	return &tasks.GetResponse{Process: &tasktypes.Process{ID: r.ExecID, Status: st}}, nil
}

func (f *fakeTasks) Exec(context.Context, *tasks.ExecProcessRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (f *fakeTasks) Start(context.Context, *tasks.StartRequest) (*tasks.StartResponse, error) {
	f.mu.Lock()
	f.running = true
	f.mu.Unlock()
	return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
}

func (f *fakeTasks) Wait(ctx context.Context, _ *tasks.WaitRequest) (*tasks.WaitResponse, error) {
	select {
	case <-f.killed:
		return &tasks.WaitResponse{ExitStatus: 137}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeTasks) Kill(_ context.Context, r *tasks.KillRequest) (*emptypb.Empty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.ExecID != "" && f.running {
		f.running = false
		close(f.killed)
	}
	return &emptypb.Empty{}, nil
}

func (f *fakeTasks) DeleteProcess(context.Context, *tasks.DeleteProcessRequest) (*tasks.DeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return nil, status.Error(codes.FailedPrecondition, "process must be stopped before deletion")
	}
	f.deleted = true
	return &tasks.DeleteResponse{}, nil
}

// An exec whose Start fails after the runtime started it is killed and
// deleted, not left running: the client never learned its pid, so the
// client library's WithProcessKill would skip it.
func TestExecStartFailureKillsStartedProcess(t *testing.T) {
	f := &fakeTasks{killed: make(chan struct{})}
	c, _ := serveTasks(t, f, true)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Exec(ctx, "ctr1", []string{"/bin/true"}, time.Second)
	if err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Exec = %v, want the start error", err)
	}
	select {
	case <-f.killed:
	default:
		t.Fatal("the started exec process was not killed")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.deleted {
		t.Fatal("the exec process was not deleted")
	}
}

// shimTasks is a tasks service whose execs run and exit 0 at once, or whose
// start fails with startErr; it records the stdout path of each exec.
type shimTasks struct {
	tasks.UnimplementedTasksServer
	mu       sync.Mutex
	startErr error
	stdouts  []string
	// onStart runs after a successful start; waits counts Wait calls, which
	// answer waitCode; Get says a started exec stopped with stoppedCode.
	onStart     func(execID string)
	waits       int
	waitCode    uint32
	stoppedCode uint32
}

func (f *shimTasks) Get(_ context.Context, r *tasks.GetRequest) (*tasks.GetResponse, error) {
	if r.ExecID != "" { // no pid: nothing for the kill paths to walk
		f.mu.Lock()
		defer f.mu.Unlock()
		return &tasks.GetResponse{Process: &tasktypes.Process{ID: r.ExecID, Status: tasktypes.Status_STOPPED, ExitStatus: f.stoppedCode}}, nil
	}
	return &tasks.GetResponse{Process: &tasktypes.Process{ID: r.ContainerID, Pid: 1, Status: tasktypes.Status_RUNNING}}, nil
}

func (f *shimTasks) Exec(_ context.Context, r *tasks.ExecProcessRequest) (*emptypb.Empty, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stdouts = append(f.stdouts, r.Stdout)
	return &emptypb.Empty{}, nil
}

func (f *shimTasks) Start(_ context.Context, r *tasks.StartRequest) (*tasks.StartResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.startErr; err != nil {
		f.startErr = nil
		return nil, err
	}
	if f.onStart != nil {
		go f.onStart(r.ExecID)
	}
	return &tasks.StartResponse{}, nil // no pid: see Get
}

func (f *shimTasks) Wait(context.Context, *tasks.WaitRequest) (*tasks.WaitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits++
	return &tasks.WaitResponse{ExitStatus: f.waitCode}, nil
}

func (f *shimTasks) Kill(context.Context, *tasks.KillRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func (f *shimTasks) DeleteProcess(context.Context, *tasks.DeleteProcessRequest) (*tasks.DeleteResponse, error) {
	return &tasks.DeleteResponse{}, nil
}

func serveShimTasks(t *testing.T, f *shimTasks) *Client {
	c, _ := serveTasks(t, f, true)
	return c
}

// serveTasks serves f as containerd's tasks service on a socket in a test
// folder and returns a client of it and the folder. fifos: the client's exec
// output goes through FIFOs in that folder, else through pipes.
func serveTasks(t *testing.T, f tasks.TasksServer, fifos bool) (*Client, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "containerd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	containersapi.RegisterContainersServer(srv, fakeContainers{})
	tasks.RegisterTasksServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	opts := []Option{WithContainerdSocket(l.Addr().String())}
	if fifos {
		opts = append(opts, WithFIFODir(filepath.Join(dir, "fifo")))
	}
	c, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, dir
}

// While an event stream is up, an exec learns its exit from it and makes no
// Wait call; when the stream ends first, it asks with Wait; and an exit the
// stream never delivers is found at the timeout, not taken for one.
func TestExecExitFromEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name      string
		onStart   func(c *Client, execID string)
		wantCode  int
		wantWaits int
	}{
		{"event", func(c *Client, id string) { c.exits.exited(id, 3) }, 3, 0},
		{"stream lost", func(c *Client, id string) { c.exits.streamDown() }, 5, 1},
		{"event missed", func(c *Client, id string) {}, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &shimTasks{waitCode: 5, stoppedCode: 7}
			c := serveShimTasks(t, f)
			c.exits.streamUp()
			f.onStart = func(id string) { tc.onStart(c, id) }
			res, err := c.Exec(ctx, "ctr1", []string{"/bin/true"}, 300*time.Millisecond)
			if err != nil || res.ExitCode != tc.wantCode {
				t.Fatalf("Exec = %+v, %v; want exit code %d", res, err, tc.wantCode)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.waits != tc.wantWaits {
				t.Fatalf("%d Wait calls, want %d", f.waits, tc.wantWaits)
			}
		})
	}
	// No stream: a Wait call, as before.
	f := &shimTasks{waitCode: 4}
	c := serveShimTasks(t, f)
	res, err := c.Exec(ctx, "ctr1", []string{"/bin/true"}, time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || res.ExitCode != 4 || f.waits != 1 {
		t.Fatalf("Exec without a stream = %+v, %v after %d Wait calls; want exit 4 after 1", res, err, f.waits)
	}
}

// Exec output goes through pipes that the shim opens by a /proc path, not a
// FIFO directory; when the shim cannot open them the client uses FIFOs from
// then on.
func TestExecOutputPipesFallBackToFIFOs(t *testing.T) {
	for _, startErr := range []string{
		`failed to start io pipe copy: containerd-shim: opening w/o fifo "/proc/1/fd/9" failed: permission denied`,
		// containerd 1.7's shim in another PID namespace, where our pid is another process.
		fmt.Sprintf(`failed to start io pipe copy: unable to copy pipes: stat /proc/%d/fd/`, os.Getpid()),
	} {
		t.Run(startErr, func(t *testing.T) { testPipesFallBack(t, startErr) })
	}
}

func testPipesFallBack(t *testing.T, startErr string) {
	f := &shimTasks{startErr: status.Error(codes.Unknown, startErr)}
	c, dir := serveTasks(t, f, false)
	// FIFOs go to a folder of the test's, not the host's /run/containerd.
	c.opts.fifoDir = filepath.Join(dir, "fifo")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ctr1", []string{"/bin/true"}, time.Second); err == nil {
		t.Fatal("Exec succeeded although the start failed")
	}
	if _, err := c.Exec(ctx, "ctr1", []string{"/bin/true"}, time.Second); err != nil {
		t.Fatalf("second Exec: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := fmt.Sprintf("/proc/%d/fd/", os.Getpid())
	if len(f.stdouts) != 2 || !strings.HasPrefix(f.stdouts[0], want) || !strings.HasPrefix(f.stdouts[1], c.opts.fifoDir+"/") {
		t.Fatalf("stdout paths %q, want a pipe under %s, then a FIFO under %s", f.stdouts, want, c.opts.fifoDir)
	}
}
