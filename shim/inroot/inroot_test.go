// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package inroot

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const limit = 10 << 10

var user = Creds{UID: 1000, GID: 1000}

// rootUser is a root container's process with containerd's default capabilities.
var rootUser = Creds{Caps: CapBit(unix.CAP_CHOWN) | CapBit(unix.CAP_DAC_OVERRIDE) | CapBit(unix.CAP_FOWNER) |
	CapBit(unix.CAP_FSETID) | CapBit(unix.CAP_KILL) | CapBit(unix.CAP_SETGID) | CapBit(unix.CAP_SETUID) |
	CapBit(unix.CAP_SETPCAP) | CapBit(unix.CAP_NET_BIND_SERVICE) | CapBit(unix.CAP_NET_RAW) |
	CapBit(unix.CAP_SYS_CHROOT) | CapBit(unix.CAP_MKNOD) | CapBit(unix.CAP_AUDIT_WRITE) | CapBit(unix.CAP_SETFCAP)}

// fixture is a container root made of real files with real owners and modes; outside is a
// directory beside it that nothing may reach through the root.
type fixture struct {
	root    *os.File
	dir     string
	outside string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files are owned by other users and the reading thread changes its file-system IDs")
	}
	dir, outside := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	file := func(name, content string, mode os.FileMode, uid, gid int) {
		t.Helper()
		p := filepath.Join(dir, name)
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, []byte(content), mode))
		must(os.Chmod(p, mode))
		must(os.Chown(p, uid, gid))
	}
	must(os.Chmod(dir, 0o755))
	file("tmp/idle", "idle\n", 0o644, 0, 0)
	file("tmp/secret", "root only\n", 0o600, 0, 0)
	file("tmp/mine", "the user's own\n", 0o600, 1000, 1000)
	file("tmp/group", "for group 500\n", 0o640, 0, 500)
	file("private/state", "behind a closed directory\n", 0o644, 0, 0)
	must(os.Chmod(filepath.Join(dir, "private"), 0o700))
	file("big", strings.Repeat("x", 3*limit), 0o644, 0, 0)
	must(os.Mkdir(filepath.Join(dir, "adir"), 0o755))
	must(unix.Mkfifo(filepath.Join(dir, "fifo"), 0o666))

	// The host's secret, and a file of the same absolute name inside the root.
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret\n"), 0o644))
	file(filepath.Join(outside, "secret"), "the container's own\n", 0o644, 0, 0)
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "tmp/abs-link")))
	// Enough "../" to reach the host's / from the root, then the host's secret.
	must(os.Symlink(strings.Repeat("../", 20)+strings.TrimPrefix(secretPath(outside), "/"), filepath.Join(dir, "tmp/dotdot-link")))
	must(os.Symlink(strings.Repeat("../", 20)+"etc/hostname", filepath.Join(dir, "tmp/deep-link")))
	must(os.Symlink("/proc/self/root/etc/hostname", filepath.Join(dir, "tmp/magic-link")))

	root, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	must(err)
	t.Cleanup(func() { root.Close() })
	return &fixture{root: root, dir: dir, outside: outside}
}

func secretPath(outside string) string { return filepath.Join(outside, "secret") }

// TestReadFileWithoutOpenat2: where the kernel has no openat2 (or a seccomp filter refuses it),
// filepath-securejoin resolves every path of TestReadFile alike (here through its own openat2 and
// retries; on such a kernel, its checked walk).
func TestReadFileWithoutOpenat2(t *testing.T) {
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { openat2 = unix.Openat2 })
	TestReadFile(t)
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	secret := secretPath(f.outside)
	cases := []struct {
		name    string
		path    string
		creds   Creds
		want    string
		wantErr string // the message, as cat would print it
		errno   error
	}{
		{name: "readable", path: "/tmp/idle", creds: user, want: "idle\n"},
		{name: "own file", path: "/tmp/mine", creds: user, want: "the user's own\n"},
		{name: "root reads anything", path: "/tmp/secret", creds: rootUser, want: "root only\n"},
		{name: "root with CAP_DAC_READ_SEARCH alone reads anything", path: "/tmp/mine",
			creds: Creds{Caps: CapBit(unix.CAP_DAC_READ_SEARCH)}, want: "the user's own\n"},
		{name: "missing", path: "/tmp/nothing", creds: user,
			wantErr: "cat: /tmp/nothing: No such file or directory", errno: unix.ENOENT},
		{name: "unreadable for the user", path: "/tmp/secret", creds: user,
			wantErr: "cat: /tmp/secret: Permission denied", errno: unix.EACCES},
		{name: "group by supplementary group", path: "/tmp/group", creds: Creds{UID: 1000, GID: 1000, Groups: []uint32{500}},
			want: "for group 500\n"},
		{name: "group by primary group", path: "/tmp/group", creds: Creds{UID: 1000, GID: 500}, want: "for group 500\n"},
		{name: "group without it", path: "/tmp/group", creds: user, errno: unix.EACCES},
		{name: "directory not searchable", path: "/private/state", creds: user, errno: unix.EACCES},
		{name: "root without DAC capabilities", path: "/tmp/mine", creds: Creds{},
			wantErr: "cat: /tmp/mine: Permission denied", errno: unix.EACCES},
		{name: "root without DAC capabilities, own file", path: "/tmp/secret", creds: Creds{},
			want: "root only\n"},
		{name: "absolute symlink stays in the root", path: "/tmp/abs-link", creds: user, want: "the container's own\n"},
		{name: "dot-dot symlink stays in the root", path: "/tmp/dotdot-link", creds: user, want: "the container's own\n"},
		{name: "dot-dot past the root", path: "/tmp/deep-link", creds: Creds{}, errno: unix.ENOENT},
		{name: "dot-dot in the path", path: "/../../../../" + secret, creds: rootUser, want: "the container's own\n"},
		{name: "a /proc link resolves in the root", path: "/tmp/magic-link", creds: Creds{}, errno: unix.ENOENT},
		{name: "oversized", path: "/big", creds: user, want: strings.Repeat("x", limit)},
		{name: "a directory", path: "/adir", creds: user, wantErr: "cat: /adir: Is a directory", errno: unix.EISDIR},
		{name: "a FIFO is never opened", path: "/fifo", creds: user, wantErr: "cat: /fifo: Not a regular file", errno: ErrNotRegular},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFile(f.root, tc.path, tc.creds, limit)
			if tc.errno == nil {
				if err != nil || string(got) != tc.want {
					t.Fatalf("ReadFile(%s) = %.40q, %v; want %.40q (%d bytes)", tc.path, got, err, tc.want, len(tc.want))
				}
				return
			}
			var ie *Error
			if !errors.As(err, &ie) || !errors.Is(err, tc.errno) {
				t.Fatalf("ReadFile(%s) = %.40q, %v; want an *Error wrapping %v", tc.path, got, err, tc.errno)
			}
			if tc.wantErr != "" && err.Error() != tc.wantErr {
				t.Fatalf("message %q, want %q", err.Error(), tc.wantErr)
			}
		})
	}
	// The host's file was never read through the root.
	if b, _ := os.ReadFile(secret); !bytes.Equal(b, []byte("host secret\n")) {
		t.Fatalf("host file changed: %q", b)
	}
}

// After any read, success or not, every thread of the process has its own identity back.
func TestReadFileRestoresTheThread(t *testing.T) {
	f := newFixture(t)
	before := threadIdentities(t)
	for range 50 {
		_, _ = ReadFile(f.root, "/tmp/idle", Creds{UID: 1000, GID: 1000, Groups: []uint32{1, 2, 3}}, limit)
		_, _ = ReadFile(f.root, "/tmp/secret", user, limit)
		_, _ = ReadFile(f.root, "/tmp/mine", Creds{}, limit)
		_, _ = ReadFile(f.root, "/tmp/mine", rootUser, limit)
	}
	after := threadIdentities(t)
	for id := range after {
		if id != before.any() {
			t.Fatalf("a thread kept a reader's identity: %q (the process' is %q)", id, before.any())
		}
	}
	// And the process can still read as root what the users could not.
	if _, err := os.ReadFile(filepath.Join(f.dir, "tmp/secret")); err != nil {
		t.Fatal(err)
	}
}

type identities map[string]bool

func (s identities) any() string {
	for id := range s {
		return id
	}
	return ""
}

// threadIdentities returns the distinct Uid/Gid/Groups/CapEff lines of the process' threads.
func threadIdentities(t *testing.T) identities {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := identities{}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		var keep []string
		for _, line := range strings.Split(string(b), "\n") {
			for _, k := range []string{"Uid:", "Gid:", "Groups:", "CapEff:"} {
				if strings.HasPrefix(line, k) {
					keep = append(keep, line)
				}
			}
		}
		out[strings.Join(keep, " | ")] = true
	}
	if len(out) != 1 {
		t.Fatalf("threads differ in identity: %v", out)
	}
	return out
}

// A FIFO nobody writes must not hang the read.
func TestReadFileFIFODoesNotBlock(t *testing.T) {
	f := newFixture(t)
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(f.root, "/fifo", Creds{}, limit)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read of a FIFO blocked")
	}
}

func TestOpenProcRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to open /proc/<pid>/root")
	}
	st, err := StartTime(os.Getpid())
	if err != nil || st == 0 {
		t.Fatalf("StartTime = %d, %v", st, err)
	}
	root, err := OpenProcRoot(os.Getpid(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	want, err := os.ReadFile("/etc/hostname")
	if err != nil {
		t.Skip("no /etc/hostname to compare with")
	}
	got, err := ReadFile(root, "/etc/hostname", Creds{}, limit)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read through own root = %q, %v; want %q", got, err, want)
	}
	if _, err := OpenProcRoot(os.Getpid(), st+1); err == nil {
		t.Fatal("a process with another start time was taken for the container's")
	}
	if _, err := OpenProcRoot(1<<22+1, 0); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("no such process: %v", err)
	}
}

// BenchmarkReadFile is the cost of one exec-free probe's read: switch the thread to the user,
// resolve and open in the root, read, switch back.
func BenchmarkReadFile(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the reading thread changes its file-system IDs")
	}
	dir := b.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "idle"), []byte("no players\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	for b.Loop() {
		if _, err := ReadFile(root, "/idle", user, limit); err != nil {
			b.Fatal(err)
		}
	}
}

// Without CAP_SETUID, CAP_SETGID and CAP_DAC_OVERRIDE (a unit that does not grant them) a read is refused
// with ErrNotPermitted, nothing read, and the thread keeps the service's identity. Runs the test
// binary again under setpriv with those capabilities dropped from the bounding set. (The fixture is
// made before the capabilities matter: the child is root and owns what it creates.)
func TestReadFileNotPermitted(t *testing.T) {
	if os.Getenv("INROOT_NOT_PERMITTED_CHILD") == "1" {
		f := newFixture(t)
		before := threadIdentities(t)
		// A user, and root with CAP_DAC_OVERRIDE (which the child lacks, as the container has it).
		for _, c := range []Creds{user, {Caps: CapBit(unix.CAP_DAC_OVERRIDE)}} {
			b, err := ReadFile(f.root, "/tmp/idle", c, limit)
			if !errors.Is(err, ErrNotPermitted) || b != nil {
				t.Fatalf("ReadFile as %+v = %q, %v; want ErrNotPermitted", c, b, err)
			}
		}
		if after := threadIdentities(t); after.any() != before.any() {
			t.Fatalf("identity changed: %v, was %v", after, before)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop capabilities from a child")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) to drop capabilities with")
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-setuid,-setgid,-dac_override", "--inh-caps", "-setuid,-setgid,-dac_override", "--",
		os.Args[0], "-test.run", "^TestReadFileNotPermitted$", "-test.v")
	cmd.Env = append(os.Environ(), "INROOT_NOT_PERMITTED_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReadFileNotPermitted") {
		t.Fatalf("child without CAP_SETUID/CAP_SETGID: %v\n%s", err, out)
	}
}

// rootProcess starts a process of root's that lives until the test ends and returns its pid.
func rootProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// The reading thread has the container process's capabilities and no other: the service's
// CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_SYSLOG are gone while it reads. Seen through what those
// capabilities decide: a uid-1000 process may not read a root process's memory map
// (/proc/<pid>/maps is mode 0444, and ptrace rules decide), and with the service's
// CAP_SYS_PTRACE still effective the read did (the finding of issue 30 item 3).
func TestReadRunsWithOnlyTheContainersCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the reading thread changes its file-system IDs and capabilities")
	}
	maps := "/proc/" + strconv.Itoa(rootProcess(t)) + "/maps"
	permitted := func() uint64 {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var d [2]unix.CapUserData
		if err := unix.Capget(&hdr, &d[0]); err != nil {
			t.Fatal(err)
		}
		return uint64(d[0].Permitted) | uint64(d[1].Permitted)<<32
	}()
	cases := []struct {
		name     string
		creds    Creds
		wantCaps uint64
		mapsErr  error // opening a root process's memory map
	}{
		{name: "a user", creds: user, wantCaps: 0, mapsErr: unix.EACCES},
		{name: "root without capabilities", creds: Creds{}, wantCaps: 0, mapsErr: unix.EACCES},
		// Without CAP_SYS_PTRACE a root process may read the map only of a process whose
		// capabilities it has all of, which the test's process is not.
		{name: "root with containerd's defaults", creds: rootUser, wantCaps: rootUser.Caps & permitted, mapsErr: unix.EACCES},
		{name: "root with CAP_DAC_READ_SEARCH", creds: Creds{Caps: CapBit(unix.CAP_DAC_READ_SEARCH)},
			wantCaps: CapBit(unix.CAP_DAC_READ_SEARCH), mapsErr: unix.EACCES},
		{name: "a privileged container", creds: Creds{Caps: ^uint64(0)}, wantCaps: permitted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct {
				caps    uint64
				mapsErr error
				err     error
			}
			done := make(chan seen, 1)
			go func() {
				runtime.LockOSThread() // not unlocked: the runtime ends the thread after
				var s seen
				saved, err := become(tc.creds)
				if err == nil {
					hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
					var d [2]unix.CapUserData
					s.err = unix.Capget(&hdr, &d[0])
					s.caps = uint64(d[0].Effective) | uint64(d[1].Effective)<<32
					fd, err := unix.Open(maps, unix.O_RDONLY|unix.O_CLOEXEC, 0)
					if err == nil {
						unix.Close(fd)
					}
					s.mapsErr = err
				}
				s.err = errors.Join(err, s.err, restore(saved))
				done <- s
			}()
			s := <-done
			if s.err != nil {
				t.Fatal(s.err)
			}
			if s.caps != tc.wantCaps {
				t.Errorf("effective capabilities while reading %#x, want %#x", s.caps, tc.wantCaps)
			}
			if !errors.Is(s.mapsErr, tc.mapsErr) && (s.mapsErr != nil || tc.mapsErr != nil) {
				t.Errorf("open %s: %v, want %v", maps, s.mapsErr, tc.mapsErr)
			}
		})
	}
	// And the rest of the process keeps the service's identity.
	threadIdentities(t)
}

// Files of kernel file systems are never read, for any user: what they show depends on the
// reader's credentials and on ptrace rules, not only on owner and mode. Here the container's root
// is the host's, as for a pod that mounts the host's /proc or /sys.
func TestReadFileRefusesKernelFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the reading thread changes its file-system IDs")
	}
	root, err := os.OpenFile("/", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	pid := strconv.Itoa(rootProcess(t))
	paths := []string{"/proc/" + pid + "/maps", "/proc/" + pid + "/stat", "/proc/kallsyms", "/proc/version",
		"/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.controllers"}
	for _, p := range paths {
		for _, c := range []Creds{user, rootUser} {
			b, err := ReadFile(root, p, c, limit)
			if _, statErr := os.Stat(p); statErr != nil {
				continue // not on this kernel
			}
			var ie *Error
			if !errors.As(err, &ie) || !errors.Is(err, ErrKernelFS) || b != nil {
				t.Errorf("ReadFile(%s) as uid %d = %.30q, %v; want %v", p, c.UID, b, err, ErrKernelFS)
			} else if want := "cat: " + p + ": On a kernel file system (/proc, /sys), not read without exec"; err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		}
	}
	// An ordinary file beside them is read.
	if _, err := ReadFile(root, "/etc/passwd", user, limit); err != nil {
		t.Fatal(err)
	}
}
