// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Registry is the rig's image registry (e2e/cmd/registry: the Distribution registry, plain
// HTTP) on loopback inside the rig's netns, where every node's containerd reaches it. The rig
// pushes every image there; containerd pulls them through its registry config (config_path, a
// hosts.toml per registry host), as the node of a real cluster pulls from its registry.
const Registry = "127.0.0.1:5000"

// registryPkg is the registry's main package.
const registryPkg = modulePath + "/e2e/cmd/registry"

// RegistryHostsDir is containerd's config_path: one folder per registry host with its hosts.toml.
func (r *Rig) RegistryHostsDir() string { return r.path("registry", "hosts.d") }

// writeRegistryHosts writes the hosts.toml of Registry (plain HTTP) and of docker.io, whose mirror
// Registry is.
func (r *Rig) writeRegistryHosts() error {
	if err := r.writeHostsTOML(Registry); err != nil {
		return err
	}
	return r.writeHostsTOML("docker.io")
}

// writeHostsTOML writes containerd's hosts.toml for host: Registry itself over plain HTTP, any
// other host with Registry as its mirror, so that busybox:1.36 is pulled from
// 127.0.0.1:5000/library/busybox:1.36 (the rig reaches no other registry). containerd reads
// config_path at every pull: a host added while the rig runs takes effect at once.
func (r *Rig) writeHostsTOML(host string) error {
	server := "https://" + host
	switch host {
	case Registry:
		server = "http://" + Registry
	case "docker.io":
		server = "https://registry-1.docker.io"
	}
	content := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, "http://"+Registry)
	dir := filepath.Join(r.RegistryHostsDir(), host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(content), 0o644)
}

// RegistryRef is where ref is pushed and the host whose hosts.toml serves it: ref itself when it
// names Registry, else the same repository under Registry, which containerd's mirror config
// serves for the original name (busybox:1.36 -> 127.0.0.1:5000/library/busybox:1.36, host
// docker.io).
func RegistryRef(ref string) (name.Reference, string, error) {
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, "", err
	}
	host := parsed.Context().RegistryStr()
	if host == Registry {
		return parsed, host, nil
	}
	if host == name.DefaultRegistry {
		host = "docker.io" // containerd's name for it
	}
	sep := ":"
	if strings.HasPrefix(parsed.Identifier(), "sha256:") {
		sep = "@"
	}
	pushed, err := name.ParseReference(Registry+"/"+parsed.Context().RepositoryStr()+sep+parsed.Identifier(), name.Insecure)
	return pushed, host, err
}

// startRegistry starts the registry built at bin and waits until it answers /v2/.
func (r *Rig) startRegistry(ctx context.Context, bin string) error {
	storage := r.path("registry", "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return err
	}
	p, err := r.startProcess("registry", bin, "-addr", Registry, "-root", storage)
	if err != nil {
		return err
	}
	return r.waitFor(ctx, p, "registry /v2/", 30*time.Second, func() (bool, error) {
		return r.nsGetOK(ctx, "http://"+Registry+"/v2/"), nil
	})
}

// RegistryTransport reaches the registry from this process, on the host: it dials into the rig's
// netns, where the registry listens.
func (r *Rig) RegistryTransport() http.RoundTripper {
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return DialNetNS(ctx, r.netnsPath, network, addr)
	}}
}

// pushImages pushes every image of imgs to the registry: an index built by Image.Index as it is,
// the others from the tars buildImages wrote.
func (r *Rig) pushImages(ctx context.Context, imgs []Image) error {
	for _, img := range imgs {
		ref, host, err := RegistryRef(img.Ref)
		if err != nil {
			return err
		}
		if err := r.writeHostsTOML(host); err != nil {
			return err
		}
		opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(r.RegistryTransport())}
		if img.Index != nil {
			idx, err := img.Index(ctx, r.path("images"))
			if err != nil {
				return fmt.Errorf("image %s: %w", img.Ref, err)
			}
			if err := remote.WriteIndex(ref, idx, opts...); err != nil {
				return fmt.Errorf("pushing %s: %w", ref, err)
			}
			continue
		}
		v1img, err := tarball.ImageFromPath(r.imageTar(img.Ref), nil) // the tar's only image
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
		if err := remote.Write(ref, v1img, opts...); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	return nil
}

// PullImage has the CRI of every node pull ref (by tag or digest) through containerd's registry
// config, as the kubelet does, and returns the image ref CRI reports.
func (r *Rig) PullImage(ctx context.Context, ref string) (string, error) {
	var got string
	for _, n := range r.nodes {
		conn, err := grpc.NewClient("unix://"+n.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return "", err
		}
		resp, err := runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		conn.Close()
		if err != nil {
			return "", fmt.Errorf("node %s: CRI PullImage %s: %w", n.name, ref, err)
		}
		got = resp.GetImageRef()
	}
	return got, nil
}

// RegistryDigest is the digest the registry serves for ref (a tag), from this process.
func (r *Rig) RegistryDigest(ctx context.Context, ref string) (v1.Hash, error) {
	parsed, _, err := RegistryRef(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	desc, err := remote.Head(parsed, remote.WithContext(ctx), remote.WithTransport(r.RegistryTransport()))
	if err != nil {
		return v1.Hash{}, err
	}
	return desc.Digest, nil
}
