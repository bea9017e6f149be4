// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

type execStub func(ctx context.Context, cmd []string, timeout time.Duration) (prober.ExecResult, error)

func (f execStub) Exec(ctx context.Context, _ string, cmd []string, timeout time.Duration) (prober.ExecResult, error) {
	return f(ctx, cmd, timeout)
}
func (execStub) StopContainer(context.Context, string, time.Duration) error { return nil }

// network records which pod a dialer was asked for; it dials on the host (the test's loopback
// stands in for the pod's).
type network struct{ pods []prober.PodRef }

func (n *network) DialerFor(p prober.PodRef) (prober.Dialer, error) {
	n.pods = append(n.pods, p)
	return &net.Dialer{}, nil
}

func TestPreStopHooks(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("User-Agent")+" "+r.Header.Get("X-Drain"))
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	pod := &corev1.Pod{}
	pod.UID, pod.Namespace, pod.Name = "uid-1", "ns", "web"
	pod.Status.PodIP = "127.0.0.1" // the test's loopback stands in for the pod
	ok := execStub(func(context.Context, []string, time.Duration) (prober.ExecResult, error) {
		return prober.ExecResult{}, nil
	})
	for _, tc := range []struct {
		name string
		hook v1alpha1.ProbeHandler
		rt   Runtime
		want string // error, "" for none
	}{
		{"exec", v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}, ok, ""},
		{"exec fails", v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}},
			execStub(func(context.Context, []string, time.Duration) (prober.ExecResult, error) {
				return prober.ExecResult{ExitCode: 3, Output: []byte("busy\n")}, nil
			}), "preStop hook exited with code 3: busy"},
		{"exec outlives the grace", v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "8"}}},
			execStub(func(ctx context.Context, _ []string, timeout time.Duration) (prober.ExecResult, error) {
				if timeout != 200*time.Millisecond {
					return prober.ExecResult{}, fmt.Errorf("timeout %v", timeout)
				}
				<-ctx.Done()
				return prober.ExecResult{}, fmt.Errorf("killed: %w", prober.ErrExecTimeout)
			}), "preStop hook did not finish within the grace period (200ms)"},
		{"httpGet named port", v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http"),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Drain", Value: "now"}}}}, ok, ""},
		{"httpGet error status", v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt(port)}}, ok,
			"preStop hook: HTTP GET /fail answered 503"},
		{"httpGet to another host", v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt(80)}}, ok,
			`preStop hook: probe refused: probe host "169.254.169.254" is not the pod`},
		{"unknown named port", v1alpha1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("grpc")}}, ok,
			`preStop hook: port "grpc" not found in the container's ports`},
		{"tcpSocket", v1alpha1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port)}}, ok, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &network{}
			ports := []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
			err := runPreStop(context.Background(), tc.rt, n, pod, &tc.hook, ports, "id", 200*time.Millisecond)
			if msg := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && msg != tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			for _, p := range n.pods {
				if p.UID != "uid-1" || p.Name != "web" {
					t.Errorf("dialer for %+v", p)
				}
			}
		})
	}
	if s := strings.Join(got, "|"); s != "GET /drain kube-lifecycle/1.37 now|GET /fail kube-lifecycle/1.37 " {
		t.Errorf("requests %q", s)
	}
}

// A hostNetwork pod's preStop naming 127.0.0.1 goes to its loopback, which is the node's (the
// kubelet runs such a hook too); the pod's spec wrote it, whose processes reach it already.
func TestPreStopHostNetworkLoopback(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = append(got, r.URL.Path) }))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	pod := &corev1.Pod{}
	pod.UID, pod.Namespace, pod.Name = "uid-1", "ns", "agent"
	pod.Spec.HostNetwork = true
	pod.Status.PodIP = "192.0.2.10" // the node's address; not where the hook goes
	n := &network{}
	hook := v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/drain", Port: intstr.FromInt(port)}}
	if err := runPreStop(context.Background(), nil, n, pod, &hook, nil, "id", time.Second); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "/drain" || len(n.pods) != 1 || !n.pods[0].HostNetwork {
		t.Errorf("requests %q, dialers for %+v", got, n.pods)
	}
}

// The grace bounds an exec hook from when it is started, as the kubelet's does: a runtime slow to
// set the exec up, or to kill it at its timeout, does not make the stop late.
func TestPreStopExecBoundedByGrace(t *testing.T) {
	released := make(chan struct{})
	defer close(released)
	slow := execStub(func(ctx context.Context, _ []string, timeout time.Duration) (prober.ExecResult, error) {
		<-released // setup, timeout and kill taking longer than the grace
		return prober.ExecResult{}, prober.ErrExecTimeout
	})
	start := time.Now()
	err := runPreStop(context.Background(), slow, nil, &corev1.Pod{},
		&v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "8"}}}, nil, "c1", 300*time.Millisecond)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("runPreStop returned after %s, past its 300ms grace", took)
	}
	if err == nil || !strings.Contains(err.Error(), "did not finish within the grace period (300ms)") {
		t.Fatalf("err = %v", err)
	}
}
