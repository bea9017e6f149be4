// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
	"github.com/probeshim/probeshim/packaging/nspawn"
)

// repoURL is where the test's apt repository answers inside the container: its own loopback (a
// private network namespace), served by packaging/internal/servedir.
const repoURL = "http://127.0.0.1:8080"

// The node install as docs/install/node.md gives it, through a signed apt repository served over
// HTTP: the release tool's repository (hack/release -apt-repo, the code `make release` runs) of the
// first test version, the key in /etc/apt/keyrings, the sources file the release ships,
// apt-get install. Then the next version is published into the repository and apt-get upgrade
// takes it; a tampered Release or package is refused first.
func testApt(t *testing.T, f *fixture) {
	key := writeRepoKey(t, f.work)
	repo := filepath.Join(f.work, "aptrepo")
	publish := func(debs ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(f.build, "release"), append([]string{"-apt-repo", repo, "-repo-url", repoURL}, debs...)...)
		cmd.Env = append(os.Environ(), "PROBESHIM_RELEASE_KEY="+key)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/release -apt-repo: %v\n%s", err, out)
		}
	}
	// The versions as dpkg shows them: nfpm adds the Debian revision.
	v1, v2 := f.ver[0]+"-1", f.ver[1]+"-1"
	publish(f.deb[0])
	n := bootNode(t, f, "pkgtest-apt", nspawn.Options{BindRO: []string{repo + ":/srv/probeshim"}})

	step(t, "the repository served on the node's loopback, the key and the sources file installed", func() {
		n.sh("systemd-run --unit=aptrepo /pkgs/servedir /srv/probeshim 127.0.0.1:8080")
		err := poll.Until(n.ctx, 10*time.Second, "the repository on "+repoURL, func(context.Context) (bool, string, error) {
			out, ok := n.try("/pkgs/httpsget %s/probeshim-release-key.asc", repoURL)
			return ok && strings.HasPrefix(out, "200 "), out, nil
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, n.sh("journalctl --no-pager -u aptrepo"))
		}
		// The docs fetch the key with curl, which the minimal base lacks; the file is the one served.
		n.sh("install -D -m 0644 /srv/probeshim/probeshim-release-key.asc /etc/apt/keyrings/probeshim.asc")
		n.sh("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && cp /srv/probeshim/apt/probeshim.sources /etc/apt/sources.list.d/")
	})

	step(t, "apt-get update checks the signature; apt-get install installs and starts the service", func() {
		out := n.sh("apt-get update 2>&1")
		if strings.Contains(out, "W:") || strings.Contains(out, "E:") {
			t.Fatalf("apt-get update warned:\n%s", out)
		}
		n.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y probeshim 2>&1")
		if v := installed(n); v != v1 {
			t.Fatalf("installed %q, want %q", v, v1)
		}
		n.expectStartedOnBareNode()
	})

	publish(f.deb[0], f.deb[1])
	inRelease := filepath.Join(repo, "apt", "dists", "stable", "InRelease")
	step(t, "a Release changed after signing is refused", func() {
		restore := tamper(t, inRelease, func(b []byte) []byte {
			return bytes.Replace(b, []byte("Suite: stable"), []byte("Suite: stab1e"), 1)
		})
		defer restore()
		out, ok := n.try("apt-get update 2>&1")
		if ok && !strings.Contains(out, "W:") {
			t.Errorf("apt-get update said nothing of a tampered InRelease:\n%s", out)
		}
		// Refused means its index is not read: the next version, which it lists, is no candidate.
		if c := candidate(n); c != v1 {
			t.Fatalf("apt-get update took a tampered InRelease: the candidate is %q, want %q still\n%s", c, v1, out)
		}
		t.Logf("apt-get update on a tampered InRelease:\n%s", logtail.Last(out, 4))
	})

	step(t, "a package changed after publishing is refused", func() {
		out := n.sh("apt-get update 2>&1")
		if c := candidate(n); c != v2 {
			t.Fatalf("after the next version was published the candidate is %q, want %q\n%s\nthe repository's log:\n%s", c, v2, out,
				n.sh("journalctl --no-pager -u aptrepo | tail -20"))
		}
		pool := filepath.Join(repo, "apt", "pool", "main", "p", "probeshim", filepath.Base(f.deb[1]))
		restore := tamper(t, pool, func(b []byte) []byte {
			b[len(b)-100] ^= 0xff // the same size: only the checksums tell
			return b
		})
		defer restore()
		out, ok := n.try("DEBIAN_FRONTEND=noninteractive apt-get upgrade -y 2>&1")
		if ok || !strings.Contains(out, "Hash Sum mismatch") {
			t.Fatalf("apt-get upgrade of a tampered package: succeeded=%v, want a Hash Sum mismatch:\n%s", ok, out)
		}
		if v := installed(n); v != v1 {
			t.Fatalf("after the refused upgrade %q is installed, want %q still", v, v1)
		}
	})

	step(t, "apt-get upgrade takes the next version and restarts the service", func() {
		before := n.expectRunning(true)
		n.sh("DEBIAN_FRONTEND=noninteractive apt-get upgrade -y 2>&1")
		if v := installed(n); v != v2 {
			t.Fatalf("upgraded to %q, want %q", v, v2)
		}
		if after := n.expectRunning(true); after == before {
			t.Errorf("the service was not restarted by the upgrade (PID %s)", after)
		}
	})
}

// tamper rewrites the file at p with edit and returns what puts it back.
func tamper(t *testing.T, p string, edit func([]byte) []byte) func() {
	t.Helper()
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	changed := edit(bytes.Clone(orig))
	if bytes.Equal(changed, orig) {
		t.Fatalf("tampering with %s changed nothing", p)
	}
	if err := os.WriteFile(p, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		// Dated a second on: HTTP's If-Modified-Since has whole seconds, and apt, which keeps the
		// tampered file's date, would otherwise be told the restored one is not modified.
		later := time.Now().Add(2 * time.Second)
		if err := errors.Join(os.WriteFile(p, orig, 0o644), os.Chtimes(p, later, later)); err != nil {
			t.Error(err)
		}
	}
}

// writeRepoKey writes an armored private OpenPGP key for the test's repository, as a release key
// is given to hack/release (PROBESHIM_RELEASE_KEY): both publications are signed with it.
func writeRepoKey(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "repo-key.asc")
	if err := os.WriteFile(p, testpki.OpenPGPKey(t, time.Now().Add(-time.Hour)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// installed is the version of the installed package, as dpkg shows it.
func installed(n *node) string {
	n.t.Helper()
	return n.sh("dpkg-query -W -f='${Version}' probeshim")
}

// candidate is the version apt-get install would take.
func candidate(n *node) string {
	n.t.Helper()
	for _, line := range strings.Split(n.sh("apt-cache policy probeshim"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
