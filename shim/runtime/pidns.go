// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// sharesPIDNamespace tells whether the process serving socket (containerd, whose shims open an
// exec's output paths) is in this process's PID namespace: only then can a shim open
// /proc/<our pid>/fd/<n> (pipeio.go). The kernel gives the peer's pid as this namespace sees it
// (SO_PEERCRED), 0 when the peer is in a namespace above ours (e.g. this service in a container,
// containerd on the host); a peer that is visible but in a namespace below ours sees other pids.
// An error means it could not be told: errNotServed when nothing answers on socket yet.
func sharesPIDNamespace(socket string) (bool, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return false, fmt.Errorf("%w: %w", errNotServed, err)
	}
	defer conn.Close()
	raw, err := conn.SyscallConn()
	if err != nil {
		return false, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return false, err
	}
	if credErr != nil {
		return false, fmt.Errorf("peer credentials of %s: %w", socket, credErr)
	}
	if cred.Pid == 0 {
		return false, nil
	}
	ours, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return false, err
	}
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", cred.Pid))
	if err != nil {
		return false, err
	}
	return ours == theirs, nil
}

// errNotServed: nothing answers on containerd's socket (yet).
var errNotServed = errors.New("containerd's socket not served")
