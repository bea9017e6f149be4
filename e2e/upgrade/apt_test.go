// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
	"github.com/probeshim/probeshim/packaging/nspawn"
	"github.com/probeshim/probeshim/packaging/rigtest"
)

// aptAddr is where the node's apt repository answers: the rig's loopback, which the node's
// container shares (a port no rig component uses).
const aptAddr = "127.0.0.1:18080"

// aptRepo is the node's package repository as a release publishes it: hack/release -apt-repo of
// the packages published so far, signed with a test release key, served inside the node's
// container by packaging/internal/servedir. The node installs and upgrades probeshim from it with
// apt-get, as docs/install/node.md tells an operator to.
type aptRepo struct {
	dir, key  string // the repository folder (bound into the container at /srv/probeshim), the key
	release   string // hack/release, built
	servedir  string // packaging/internal/servedir, built; bound at /opt/servedir
	published []string
}

// newAptRepo builds the two tools into work and makes an empty repository folder.
func newAptRepo(ctx context.Context, t *testing.T, root, work string) *aptRepo {
	t.Helper()
	a := &aptRepo{dir: filepath.Join(work, "aptrepo"), key: filepath.Join(work, "release-key.asc")}
	if err := os.WriteFile(a.key, testpki.OpenPGPKey(t, time.Now()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(work, "bin")
	var err error
	if a.release, err = nodesvc.BuildCommand(ctx, root, bin, "./hack/release"); err != nil {
		t.Fatal(err)
	}
	if a.servedir, err = nodesvc.BuildCommand(ctx, root, bin, "./packaging/internal/servedir"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return a
}

// binds are the container's read-only bind mounts for the repository and its server.
func (a *aptRepo) binds() []string {
	return []string{a.dir + ":/srv/probeshim", filepath.Dir(a.servedir) + ":/opt/aptbin"}
}

// publish adds deb to the repository, which then lists every package published so far.
func (a *aptRepo) publish(t *testing.T, deb string) {
	t.Helper()
	a.published = append(a.published, deb)
	cmd := exec.Command(a.release, append([]string{"-apt-repo", a.dir, "-repo-url", "http://" + aptAddr}, a.published...)...)
	cmd.Env = append(os.Environ(), "PROBESHIM_RELEASE_KEY="+a.key)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release -apt-repo: %v\n%s", err, out)
	}
}

// serve starts the repository's server in the container and adds the key and the sources file
// the release ships, as an operator does.
func (a *aptRepo) serve(ctx context.Context, t *testing.T, ctr *nspawn.Container) {
	t.Helper()
	if out, err := ctr.Sh(ctx, "systemd-run --unit=aptrepo /opt/aptbin/servedir /srv/probeshim "+aptAddr); err != nil {
		t.Fatalf("starting the repository's server: %v\n%s", err, out)
	}
	host, port, _ := strings.Cut(aptAddr, ":")
	err := poll.Until(ctx, 10*time.Second, "the repository on "+aptAddr, func(ctx context.Context) (bool, string, error) {
		out, err := ctr.Run(ctx, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
		return err == nil, out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The docs fetch the key with curl, which the minimal base lacks; the file is the one served.
	if out, err := ctr.Sh(ctx, "install -D -m 0644 /srv/probeshim/probeshim-release-key.asc /etc/apt/keyrings/probeshim.asc && "+
		"rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && cp /srv/probeshim/apt/probeshim.sources /etc/apt/sources.list.d/"); err != nil {
		t.Fatalf("adding the repository: %v\n%s", err, out)
	}
}

// apt runs apt-get update (which must not warn: the signature checked), then args.
func apt(ctx context.Context, ctr *nspawn.Container, args string) (string, error) {
	out, err := ctr.Sh(ctx, "apt-get update 2>&1")
	if err != nil {
		return out, fmt.Errorf("apt-get update: %w", err)
	}
	if strings.Contains(out, "W:") || strings.Contains(out, "E:") {
		return out, errors.New("apt-get update warned")
	}
	return ctr.Sh(ctx, "DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Options::=--force-confold "+args+" 2>&1")
}

// installFromApt installs probeshim with apt-get and configures it for the rig, as rigtest.Install
// does with dpkg -i.
func installFromApt(ctx context.Context, ctr *nspawn.Container, r rigtest.Rig) error {
	if out, err := apt(ctx, ctr, "install -y probeshim"); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return rigtest.Configure(ctx, ctr, r)
}
