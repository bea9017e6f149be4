// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
)

// ActivatedName is the FileDescriptorName= of the socket unit
// (probeshim-cri.socket).
const ActivatedName = "cri"

// Activated returns the CRI socket systemd passed to the service (socket
// activation, LISTEN_FDS): the one named ActivatedName, else the only unix
// socket passed; nil when there is none. It consumes the environment, so
// call it once. The listener never removes the socket file: it is
// systemd's, which keeps it, and the connections waiting on it, across
// restarts of the service.
func Activated() (net.Listener, error) {
	files := activation.Files(true)
	var named, unix []net.Listener
	for _, f := range files {
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			continue // not a listening socket; not ours to use
		}
		switch {
		case f.Name() == ActivatedName:
			named = append(named, l)
		case l.Addr().Network() == "unix":
			unix = append(unix, l)
		default:
			l.Close()
		}
	}
	pick := named
	if len(pick) == 0 {
		pick = unix
	}
	var keep net.Listener
	if len(pick) == 1 {
		keep = pick[0]
	}
	for _, l := range append(named, unix...) {
		if l != keep {
			l.Close()
		}
	}
	if len(pick) > 1 {
		return nil, fmt.Errorf("systemd passed %d sockets for the CRI proxy, want one (FileDescriptorName=%s)", len(pick), ActivatedName)
	}
	return keep, nil
}

// Listen makes the unix socket at path (mode 0660, its folder 0750 if
// made). A socket file left there by a stopped process is replaced; one
// something still answers on is an error. Closing the listener removes the
// socket, unless the path has been taken over since (systemd's socket
// unit, started later, binds the path anew).
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("CRI proxy socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("CRI proxy socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("CRI proxy socket %s: another process is serving it", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("CRI proxy socket: remove stale %s: %w", path, err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("CRI proxy socket: %w", err)
	}
	l.SetUnlinkOnClose(false) // see ownedListener
	fi, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, 0o660)
	}
	if err != nil {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("CRI proxy socket: %w", err)
	}
	return &ownedListener{UnixListener: l, path: path, file: fi}, nil
}

// ownedListener removes its socket file on Close only if the file is still
// the one it made.
type ownedListener struct {
	*net.UnixListener
	path string
	file os.FileInfo
	once sync.Once
}

func (l *ownedListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return err
}

// normPath compares socket paths: /var/run is /run on every distribution
// probeshim targets.
func normPath(p string) string {
	p = filepath.Clean(p)
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		p = "/run/" + rest
	}
	return p
}
