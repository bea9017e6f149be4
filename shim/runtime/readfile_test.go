// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"errors"
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/inroot"
)

// The reader takes the identity of a process the container's spec starts: its IDs mapped to the
// host through a user namespace, and the capabilities execve leaves it.
func TestFSCredsOf(t *testing.T) {
	caps := func(bounding ...string) *specs.LinuxCapabilities {
		return &specs.LinuxCapabilities{Bounding: bounding, Effective: bounding, Permitted: bounding}
	}
	bit := inroot.CapBit
	cases := []struct {
		name string
		spec specs.Spec
		want inroot.Creds
	}{
		{name: "non-root with groups", spec: specs.Spec{Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 2000, AdditionalGids: []uint32{2000, 3000}}, Capabilities: caps("CAP_CHOWN", "CAP_DAC_OVERRIDE")}},
			want: inroot.Creds{UID: 1000, GID: 2000, Groups: []uint32{2000, 3000}}}, // execve took every capability
		{name: "non-root with an ambient capability", spec: specs.Spec{Process: &specs.Process{
			User: specs.User{UID: 1000, GID: 1000}, Capabilities: &specs.LinuxCapabilities{
				Bounding: []string{"CAP_NET_BIND_SERVICE", "CAP_SYS_PTRACE"}, Ambient: []string{"CAP_NET_BIND_SERVICE"}}}},
			want: inroot.Creds{UID: 1000, GID: 1000, Caps: bit(unix.CAP_NET_BIND_SERVICE)}},
		{name: "root with the default capabilities", spec: specs.Spec{Process: &specs.Process{
			Capabilities: caps("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")}},
			want: inroot.Creds{Caps: bit(unix.CAP_CHOWN) | bit(unix.CAP_DAC_OVERRIDE) | bit(unix.CAP_FOWNER)}},
		{name: "privileged", spec: specs.Spec{Process: &specs.Process{
			Capabilities: caps("CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE", "CAP_FROM_THE_FUTURE")}},
			want: inroot.Creds{Caps: bit(unix.CAP_SYS_ADMIN) | bit(unix.CAP_SYS_PTRACE) | bit(unix.CAP_CHECKPOINT_RESTORE)}},
		{name: "root with capabilities dropped", spec: specs.Spec{Process: &specs.Process{Capabilities: caps()}},
			want: inroot.Creds{}},
		{name: "user namespace", spec: specs.Spec{
			Process: &specs.Process{User: specs.User{UID: 0, GID: 5, AdditionalGids: []uint32{70000}},
				Capabilities: caps("CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH")},
			Linux: &specs.Linux{
				UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}},
				GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}}},
			want: inroot.Creds{UID: 100000, GID: 200005, Groups: []uint32{overflowID}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fsCredsOf(&tc.spec); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("creds = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A file cat could not read is the probe's result, with cat's text.
func TestUnreadableIsTheProbeResult(t *testing.T) {
	err := error(unreadable{&inroot.Error{Path: "/tmp/idle", Err: unix.ENOENT}})
	if !errors.Is(err, prober.ErrFileUnreadable) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("%v does not wrap ErrFileUnreadable and ENOENT", err)
	}
	if want := "cat: /tmp/idle: No such file or directory"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

// A file never read without exec is no result but a probe error that says so, with cat-like text;
// any other file cat could not read stays a result.
func TestRefusedReadIsAProbeError(t *testing.T) {
	for _, tc := range []struct {
		err     *inroot.Error
		refused bool
		text    string
	}{
		{&inroot.Error{Path: "/host/proc/1/status", Err: inroot.ErrKernelFS}, true,
			"cat: /host/proc/1/status: On a kernel file system (/proc, /sys), not read without exec"},
		{&inroot.Error{Path: "/tmp/fifo", Err: inroot.ErrNotRegular}, true, "cat: /tmp/fifo: Not a regular file"},
		{&inroot.Error{Path: "/tmp/locked", Err: unix.EACCES}, false, "cat: /tmp/locked: Permission denied"},
	} {
		err := catError(tc.err)
		if err.Error() != tc.text || errors.Is(err, prober.ErrReadRefused) != tc.refused || errors.Is(err, prober.ErrFileUnreadable) == tc.refused {
			t.Errorf("%v: refused %t, unreadable %t; want refused %t, text %q", err,
				errors.Is(err, prober.ErrReadRefused), errors.Is(err, prober.ErrFileUnreadable), tc.refused, tc.text)
		}
		if tc.refused && prober.ErrorReason(err) != prober.ReasonExecFreeReadRefused {
			t.Errorf("%v: reason %s, want %s", err, prober.ErrorReason(err), prober.ReasonExecFreeReadRefused)
		}
	}
}
