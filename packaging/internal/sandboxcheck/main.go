// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command sandboxcheck is a test fixture of the package tests: run in place of probeshim under the
// packaged unit (a drop-in replaces ExecStart and nothing else), it checks that the unit's hardening
// still allows what the service needs and denies what it should. It is not shipped.
//
//	sandboxcheck service NETNS ADDR SOCKET   as the unit's main process: READY=1, then on each
//	                                          SIGUSR1 run the checks, report in STATUS= and stderr
//	sandboxcheck serve-tcp ADDR               answer "ok" on a TCP address (a pod's server); an
//	                                          address other than loopback is added to lo first
//	sandboxcheck serve-unix PATH              answer "ok" on a Unix socket (containerd's place)
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probeshim/probeshim/shim/inroot"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sandboxcheck service NETNS ADDR SOCKET | serve-tcp ADDR | serve-unix PATH")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve-tcp":
		// A fresh network namespace has its loopback down (and no 127.0.0.1) until someone brings
		// it up, as the CNI loopback plugin does for a pod.
		if err := loopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "loopback up:", err)
			os.Exit(1)
		}
		// A server at a metadata address inside the pod: reachable but for IPAddressDeny=.
		if host, _, _ := net.SplitHostPort(os.Args[2]); !net.ParseIP(host).IsLoopback() {
			if err := addLoopbackAddr(net.ParseIP(host)); err != nil {
				fmt.Fprintln(os.Stderr, "add address:", err)
				os.Exit(1)
			}
		}
		serve("tcp", os.Args[2])
	case "serve-unix":
		_ = os.MkdirAll(filepath.Dir(os.Args[2]), 0o755)
		_ = os.Remove(os.Args[2])
		serve("unix", os.Args[2])
	case "service":
		if len(os.Args) != 5 {
			os.Exit(2)
		}
		service(os.Args[2], os.Args[3], os.Args[4])
	default:
		os.Exit(2)
	}
}

func serve(network, addr string) {
	l, err := net.Listen(network, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		_, _ = io.WriteString(c, "ok\n")
		_ = c.Close()
	}
}

func service(netns, addr, socket string) {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGTERM)
	notify("READY=1\nSTATUS=sandbox check: waiting for SIGUSR1")
	for s := range sig {
		if s == syscall.SIGTERM {
			notify("STOPPING=1")
			return
		}
		var failed []string
		for _, c := range checks(netns, addr, socket) {
			if c.err != nil {
				failed = append(failed, c.name)
				fmt.Fprintf(os.Stderr, "sandbox check FAIL %s: %v\n", c.name, c.err)
			} else {
				fmt.Fprintf(os.Stderr, "sandbox check ok %s\n", c.name)
			}
		}
		if len(failed) == 0 {
			notify("STATUS=sandbox check: all passed")
		} else {
			notify("STATUS=sandbox check: failed: " + strings.Join(failed, ","))
		}
	}
}

type result struct {
	name string
	err  error
}

func checks(netns, addr, socket string) []result {
	expectErr := func(err error, what string) error {
		if err == nil {
			return fmt.Errorf("%s succeeded, the sandbox should deny it", what)
		}
		return nil
	}
	return []result{
		// What the service needs.
		{"dial-in-pod-netns", dialInNetns(netns, addr)},
		{"containerd-socket", readOK("unix", socket)},
		{"containerd-exec-fifo", execFIFO("/run/containerd/fifo")},
		{"write-state-dir", writeRemove(os.Getenv("STATE_DIRECTORY"))},
		{"write-runtime-dir", writeRemove(os.Getenv("RUNTIME_DIRECTORY"))},
		{"read-config", readable("/etc/probeshim/config.yaml")},
		{"capabilities", capabilities()},
		{"exec-free-read", execFreeRead()},
		// A timed-out exec's descendants are found through other processes' /proc entries.
		{"read-proc-pid", readable("/proc/1/task/1/children")},
		// What it must not be able to do.
		{"no-write-etc", expectErr(writeRemove("/etc/probeshim"), "writing /etc/probeshim")},
		{"no-write-usr", expectErr(writeRemove("/usr/bin"), "writing /usr/bin")},
		{"no-raw-socket", expectErr(rawSocket(), "opening a raw socket")},
		{"no-mount-namespace", expectErr(unshareMount(), "unshare(CLONE_NEWNS)")},
		{"no-new-privileges", noNewPrivs()},
		{"no-proc-beyond-pids", expectErr(readable("/proc/stat"), "reading /proc/stat")},
		{"no-metadata-address-in-pod", inNetns(netns, func() error { return firewalled("169.254.169.254:80") })},
	}
}

// dialInNetns does what the service's network probes do (shim/netns): open the pod's namespace
// file by path, lock an OS thread, setns into it, dial there, and setns back into the service's own
// namespace. The namespace file is created after the service started, so this also checks that new
// mounts under /run/netns propagate into the service's mount namespace.
func dialInNetns(path, addr string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		origin, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer origin.Close()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		derr := readOK("tcp", addr)
		if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err)
			return
		}
		errc <- derr
	}()
	return <-errc
}

// inNetns runs f on a thread inside the network namespace at path.
func inNetns(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		ns, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// firewalled checks that IPAddressDeny= keeps the service from addr, where a server listens (the
// test's pod serves it, and connects at once without the directive): the kernel's cgroup filter
// drops the packets, so connect fails with EPERM or times out.
func firewalled(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("connected to %s, IPAddressDeny= should refuse it", addr)
	}
	var ne net.Error
	if !errors.Is(err, syscall.EPERM) && !(errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("dial %s: %w, want EPERM or a timeout from IPAddressDeny=", addr, err)
	}
	return nil
}

// addLoopbackAddr adds ip/32 to lo through rtnetlink (the rootfs has no ip(8)).
func addLoopbackAddr(ip net.IP) error {
	ip4 := ip.To4()
	if ip4 == nil {
		return fmt.Errorf("%v: IPv4 only", ip)
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// nlmsghdr, ifaddrmsg, then the attributes IFA_LOCAL and IFA_ADDRESS.
	b := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfAddrmsg+2*(unix.SizeofRtAttr+4))
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.RTM_NEWADDR)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	ne.PutUint32(b[8:], 1) // sequence
	b[16], b[17] = unix.AF_INET, 32
	ne.PutUint32(b[20:], uint32(lo.Index))
	for i, typ := range []uint16{unix.IFA_LOCAL, unix.IFA_ADDRESS} {
		off := unix.NLMSG_HDRLEN + unix.SizeofIfAddrmsg + i*(unix.SizeofRtAttr+4)
		ne.PutUint16(b[off:], unix.SizeofRtAttr+4)
		ne.PutUint16(b[off+2:], typ)
		copy(b[off+4:], ip4)
	}
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	resp := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, resp, 0)
	if err != nil {
		return err
	}
	if n < unix.NLMSG_HDRLEN+4 || ne.Uint16(resp[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("unexpected netlink answer (%d bytes)", n)
	}
	if errno := int32(ne.Uint32(resp[unix.NLMSG_HDRLEN:])); errno != 0 {
		return fmt.Errorf("RTM_NEWADDR %v on lo: %w", ip, syscall.Errno(-errno))
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func readOK(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "ok\n" {
		return fmt.Errorf("unexpected answer %q", b)
	}
	return nil
}

func writeRemove(dir string) error {
	if dir == "" {
		return errors.New("directory not set")
	}
	p := filepath.Join(dir, ".sandboxcheck")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		return err
	}
	return os.Remove(p)
}

// execFIFO does what containerd's client does for an exec's output (cio.NewFIFOSetInDir): a
// temporary folder with a FIFO in it.
func execFIFO(root string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(root, "")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return unix.Mkfifo(filepath.Join(dir, "exec-stdout"), 0o700)
}

func readable(p string) error {
	_, err := os.ReadFile(p)
	return err
}

// capabilities checks that the bounding and effective sets hold CAP_SYS_ADMIN, CAP_KILL and the
// capabilities of exec-free reads, and nothing else.
func capabilities() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	want := fmt.Sprintf("%016x", uint64(1)<<unix.CAP_SYS_ADMIN|uint64(1)<<unix.CAP_KILL|
		uint64(1)<<unix.CAP_SYS_PTRACE|uint64(1)<<unix.CAP_SETUID|uint64(1)<<unix.CAP_SETGID|uint64(1)<<unix.CAP_DAC_OVERRIDE)
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":\t")
		if (k == "CapBnd" || k == "CapEff") && strings.TrimSpace(v) != want {
			return fmt.Errorf("%s = %s, want %s (CAP_SYS_ADMIN, CAP_KILL, CAP_SYS_PTRACE, CAP_SETUID, CAP_SETGID, "+
				"CAP_DAC_OVERRIDE only)", k, strings.TrimSpace(v), want)
		}
	}
	return nil
}

// execFreeRead does what an exec-free probe does (shim/inroot): open another process' root (pid 1,
// root with every capability: it takes CAP_SYS_PTRACE) and read a file in it as an unprivileged
// user and as root (setfsuid, setfsgid, setgroups, capset on one thread).
func execFreeRead() error {
	root, err := inroot.OpenProcRoot(1, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, c := range []inroot.Creds{{UID: 65534, GID: 65534, Groups: []uint32{65534}}, {Caps: inroot.CapBit(unix.CAP_DAC_OVERRIDE)}} {
		if _, err := inroot.ReadFile(root, "/etc/passwd", c, 4096); err != nil {
			return fmt.Errorf("as %+v: %w", c, err)
		}
	}
	return nil
}

func rawSocket() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func unshareMount() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // a thread in a new mount namespace is not reused
		errc <- unix.Unshare(unix.CLONE_NEWNS)
	}()
	return <-errc
}

func noNewPrivs() error {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	if v != 1 {
		return errors.New("no_new_privs is not set")
	}
	return nil
}

func notify(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte(state))
}
