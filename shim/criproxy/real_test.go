// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// TestRealContainerd puts the proxy in front of a real containerd (its CRI
// plugin), found as shim/runtime's real tests find it: through
// PROBESHIM_CONTAINERD_SOCKET; skipped without. Every answer through the
// proxy must be what containerd answers directly: results, and errors with
// their code and message.
func TestRealContainerd(t *testing.T) {
	sock := os.Getenv("PROBESHIM_CONTAINERD_SOCKET")
	if sock == "" {
		t.Skip("set PROBESHIM_CONTAINERD_SOCKET to run against a real containerd")
	}
	p, err := New(Options{Upstream: sock, Log: logrus.NewEntry(logrus.StandardLogger())})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(shortDir(t), "cri.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(c)
	}()
	viaProxy, direct := dialUnix(t, path), dialUnix(t, sock)
	c := ctx(t)

	for name, call := range map[string]func(rs criapi.RuntimeServiceClient, is criapi.ImageServiceClient) (any, error){
		"Version": func(rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (any, error) {
			return rs.Version(c, &criapi.VersionRequest{})
		},
		"Status": func(rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (any, error) {
			r, err := rs.Status(c, &criapi.StatusRequest{})
			return r.GetStatus().GetConditions(), err
		},
		"ListContainers": func(rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (any, error) {
			r, err := rs.ListContainers(c, &criapi.ListContainersRequest{})
			return len(r.GetContainers()), err
		},
		"ListImages": func(_ criapi.RuntimeServiceClient, is criapi.ImageServiceClient) (any, error) {
			r, err := is.ListImages(c, &criapi.ListImagesRequest{})
			return len(r.GetImages()), err
		},
		"ContainerStatus of nothing": func(rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (any, error) {
			return rs.ContainerStatus(c, &criapi.ContainerStatusRequest{ContainerId: "no-such-container-probeshim"})
		},
		"StopContainer of nothing": func(rs criapi.RuntimeServiceClient, _ criapi.ImageServiceClient) (any, error) {
			return rs.StopContainer(c, &criapi.StopContainerRequest{ContainerId: "no-such-container-probeshim"})
		},
	} {
		var got [2]string
		read := func(context.Context) (bool, string, error) {
			for i, conn := range []*grpc.ClientConn{viaProxy, direct} {
				res, err := call(criapi.NewRuntimeServiceClient(conn), criapi.NewImageServiceClient(conn))
				if err != nil {
					st := status.Convert(err)
					got[i] = "error " + st.Code().String() + ": " + st.Message()
				} else {
					got[i] = fmt.Sprint(res) // deterministic within one binary
				}
			}
			return got[0] == got[1], "", nil
		}
		// The rig may pull an image between the two reads: they must agree once the node is still.
		_ = poll.Until(c, 5*time.Second, name, read)
		if got[0] != got[1] {
			t.Errorf("%s: through the proxy %q, directly %q", name, got[0], got[1])
		} else {
			t.Logf("%s: %.120s", name, got[0])
		}
	}
}
