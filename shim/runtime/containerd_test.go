// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

// Tests against a real containerd (with its CRI plugin), run only when
// PROBESHIM_CONTAINERD_SOCKET names its socket. They make their own image
// (busybox-static from the host, imported into namespace k8s.io) and their
// own pods through CRI, and remove them afterwards. Pods get a network
// namespace from CNI when the containerd has it configured; set
// PROBESHIM_TEST_HOSTNETWORK=1 to use hostNetwork pods only.
//
// PROBESHIM_CONTAINERD_RESTART, if set, is a shell command that restarts
// that containerd; it enables the reconnect test.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const testImage = "probeshim.test/busybox:1"

type rig struct {
	socket string
	client *Client
	cri    criapi.RuntimeServiceClient
	ctd    *containerd.Client
	tmp    string
}

func realContainerd(t testing.TB) *rig {
	t.Helper()
	sock := os.Getenv("PROBESHIM_CONTAINERD_SOCKET")
	if sock == "" {
		t.Skip("set PROBESHIM_CONTAINERD_SOCKET to run against a real containerd")
	}
	c, err := New(WithContainerdSocket(sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctd, err := containerd.NewWithConn(conn, containerd.WithDefaultNamespace(DefaultNamespace))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{socket: sock, client: c, cri: criapi.NewRuntimeServiceClient(conn), ctd: ctd, tmp: t.TempDir()}
	r.importImage(t)
	return r
}

// importImage imports a one-layer OCI image holding the host's static
// busybox and its applet links, if it is not there yet.
func (r *rig) importImage(t testing.TB) {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), DefaultNamespace)
	if _, err := r.ctd.GetImage(ctx, testImage); err == nil {
		return
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("needs busybox-static: %v", err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Mode: 0o755, Typeflag: tar.TypeDir})
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir})
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(bb)
	for _, a := range []string{"sh", "sleep", "cat", "echo", "true", "false", "seq", "ps", "httpd", "nc", "kill", "head"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + a, Linkname: "busybox", Typeflag: tar.TypeSymlink})
	}
	tw.Close()

	blobs := map[digest.Digest][]byte{}
	add := func(b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		blobs[d] = b
		return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
	}
	layerDesc := add(layer.Bytes())
	layerDesc.MediaType = ocispec.MediaTypeImageLayer
	cfg, _ := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{Architecture: "amd64", OS: "linux"},
		Config:   ocispec.ImageConfig{Entrypoint: []string{"/bin/sleep", "2147483647"}, Env: []string{"PATH=/bin"}},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	})
	cfgDesc := add(cfg)
	cfgDesc.MediaType = ocispec.MediaTypeImageConfig
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ocispec.MediaTypeImageManifest, "config": cfgDesc, "layers": []ocispec.Descriptor{layerDesc}})
	manDesc := add(man)
	manDesc.MediaType = ocispec.MediaTypeImageManifest
	manDesc.Annotations = map[string]string{"io.containerd.image.name": testImage, ocispec.AnnotationRefName: "1"}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []ocispec.Descriptor{manDesc}})

	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	file := func(name string, b []byte) {
		_ = aw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		_, _ = aw.Write(b)
	}
	file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	file("index.json", idx)
	for d, b := range blobs {
		file("blobs/sha256/"+d.Encoded(), b)
	}
	aw.Close()

	imgs, err := r.ctd.Import(ctx, &archive)
	if err != nil {
		t.Fatalf("import image: %v", err)
	}
	for _, i := range imgs {
		if err := containerd.NewImage(r.ctd, i).Unpack(ctx, "overlayfs"); err != nil {
			t.Fatalf("unpack %s: %v", i.Name, err)
		}
	}
}

type testPod struct {
	uid, name, namespace string
	sandboxID            string
	config               *criapi.PodSandboxConfig
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// runPod starts a sandbox through CRI, labelled as the kubelet labels it.
func (r *rig) runPod(t testing.TB, hostNetwork bool) *testPod {
	t.Helper()
	if os.Getenv("PROBESHIM_TEST_HOSTNETWORK") != "" {
		hostNetwork = true
	}
	p := &testPod{uid: randHex(8), name: "pod-" + randHex(3), namespace: "probeshim-test"}
	mode := criapi.NamespaceMode_POD
	if hostNetwork {
		mode = criapi.NamespaceMode_NODE
	}
	p.config = &criapi.PodSandboxConfig{
		Metadata:     &criapi.PodSandboxMetadata{Name: p.name, Uid: p.uid, Namespace: p.namespace},
		Labels:       map[string]string{LabelPodUID: p.uid, LabelPodName: p.name, LabelPodNamespace: p.namespace},
		LogDirectory: r.tmp,
		Linux: &criapi.LinuxPodSandboxConfig{SecurityContext: &criapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &criapi.NamespaceOption{Network: mode, Pid: criapi.NamespaceMode_CONTAINER},
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := r.cri.RunPodSandbox(ctx, &criapi.RunPodSandboxRequest{Config: p.config})
	if err != nil {
		t.Fatalf("run sandbox: %v", err)
	}
	p.sandboxID = resp.GetPodSandboxId()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = r.cri.StopPodSandbox(ctx, &criapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID})
		_, _ = r.cri.RemovePodSandbox(ctx, &criapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID})
	})
	return p
}

// runContainer creates and starts a container in the pod, labelled as the
// kubelet labels it, and returns its ID.
func (r *rig) runContainer(t testing.TB, p *testPod, name string, attempt uint32, cmd ...string) string {
	t.Helper()
	if len(cmd) == 0 {
		cmd = []string{"/bin/sleep", "2147483647"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := r.cri.CreateContainer(ctx, &criapi.CreateContainerRequest{
		PodSandboxId: p.sandboxID,
		Config: &criapi.ContainerConfig{
			Metadata: &criapi.ContainerMetadata{Name: name, Attempt: attempt},
			Image:    &criapi.ImageSpec{Image: testImage},
			Command:  cmd,
			Labels: map[string]string{LabelPodUID: p.uid, LabelPodName: p.name, LabelPodNamespace: p.namespace,
				LabelContainerName: name},
			LogPath: fmt.Sprintf("%s_%d.log", name, attempt),
			Linux:   &criapi.LinuxContainerConfig{},
		},
		SandboxConfig: p.config,
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	id := resp.GetContainerId()
	if _, err := r.cri.StartContainer(ctx, &criapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	return id
}
