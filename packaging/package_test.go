// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/packaging/nspawn"
	"github.com/probeshim/probeshim/packaging/rigtest"
	"github.com/probeshim/probeshim/shim/server"
)

// fixture is what every container test shares: the extracted base system and the packages.
type fixture struct {
	repo  string // repository root
	work  string // scratch folder of this run (console logs, the extracted rootfs)
	root  string // extracted base rootfs, read-only for the containers
	build string // bound at /pkgs: the packages and the sandbox check binary
	deb   [2]string
	rpm   [2]string
	ver   [2]string
}

// Version 1 is what gets installed, version 2 the upgrade; its default config differs, so an
// upgrade over an edited config must produce .dpkg-dist / .rpmnew.
var testVersions = [2]string{"1.0.0~pkgtest.1", "1.0.0~pkgtest.2"}

const editMark = "# edited by the package test"

// TestPackages installs, upgrades, removes and purges the .deb and the .rpm on a real systemd and
// checks the unit's behaviour there. It needs root (containers, cgroups, apt); it builds the
// Debian base system once (cached in $PROBESHIM_CACHE/packaging) and boots one container per
// subtest, in parallel.
func TestPackages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("package tests skipped: they boot systemd containers with systemd-nspawn and need root")
	}
	if testing.Short() {
		t.Skip("package tests skipped in -short mode (they take about a minute)")
	}
	f := setup(t)

	t.Run("lint", func(t *testing.T) {
		t.Parallel()
		step(t, "lintian and rpmlint", func() {
			cmd := exec.Command(filepath.Join(f.repo, "packaging/lint.sh"), f.deb[0], f.rpm[0])
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("packaging/lint.sh: %v", err)
			}
		})
	})
	t.Run("changelog", func(t *testing.T) { t.Parallel(); testChangelog(t, f) })
	t.Run("deb", func(t *testing.T) { t.Parallel(); testDeb(t, f) })
	t.Run("rpm", func(t *testing.T) { t.Parallel(); testRPM(t, f) })
	t.Run("apt", func(t *testing.T) { t.Parallel(); testApt(t, f) })
	t.Run("sandbox", func(t *testing.T) { t.Parallel(); testSandbox(t, f) })
	t.Run("cri-socket", func(t *testing.T) { t.Parallel(); testCRISocket(t, f) })
	t.Run("no-systemd", func(t *testing.T) { t.Parallel(); testWithoutSystemd(t, f) })
	t.Run("metrics-socket", func(t *testing.T) { t.Parallel(); testMetricsSocket(t, f) })
	t.Run("rig", func(t *testing.T) { testOnRig(t, f) })
}

// setup builds (or reuses) the base system, extracts it, and builds the packages.
func setup(t *testing.T) *fixture {
	ctx := context.Background()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{repo: repo, ver: testVersions}
	f.work = t.TempDir()
	f.root = filepath.Join(f.work, "rootfs")
	f.build = filepath.Join(f.work, "build")

	binary := os.Getenv("PROBESHIM_PKGTEST_BINARY") // development only: package this binary
	if binary == "" {
		if _, err := os.Stat(filepath.Join(repo, "shim/cmd/probeshim")); err != nil {
			t.Skip("package tests skipped: ./shim/cmd/probeshim does not exist yet, so there is no service to package")
		}
	}
	step(t, "rootfs (cached tarball, built if missing) and extraction", func() {
		if err := rigtest.Base(ctx, t.Logf, rigtest.CacheDir(), f.root); err != nil {
			t.Fatal(err)
		}
	})

	step(t, "build packages (2 versions x deb, rpm) and the sandbox check", func() {
		if err := os.MkdirAll(f.build, 0o755); err != nil {
			t.Fatal(err)
		}
		// Version 2 ships a changed default config.
		cfg2 := filepath.Join(f.work, "config-v2.yaml")
		orig, err := os.ReadFile(filepath.Join(repo, "packaging/files/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg2, append(orig, []byte("\n# A newer default (package test).\n")...), 0o644); err != nil {
			t.Fatal(err)
		}
		for i, v := range f.ver {
			env := []string{"PROBESHIM_VERSION=" + v, "PROBESHIM_DIST=" + f.build}
			if binary != "" {
				env = append(env, "PROBESHIM_BINARY="+binary)
			}
			if i == 1 {
				env = append(env, "PROBESHIM_CONFIG="+cfg2)
			}
			p, err := rigtest.Build(ctx, repo, env...)
			if err != nil {
				t.Fatal(err)
			}
			if p.Deb == "" || p.RPM == "" {
				t.Fatalf("build.sh wrote %+v, want a .deb and an .rpm", p)
			}
			f.deb[i], f.rpm[i] = filepath.Base(p.Deb), filepath.Base(p.RPM)
		}
		run(t, repo, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(f.build, "sandboxcheck"),
			"./packaging/internal/sandboxcheck")
		run(t, repo, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(f.build, "cricheck"),
			"./packaging/internal/cricheck")
		run(t, repo, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(f.build, "httpsget"),
			"./packaging/internal/httpsget")
		run(t, repo, []string{"CGO_ENABLED=0"}, "go", "build", "-o", filepath.Join(f.build, "servedir"),
			"./packaging/internal/servedir")
		// The release tool, for the apt repository of testApt (its -apt-repo).
		run(t, repo, nil, "go", "build", "-o", filepath.Join(f.build, "release"), "./hack/release")
	})
	for i := range f.deb {
		f.deb[i] = filepath.Join(f.build, f.deb[i])
		f.rpm[i] = filepath.Join(f.build, f.rpm[i])
	}
	return f
}

// in is a package's path inside the containers.
func in(hostPath string) string { return "/pkgs/" + filepath.Base(hostPath) }

func testDeb(t *testing.T, f *fixture) {
	n := bootNode(t, f, "pkgtest-deb", nspawn.Options{})
	var pid string

	step(t, "dpkg -i: enabled, started, waits for its dependencies without crash-looping", func() {
		start := time.Now()
		n.sh("dpkg -i %s", in(f.deb[0]))
		t.Logf("dpkg -i took %s", time.Since(start).Round(time.Millisecond))
		pid = n.expectStartedOnBareNode()
		// First run on a node without containerd or a kubeconfig: it must stay up and say what it
		// waits for, not restart every RestartSec.
		if st := n.prop("StatusText"); st == "" {
			t.Errorf("no STATUS= text after start; systemctl status should say what the service waits for")
		} else {
			t.Logf("status text on a node without containerd or kubeconfig: %q", st)
		}
		// measures: no restart for 7 s, longer than RestartSec
		time.Sleep(7 * time.Second)
		if got := n.expectRunning(true); got != pid || n.prop("NRestarts") != "0" {
			t.Fatalf("service restarted on its own (PID %s -> %s, NRestarts %s)", pid, got, n.prop("NRestarts"))
		}
	})

	step(t, "Type=notify: systemctl start blocks until READY=1", func() {
		// A drop-in delays the exec of the real command line by 3 s; the PID stays the same, so
		// READY=1 comes from probeshim itself. systemctl must not return before it.
		execStart := unitExecStart(t, f)
		n.sh(`mkdir -p /run/systemd/system/%s.d && cat >/run/systemd/system/%s.d/delay.conf <<'EOF'
[Service]
ExecStart=
ExecStart=/bin/sh -c 'sleep 3; exec "$$@"' sh %s
EOF
systemctl daemon-reload`, unit, unit, execStart)
		start := time.Now()
		n.sh("systemctl restart %s", unit)
		took := time.Since(start)
		if took < 3*time.Second {
			t.Fatalf("systemctl restart returned after %s, before the service could be ready (3 s delay)", took)
		}
		n.expectRunning(true)
		t.Logf("systemctl restart blocked for %s with a 3 s start delay", took.Round(time.Millisecond))
		n.sh("rm -r /run/systemd/system/%s.d && systemctl daemon-reload && systemctl restart %s", unit, unit)
		pid = n.expectRunning(true)
	})

	step(t, "journal fields are filterable", func() {
		checkJournalFields(t, n)
	})

	step(t, "systemctl reload: applies logLevel, refuses a broken config and runs on", func() {
		checkReload(t, n)
	})

	step(t, "watchdog: a service that stops pinging is aborted and restarted", func() {
		before := n.prop("NRestarts")
		// SIGSTOP freezes every thread, so no WATCHDOG=1 arrives, whatever the binary. systemd
		// sends SIGABRT (with SIGCONT) after WatchdogSec and restarts it after RestartSec.
		n.sh("systemctl kill --kill-who=main -s SIGSTOP %s", unit)
		n.eventually("restarted by the watchdog", 60*time.Second, func() bool {
			return n.prop("NRestarts") != before && n.prop("ActiveState") == "active" && n.prop("SubState") == "running"
		})
		newPID := n.expectRunning(true)
		if newPID == pid {
			t.Fatalf("main PID unchanged after the watchdog restart")
		}
		if out, _ := n.try("journalctl --no-pager -u %s | grep -c 'Watchdog timeout'", unit); out == "0" || out == "" {
			t.Fatalf("no 'Watchdog timeout' in the journal")
		}
		if out, _ := n.try("journalctl --no-pager -u %s | grep -c 'SIGABRT'", unit); out == "0" || out == "" {
			t.Errorf("no SIGABRT goroutine dump in the journal (GOTRACEBACK=all)")
		}
		pid = newPID
	})

	step(t, "systemctl restart and stop are clean", func() {
		n.sh("systemctl restart %s", unit)
		newPID := n.expectRunning(true)
		if newPID == pid {
			t.Fatalf("main PID unchanged after restart")
		}
		start := time.Now()
		n.sh("systemctl stop %s", unit)
		took := time.Since(start)
		n.expectStopped()
		if r := n.prop("Result"); r != "success" {
			t.Fatalf("Result = %s after stop, want success (clean exit on SIGTERM)", r)
		}
		if took > 10*time.Second {
			t.Fatalf("stop took %s: the service does not exit promptly on SIGTERM", took)
		}
		if out, _ := n.try("journalctl --no-pager -u %s | grep -c 'timed out. Killing'", unit); out != "0" {
			t.Fatalf("the service had to be SIGKILLed on stop")
		}
		n.sh("systemctl start %s", unit)
		pid = n.expectRunning(true)
	})

	step(t, "environment file /etc/default/probeshim reaches the service", func() {
		n.sh("echo 'PROBESHIM_PKGTEST_MARK=deb' >>/etc/default/probeshim && systemctl restart %s", unit)
		if env := n.environ(); !strings.Contains(env, "PROBESHIM_PKGTEST_MARK=deb") {
			t.Fatalf("variable from /etc/default/probeshim not in the service's environment:\n%s", env)
		}
		pid = n.expectRunning(true)
	})

	step(t, "upgrade keeps an edited config and leaves the service running", func() {
		n.sh("echo '%s' >>/etc/probeshim/config.yaml && echo state >/var/lib/probeshim/pkgtest-state", editMark)
		// confold: keep the admin's file and put the new default beside it (what apt does when the
		// admin answers the conffile prompt with "keep"); no prompt without a terminal.
		n.sh("dpkg -i --force-confdef --force-confold %s", in(f.deb[1]))
		if v := installed(n); v != f.ver[1]+"-1" {
			t.Fatalf("installed version %s, want %s-1", v, f.ver[1])
		}
		newPID := n.expectRunning(true)
		if newPID == pid {
			t.Fatalf("service not restarted on upgrade (same PID %s)", pid)
		}
		if !strings.Contains(n.sh("cat /etc/probeshim/config.yaml"), editMark) {
			t.Fatalf("upgrade overwrote the edited /etc/probeshim/config.yaml")
		}
		if !n.exists("/etc/probeshim/config.yaml.dpkg-dist") {
			t.Fatalf("the new default config was not put beside the edited one as config.yaml.dpkg-dist")
		}
		if !strings.Contains(n.environ(), "PROBESHIM_PKGTEST_MARK=deb") {
			t.Fatalf("upgrade lost the edited /etc/default/probeshim")
		}
		pid = newPID
	})

	step(t, "an admin's disable survives an upgrade (reinstall)", func() {
		n.sh("systemctl disable --now %s 2>/dev/null", unit)
		n.sh("dpkg -i --force-confdef --force-confold %s", in(f.deb[1]))
		if got, _ := n.try("systemctl is-enabled %s", unit); got != "disabled" {
			t.Fatalf("is-enabled = %q after upgrading a disabled service, want disabled", got)
		}
		n.expectStopped()
		n.sh("systemctl enable --now %s 2>/dev/null", unit)
		pid = n.expectRunning(true)
	})

	step(t, "dpkg -r stops the service and keeps config and state", func() {
		n.sh("dpkg -r probeshim")
		n.expectStopped()
		for _, p := range []string{"/usr/bin/probeshim", "/usr/lib/systemd/system/probeshim.service"} {
			if n.exists(p) {
				t.Fatalf("%s still there after remove", p)
			}
		}
		if !strings.Contains(n.sh("cat /etc/probeshim/config.yaml"), editMark) ||
			!n.exists("/etc/default/probeshim") || !n.exists("/var/lib/probeshim/pkgtest-state") {
			t.Fatalf("remove deleted config or state")
		}
		if st := n.sh("dpkg-query -W -f='${Status}' probeshim"); st != "deinstall ok config-files" {
			t.Fatalf("dpkg status %q after remove", st)
		}
	})

	step(t, "reinstall after remove enables and starts it again", func() {
		n.sh("dpkg -i --force-confdef --force-confold %s", in(f.deb[1]))
		n.expectRunning(true)
		n.sh("dpkg -r probeshim")
		n.expectStopped()
	})

	step(t, "dpkg -P deletes config, state and enablement", func() {
		n.sh("dpkg -P probeshim")
		for _, p := range []string{
			"/etc/probeshim", "/etc/default/probeshim", "/var/lib/probeshim",
			"/etc/systemd/system/multi-user.target.wants/probeshim.service",
			"/etc/systemd/system/probeshim.service", // deb-systemd-helper's mask
			"/var/lib/systemd/deb-systemd-helper-enabled/probeshim.service.dsh-also",
		} {
			if n.exists(p) {
				t.Errorf("%s still there after purge", p)
			}
		}
		if _, ok := n.try("dpkg-query -W probeshim"); ok {
			if st, _ := n.try("dpkg-query -W -f='${Status}' probeshim"); !strings.Contains(st, "not-installed") {
				t.Errorf("dpkg still knows probeshim after purge: %s", st)
			}
		}
	})
}

func testRPM(t *testing.T, f *fixture) {
	n := bootNode(t, f, "pkgtest-rpm", nspawn.Options{})
	var pid string
	// Debian's rpm: no dependency database of the system, hence --nodeps (the package has no
	// Requires anyway); it prints a warning about alien, which is fine here.
	const rpmOpts = "--nodeps"

	step(t, "rpm -i: enabled and started", func() {
		n.sh("rpm -i %s %s 2>&1", rpmOpts, in(f.rpm[0]))
		pid = n.expectStartedOnBareNode()
		expectCRISocketOff(t, n)
	})

	step(t, "systemctl reload: applies logLevel, refuses a broken config and runs on", func() {
		checkReload(t, n)
	})

	step(t, "environment file /etc/sysconfig/probeshim reaches the service", func() {
		n.sh("echo 'PROBESHIM_PKGTEST_MARK=rpm' >>/etc/sysconfig/probeshim && systemctl restart %s", unit)
		if env := n.environ(); !strings.Contains(env, "PROBESHIM_PKGTEST_MARK=rpm") {
			t.Fatalf("variable from /etc/sysconfig/probeshim not in the service's environment:\n%s", env)
		}
		pid = n.expectRunning(true)
	})

	step(t, "rpm -U keeps an edited config (.rpmnew) and restarts the service", func() {
		n.sh("echo '%s' >>/etc/probeshim/config.yaml", editMark)
		n.sh("rpm -U %s %s 2>&1", rpmOpts, in(f.rpm[1]))
		if v := n.sh("rpm -q --qf '%%{VERSION}' probeshim"); v != f.ver[1] {
			t.Fatalf("installed version %s, want %s", v, f.ver[1])
		}
		// The new %post ran before the old %preun: the service must still be enabled and running.
		newPID := n.expectRunning(true)
		if newPID == pid {
			t.Fatalf("service not restarted on upgrade (same PID %s)", pid)
		}
		if !strings.Contains(n.sh("cat /etc/probeshim/config.yaml"), editMark) {
			t.Fatalf("upgrade overwrote the edited /etc/probeshim/config.yaml")
		}
		if !n.exists("/etc/probeshim/config.yaml.rpmnew") {
			t.Fatalf("no config.yaml.rpmnew beside the edited config")
		}
		if !strings.Contains(n.environ(), "PROBESHIM_PKGTEST_MARK=rpm") {
			t.Fatalf("upgrade lost the edited /etc/sysconfig/probeshim")
		}
		pid = newPID
	})

	step(t, "an admin's stop and disable survive an upgrade (reinstall)", func() {
		n.sh("systemctl disable --now %s 2>/dev/null", unit)
		n.sh("rpm -U --replacepkgs %s %s 2>&1", rpmOpts, in(f.rpm[1]))
		if got, _ := n.try("systemctl is-enabled %s", unit); got != "disabled" {
			t.Fatalf("is-enabled = %q after upgrading a disabled service, want disabled", got)
		}
		n.expectStopped()
		n.sh("systemctl enable --now %s 2>/dev/null", unit)
		n.expectRunning(true)
	})

	step(t, "rpm -e stops and disables the service, keeps the edited config as .rpmsave", func() {
		n.sh("rpm -e %s probeshim 2>&1", rpmOpts)
		n.expectStopped()
		if n.exists("/etc/systemd/system/multi-user.target.wants/probeshim.service") {
			t.Fatalf("enablement symlink left after erase")
		}
		for _, p := range []string{"/usr/bin/probeshim", "/usr/lib/systemd/system/probeshim.service"} {
			if n.exists(p) {
				t.Fatalf("%s still there after erase", p)
			}
		}
		if !strings.Contains(n.sh("cat /etc/probeshim/config.yaml.rpmsave"), editMark) {
			t.Fatalf("edited config not kept as config.yaml.rpmsave")
		}
		if !n.exists("/etc/sysconfig/probeshim.rpmsave") {
			t.Fatalf("edited /etc/sysconfig/probeshim not kept as .rpmsave")
		}
	})
}

// testChangelog reads the changelog of the built packages, changelog.Debian.gz and the rpm's
// %changelog: written from git (packaging/changelog.sh), its newest entry is this version's and
// lists the newest commit's subject (only cut to 80 columns in the deb).
func testChangelog(t *testing.T, f *fixture) {
	subject := run(t, f.repo, nil, "git", "log", "-1", "--no-merges", "--format=%s")
	if run(t, f.repo, nil, "git", "rev-parse", "--is-shallow-repository") == "true" {
		subject = "Built from a shallow clone: only its newest commit is listed here."
	}
	words := strings.Fields(subject)
	start := strings.Join(words[:min(5, len(words))], " ")
	deb := run(t, f.work, nil, "/bin/sh", "-c", fmt.Sprintf("dpkg-deb --fsys-tarfile %s | tar -xO ./usr/share/doc/probeshim/changelog.Debian.gz | gunzip", f.deb[0]))
	if !strings.HasPrefix(deb, "probeshim ("+f.ver[0]+"-1) stable; urgency=medium\n") ||
		!strings.Contains(strings.Join(strings.Fields(deb), " "), "* "+start) {
		t.Fatalf("changelog.Debian.gz does not begin with this version's entry listing %q:\n%s", subject, deb)
	}
	t.Logf("changelog.Debian.gz begins:\n%s", strings.Join(strings.SplitN(deb, "\n", 6)[:5], "\n"))
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm is not installed: the rpm's changelog is not read")
	}
	rpm := run(t, f.work, nil, "rpm", "-qp", "--changelog", f.rpm[0])
	head, _, _ := strings.Cut(rpm, "\n")
	if !strings.HasSuffix(head, " - "+f.ver[0]+"-1") || !strings.Contains(strings.Join(strings.Fields(rpm), " "), "- "+strings.Join(words, " ")) {
		t.Fatalf("the rpm's changelog does not begin with this version's entry listing %q:\n%s", subject, rpm)
	}
}

// testWithoutSystemd installs and removes both packages where systemd is not running (a chroot,
// an image build): the scripts must succeed, enable the unit for the next boot and start nothing.
func testWithoutSystemd(t *testing.T, f *fixture) {
	script := fmt.Sprintf(`set -e
test ! -d /run/systemd/system
wants=/etc/systemd/system/multi-user.target.wants/probeshim.service
sockwants=/etc/systemd/system/sockets.target.wants/probeshim-cri.socket
dpkg -i %s
test -L $wants || { echo "deb: not enabled"; exit 1; }
test ! -e $sockwants || { echo "deb: CRI socket enabled"; exit 1; }
dpkg -P probeshim
test ! -e $wants || { echo "deb: still enabled after purge"; exit 1; }
rpm -i --nodeps %s 2>&1
test -L $wants || { echo "rpm: not enabled"; exit 1; }
test ! -e $sockwants || { echo "rpm: CRI socket enabled"; exit 1; }
rpm -e --nodeps probeshim 2>&1
test ! -e $wants || { echo "rpm: still enabled after erase"; exit 1; }
echo no-systemd-ok`, in(f.deb[0]), in(f.rpm[0]))
	step(t, "install and remove without a running systemd (chroot-like)", func() {
		out, err := nspawn.RunNoInit(context.Background(), nspawn.Options{
			Root: f.root, Name: "pkgtest-noinit", BindRO: []string{f.build + ":/pkgs"},
		}, "/bin/sh", "-c", script)
		if err != nil || !strings.Contains(out, "no-systemd-ok") {
			t.Fatalf("package scripts without systemd: %v\n%s", err, out)
		}
	})
}

// testSandbox replaces the service's command (and nothing else) with sandboxcheck and checks that
// the unit's hardening allows what probeshim needs — setns into a pod's network namespace created
// after the service started, the containerd socket, its state and runtime directories, its config —
// and denies the rest.
func testSandbox(t *testing.T, f *fixture) {
	// bpf: systemd in the container attaches IPAddressDeny='s filter with it; nspawn denies it by default.
	n := bootNode(t, f, "pkgtest-sandbox", nspawn.Options{SystemCallFilter: []string{"bpf"}})
	step(t, "sandbox of the packaged unit", func() {
		// Installed without starting it (policy-rc.d says no, deb-systemd-invoke obeys): this test is
		// about the unit's sandbox, not about the service.
		n.sh(`printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d &&
dpkg -i %s && rm /usr/sbin/policy-rc.d && install -m 0755 /pkgs/sandboxcheck /usr/local/bin/sandboxcheck`, in(f.deb[0]))
		// containerd's socket, served by a stand-in.
		n.sh("systemd-run --quiet --unit=fake-containerd /usr/local/bin/sandboxcheck serve-unix /run/containerd/containerd.sock")
		n.sh(`mkdir -p /run/systemd/system/%s.d && cat >/run/systemd/system/%s.d/sandboxcheck.conf <<'EOF'
[Service]
ExecStart=
ExecStart=/usr/local/bin/sandboxcheck service /run/netns/pod-a 127.0.0.1:8080 /run/containerd/containerd.sock
EOF
systemctl daemon-reload && systemctl restart %s`, unit, unit, unit)
		n.expectRunning(true)
		// The pod appears after the service started, as on a node: a network namespace pinned at
		// /run/netns (where containerd's CNI setup puts them) with a server on its loopback.
		n.sh("mkdir -p /run/netns && touch /run/netns/pod-a && unshare --net=/run/netns/pod-a true")
		n.sh("systemd-run --quiet --unit=pod-a -p NetworkNamespacePath=/run/netns/pod-a /usr/local/bin/sandboxcheck serve-tcp 127.0.0.1:8080")
		// And a server at the cloud metadata address, which IPAddressDeny= must keep the service from.
		n.sh("systemd-run --quiet --unit=pod-a-metadata -p NetworkNamespacePath=/run/netns/pod-a /usr/local/bin/sandboxcheck serve-tcp 169.254.169.254:80")
		// The pod's server may need a moment: until the checks pass, ask for another round (each
		// SIGUSR1 runs them once and reports in STATUS=, which starts as "waiting for SIGUSR1").
		var status string
		_ = poll.Until(n.ctx, 15*time.Second, "the sandbox checks to pass", func(context.Context) (bool, string, error) {
			if status = n.prop("StatusText"); status == "sandbox check: all passed" {
				return true, status, nil
			}
			n.sh("systemctl kill --kill-who=main -s SIGUSR1 %s", unit)
			return false, status, nil
		})
		out := n.sh("journalctl --no-pager -o cat -u %s | grep 'sandbox check' | tail -n 20", unit)
		if status != "sandbox check: all passed" {
			bpf, _ := n.try("journalctl --no-pager -o cat -b | grep -i -e bpf -e firewall | tail -n 5")
			t.Fatalf("the unit's sandbox is wrong (%s):\n%s\nsystemd on BPF:\n%s", status, out, bpf)
		}
		t.Logf("sandbox checks:\n%s", out)
		t.Logf("systemd-analyze security %s: %s", unit, n.sh("systemd-analyze security --no-pager %s | tail -n 1", unit))
		for _, p := range []string{"MemoryHigh", "MemoryMax", "TasksMax", "ProcSubset", "IPAddressDeny"} {
			if v := n.prop(p); v == "" || v == "infinity" || v == "all" {
				t.Errorf("%s=%q: the packaged unit should set it", p, v)
			}
		}
	})
}

const (
	criSocketUnit = "probeshim-cri.socket"
	criSocket     = "/run/probeshim/cri.sock"
	// What the service logs when it serves the socket systemd passed (shim/service/criproxy.go).
	activatedLog = "CRI proxy serving the socket activated by systemd"
)

// expectCRISocketOff checks the state right after an install: the socket unit is there, disabled
// and not listening, and nothing serves the CRI proxy's socket.
func expectCRISocketOff(t *testing.T, n *node) {
	t.Helper()
	if !n.exists("/usr/lib/systemd/system/" + criSocketUnit) {
		t.Fatalf("%s not installed", criSocketUnit)
	}
	if got, _ := n.try("systemctl is-enabled %s", criSocketUnit); got != "disabled" {
		t.Fatalf("%s is-enabled = %q after install, want disabled", criSocketUnit, got)
	}
	if got, _ := n.try("systemctl is-active %s", criSocketUnit); got == "active" {
		t.Fatalf("%s is active after install", criSocketUnit)
	}
	if n.exists(criSocket) {
		t.Fatalf("%s exists after install, with CRI proxy mode off", criSocket)
	}
}

// testCRISocket switches a node to CRI proxy mode with the packaged socket unit, against a stand-in
// for containerd's CRI (packaging/internal/cricheck), and checks what the kubelet relies on: the
// socket serves CRI, calls keep succeeding across a restart of the service (systemd holds the
// socket), a connection while the service is stopped starts it, and switching back leaves no socket.
func testCRISocket(t *testing.T, f *fixture) {
	n := bootNode(t, f, "pkgtest-cri", nspawn.Options{})
	step(t, "install: socket unit present, disabled, no socket", func() {
		n.sh("dpkg -i %s", in(f.deb[0]))
		n.expectStartedOnBareNode()
		expectCRISocketOff(t, n)
	})

	step(t, "enable the socket: the service serves it and says so", func() {
		n.sh("systemd-run --quiet --unit=fake-containerd /pkgs/cricheck serve /run/containerd/containerd.sock")
		// systemd refuses to start a socket unit while its service runs: stop, start both.
		n.sh("systemctl enable %s 2>&1 && systemctl stop %s && systemctl start %s %s", criSocketUnit, unit, criSocketUnit, unit)
		n.expectRunning(true)
		if got := n.sh("stat -c %%a:%%F:%%U %s", criSocket); got != "660:socket:root" {
			t.Fatalf("%s: %s, want 660:socket:root", criSocket, got)
		}
		n.eventually("logging that it serves the activated socket", 20*time.Second, func() bool {
			out, _ := n.try("journalctl --no-pager -o cat -u %s | grep -c '%s'", unit, activatedLog)
			return out != "" && out != "0"
		})
		if got := n.sh("/pkgs/cricheck call %s", criSocket); got != "cricheck-fake-containerd" {
			t.Fatalf("CRI Version through the proxy answered %q", got)
		}
	})

	step(t, "restart under load: no kubelet-like call fails", func() {
		n.sh(`systemd-run --quiet --unit=cri-loop /bin/sh -c '/pkgs/cricheck loop %s 15s >/tmp/cri-loop.out 2>&1; echo rc=$? >>/tmp/cri-loop.out'`, criSocket)
		// Restart only once the loop's connection is up and answered, so the restart falls inside it.
		n.eventually("the call loop's first answer", 20*time.Second, func() bool {
			out, _ := n.try("cat /tmp/cri-loop.out")
			return strings.Contains(out, "first call answered")
		})
		before := n.prop("MainPID")
		n.sh("systemctl restart %s", unit)
		if after := n.expectRunning(true); after == before {
			t.Fatalf("main PID unchanged after restart")
		}
		var out string
		n.eventually("the call loop to finish", 60*time.Second, func() bool {
			out, _ = n.try("cat /tmp/cri-loop.out")
			return strings.Contains(out, "rc=")
		})
		if !strings.Contains(out, "rc=0") || !strings.Contains(out, "failures=0") {
			t.Fatalf("calls failed across a restart of the service:\n%s", out)
		}
		t.Logf("calls across the restart: %s", out)
	})

	step(t, "service stopped: systemd holds the socket and a connection starts the service", func() {
		n.sh("systemctl stop %s", unit)
		if got, _ := n.try("systemctl is-active %s", criSocketUnit); got != "active" {
			t.Fatalf("%s is %q with the service stopped, want active", criSocketUnit, got)
		}
		if !n.exists(criSocket) {
			t.Fatalf("%s gone with the service stopped (RuntimeDirectoryPreserve)", criSocket)
		}
		if got := n.sh("/pkgs/cricheck call %s", criSocket); got != "cricheck-fake-containerd" {
			t.Fatalf("CRI Version while the service was stopped answered %q", got)
		}
		// Started by the connection. The proxy served before READY=1, which waits for containerd
		// (here a stand-in that is not one) up to its grace period.
		n.eventually("the socket-started service to be up", 30*time.Second, func() bool {
			return n.prop("ActiveState") == "active" && n.prop("SubState") == "running"
		})
		n.expectRunning(true)
	})

	step(t, "switch back: socket gone, service runs without it", func() {
		n.sh("systemctl disable --now %s 2>&1 && systemctl restart %s", criSocketUnit, unit)
		n.expectRunning(true)
		if n.exists(criSocket) {
			t.Fatalf("%s left after disabling the socket unit", criSocket)
		}
	})

	step(t, "remove and purge with the socket enabled: stopped, then its enablement deleted", func() {
		n.sh("systemctl enable %s 2>&1 && systemctl stop %s && systemctl start %s %s", criSocketUnit, unit, criSocketUnit, unit)
		n.sh("dpkg -r probeshim")
		n.expectStopped()
		if got, _ := n.try("systemctl is-active %s", criSocketUnit); got == "active" {
			t.Fatalf("%s still active after remove", criSocketUnit)
		}
		n.sh("dpkg -P probeshim")
		if n.exists("/etc/systemd/system/sockets.target.wants/" + criSocketUnit) {
			t.Fatalf("enablement of %s left after purge", criSocketUnit)
		}
	})
}

// testMetricsSocket opens the node's authenticated metrics port with the packaged units: shipped
// disabled, the socket listens once enabled, the first connection starts probeshim-metrics under
// its sandbox, which refuses a caller without a token (answered without asking the API server:
// the node here has none), and removing the package stops both.
func testMetricsSocket(t *testing.T, f *fixture) {
	n := bootNode(t, f, "pkgtest-metrics", nspawn.Options{})
	const socket, service, url = "probeshim-metrics.socket", "probeshim-metrics.service", "https://127.0.0.1:10269/metrics"
	step(t, "install: socket present and disabled, nothing listening", func() {
		n.sh("dpkg -i %s", in(f.deb[0]))
		if got, _ := n.try("systemctl is-enabled %s", socket); got != "disabled" {
			t.Fatalf("%s is-enabled = %q after install, want disabled", socket, got)
		}
		if out, ok := n.try("/pkgs/httpsget %s", url); ok {
			t.Fatalf("port 10269 answered before the socket was enabled: %s", out)
		}
	})
	step(t, "enable: the first connection starts the proxy, which refuses a caller without a token", func() {
		// Credentials the proxy can read; the API server they name is never asked for a caller
		// without a token.
		n.sh(`mkdir -p /etc/probeshim && printf '%%s\n' 'apiVersion: v1' 'kind: Config' 'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]' 'users: [{name: u, user: {token: x}}]' 'contexts: [{name: c, context: {cluster: c, user: u}}]' 'current-context: c' >/etc/probeshim/kubeconfig`)
		n.sh("systemctl enable --now %s 2>&1", socket)
		if got, _ := n.try("systemctl is-active %s", service); got == "active" {
			t.Fatalf("%s started before any connection", service)
		}
		if got := n.sh("/pkgs/httpsget %s", url); !strings.HasPrefix(got, "401 ") {
			t.Fatalf("GET %s without a token: %q, want 401", url, got)
		}
		if got, _ := n.try("systemctl is-active %s", service); got != "active" {
			t.Fatalf("%s is %q after a connection, want active", service, got)
		}
		n.eventually("the proxy logging what it serves", 20*time.Second, func() bool {
			out, _ := n.try("journalctl --no-pager -o cat -u %s | grep -c 'serving the node service'", service)
			return out != "" && out != "0"
		})
	})
	step(t, "remove: socket and proxy stopped", func() {
		n.sh("dpkg -r probeshim")
		for _, u := range []string{socket, service} {
			if got, _ := n.try("systemctl is-active %s", u); got == "active" {
				t.Fatalf("%s still active after remove", u)
			}
		}
	})
}

// checkJournalFields checks that the service's entries carry at least one of the fields docs/install/node.md
// documents and that journalctl can filter on it.
func checkJournalFields(t *testing.T, n *node) {
	t.Helper()
	// As in docs/install/node.md, "Logs" (and systemd/journal.go, which sends them).
	documented := []string{"NODE", "NAMESPACE", "POD_NAME", "POD_UID", "CONTAINER", "CONTAINER_ID", "PROBE"}
	var field, value string
	n.eventually("logging a documented field", 20*time.Second, func() bool {
		for _, e := range n.journalEntries() {
			for _, k := range documented {
				if v, ok := e[k].(string); ok && v != "" {
					field, value = k, v
					return true
				}
			}
		}
		return false
	})
	match := n.journalEntries(fmt.Sprintf("%s=%s", field, shellQuote(value)))
	if len(match) == 0 {
		t.Fatalf("journalctl -u probeshim %s=%s found nothing", field, value)
	}
	for _, e := range match {
		if e[field] != value {
			t.Fatalf("filter %s=%s returned an entry with %s=%v", field, value, field, e[field])
		}
	}
	if none := n.journalEntries(field + "=no-such-value-pkgtest"); len(none) != 0 {
		t.Fatalf("filter on a value nobody logged returned %d entries", len(none))
	}
	t.Logf("journalctl -u probeshim %s=%s: %d entries, e.g. %q", field, value, len(match), match[0]["MESSAGE"])
}

// checkReload edits the config of a running service and reloads it (ExecReload=, SIGHUP): a new
// logLevel applies and a changed setting that needs a restart is named, in the journal and in
// `probeshim status`; a config that does not load is refused, the service running on (same PID,
// no restart) and saying why. The config is as before at the end.
func checkReload(t *testing.T, n *node) {
	t.Helper()
	pid, restarts := n.expectRunning(true), n.prop("NRestarts")
	n.sh("cp /etc/probeshim/config.yaml /run/config.yaml.pkgtest")
	reload := func(what string, logged ...string) *server.ConfigStatus {
		t.Helper()
		n.sh("systemctl reload %s", unit)
		for _, l := range logged {
			n.eventually(what+": "+l, 20*time.Second, func() bool { return n.journalHas(l) })
		}
		// Back to active/running once the service has said READY=1 again, never restarted.
		n.eventually(what+": active again", 20*time.Second, func() bool {
			return n.prop("ActiveState") == "active" && n.prop("SubState") == "running"
		})
		if got := n.expectRunning(true); got != pid || n.prop("NRestarts") != restarts {
			t.Fatalf("%s: the service restarted (PID %s -> %s, NRestarts %s -> %s)", what, pid, got, restarts, n.prop("NRestarts"))
		}
		out, _ := n.try("probeshim status -o json") // exit code 1 (degraded) on a node without a cluster
		var st server.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.Config == nil || st.Config.LastReload == nil {
			t.Fatalf("%s: probeshim status -o json has no last reload (%v):\n%s", what, err, out)
		}
		return st.Config
	}

	n.sh("printf 'logLevel: debug\\nheartbeat:\\n  namespace: pkgtest-elsewhere\\n' >>/etc/probeshim/config.yaml")
	c := reload("logLevel: debug", "configuration reloaded: logLevel info -> debug",
		"heartbeat.namespace changed: restart the service to apply (systemctl restart probeshim)")
	if !slices.Equal(c.LastReload.Applied, []string{"logLevel"}) || !slices.Equal(c.RestartNeeded, []string{"heartbeat.namespace"}) {
		t.Fatalf("status after the reload: applied %q, waiting for a restart %q", c.LastReload.Applied, c.RestartNeeded)
	}

	n.sh("echo 'pkgtestNoSuchSetting: 1' >>/etc/probeshim/config.yaml")
	c = reload("a broken config", "configuration reload refused", `unknown field \"pkgtestNoSuchSetting\"`)
	if !strings.Contains(c.LastReload.Error, `unknown field "pkgtestNoSuchSetting"`) {
		t.Fatalf("status after the refused reload: %+v", c.LastReload)
	}
	if text, _ := n.try("probeshim status"); !strings.Contains(text, "CONFIG RELOAD REFUSED") {
		t.Fatalf("probeshim status does not show the refused reload:\n%s", text)
	}

	n.sh("cp /run/config.yaml.pkgtest /etc/probeshim/config.yaml && rm /run/config.yaml.pkgtest")
	c = reload("the config as before", "configuration reloaded: logLevel debug -> info")
	if c.LastReload.Error != "" || len(c.RestartNeeded) != 0 {
		t.Fatalf("status after restoring the config: %+v, waiting for a restart %q", c.LastReload, c.RestartNeeded)
	}
	t.Logf("reloads: %s", n.sh("journalctl --no-pager -o cat -u %s | grep -e 'configuration reload' -e 'restart the service' -e Reload", unit))
}

// testOnRig is the hook for the last test of the package issue: the packaged service, under
// systemd, probing a real pod. It boots the container inside the rig's network namespace with the
// rig's folder (containerd's socket, the pods' network namespaces, the node's kubeconfig and its
// certificates) bound in at the same paths, installs the .deb, points the config at the rig, and
// waits until a NodePodProbe's status fills in. It needs a running rig and skips without one. The
// rig suite e2e/packaged runs the same (packaging/rigtest) with a rig of its own and checks more;
// this hook is for a rig started by hand (make rig-up):
//
//	PROBESHIM_RIG_DIR         the rig's folder, bound read-only at the same path
//	PROBESHIM_RIG_NETNS       the rig's network namespace (/run/netns/NAME)
//	PROBESHIM_RIG_CONTAINERD  containerd's socket (inside the rig's folder)
//	PROBESHIM_RIG_KUBECONFIG  a kubeconfig for the node (system:node:<name>) inside the rig's folder
//	PROBESHIM_RIG_NODE        the node's name
//	PROBESHIM_RIG_CHECK       a host command that exits 0 once that node's NodePodProbe has status
func testOnRig(t *testing.T, f *fixture) {
	vars := append(append([]string(nil), rigtest.EnvVars...), "PROBESHIM_RIG_CHECK")
	r, ok := rigtest.FromEnv()
	if !ok || os.Getenv("PROBESHIM_RIG_CHECK") == "" {
		t.Skipf("packaged service on the rig: skipped, needs a running rig (%s); e2e/packaged runs it with its own", strings.Join(vars, ", "))
	}
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	n := bootNode(t, f, "pkgtest-rig", o)
	if err := rigtest.Install(n.ctx, n.c, in(f.deb[0]), r); err != nil {
		t.Fatal(err)
	}
	n.expectRunning(true)
	n.eventually("probing a pod on the rig (NodePodProbe status)", 2*time.Minute, func() bool {
		return exec.Command("/bin/sh", "-c", os.Getenv("PROBESHIM_RIG_CHECK")).Run() == nil
	})
	checkJournalFields(t, n)
}

// unitExecStart is the command line of the unit's ExecStart=.
func unitExecStart(t *testing.T, f *fixture) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.repo, "systemd/probeshim.service"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=(.+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no ExecStart= in systemd/probeshim.service")
	}
	return string(m[1])
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
