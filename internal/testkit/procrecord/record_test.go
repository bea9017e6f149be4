// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package procrecord

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// named starts `sleep 600` under the command name name (a copy of sleep), ended and reaped when
// the test ends.
func named(t *testing.T, name string) (Proc, *exec.Cmd) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep: ", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	in, err := os.Open(sleep)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
	p := Proc{Name: name, PID: cmd.Process.Pid, Start: StartTime(cmd.Process.Pid)}
	if p.Start == 0 || !p.Alive() {
		t.Fatalf("%s pid %d: no start time", name, p.PID)
	}
	return p, cmd
}

// gone starts a process and waits for it to end: an owner that was killed.
func gone(t *testing.T) Proc {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start := StartTime(pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return Proc{Name: "killed.test", PID: pid, Start: start}
}

func folder(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "k8s_test_framework_1")
	if err := os.MkdirAll(filepath.Join(d, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// A record whose owner is gone: its processes are ended and its folders removed; a process of the
// same name that is not recorded, one whose pid no longer has the recorded start time, and
// everything a live owner recorded stay.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	etcd, _ := named(t, "etcd")
	apiserver, _ := named(t, "kube-apiserver")
	decoy, _ := named(t, "etcd")
	reused, _ := named(t, "kube-apiserver")
	liveOwner, _ := named(t, "alive.test")
	liveChild, _ := named(t, "etcd")
	dead, keep, liveFolder := folder(t), folder(t), folder(t)

	stale := reused
	stale.Start-- // the pid was reused by a process started later
	leftBy := gone(t)
	for _, rec := range []Record{
		{Owner: leftBy, Processes: []Proc{etcd, apiserver, stale}, Folders: []string{dead, dead + "-never-made"}},
		{Owner: liveOwner, Processes: []Proc{liveChild}, Folders: []string{liveFolder}},
	} {
		if err := Write(dir, rec); err != nil {
			t.Fatal(err)
		}
	}

	lines, err := Sweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "test records: ended etcd pid " + itoa(etcd.PID) + " and kube-apiserver pid " + itoa(apiserver.PID) +
		" (kube-apiserver pid " + itoa(reused.PID) + " was gone already), removed 1 folder, left by killed.test pid " +
		itoa(leftBy.PID) + " that is gone"
	if len(lines) != 1 || lines[0] != want {
		t.Fatalf("Sweep said %q, want %q", lines, want)
	}
	for _, p := range []Proc{etcd, apiserver} {
		if p.Alive() {
			t.Errorf("recorded %s pid %d still runs", p.Name, p.PID)
		}
	}
	for _, p := range []Proc{decoy, reused, liveOwner, liveChild} {
		if !p.Alive() {
			t.Errorf("%s pid %d was ended; it is not in a record of a gone owner", p.Name, p.PID)
		}
	}
	if exists(dead) || !exists(keep) || !exists(liveFolder) {
		t.Errorf("folders after the sweep: recorded %v (want gone), unrecorded %v, live owner's %v (want kept)",
			exists(dead), exists(keep), exists(liveFolder))
	}
	if exists(filepath.Join(dir, recordName(leftBy))) || !exists(filepath.Join(dir, recordName(liveOwner))) {
		t.Errorf("records after the sweep: the gone owner's should be deleted, the live owner's kept")
	}

	// Nothing left to say the second time.
	if lines, err := Sweep(dir); err != nil || len(lines) != 0 {
		t.Errorf("second sweep: %q, %v", lines, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// The record holds what is started and not yet cleaned up, and is gone once all is.
func TestRecorder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	r := NewRecorder(dir, Self())
	a := Proc{Name: "etcd", PID: 10, Start: 100}
	b := Proc{Name: "kube-apiserver", PID: 11, Start: 101}
	forgetA, err := r.Add([]Proc{a}, []string{"/tmp/k8s_test_framework_a"})
	if err != nil {
		t.Fatal(err)
	}
	forgetB, err := r.Add([]Proc{b}, []string{"/tmp/k8s_test_framework_b"})
	if err != nil {
		t.Fatal(err)
	}
	read := func() Record {
		t.Helper()
		var rec Record
		data, err := os.ReadFile(r.Path())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := read(); rec.Owner != Self() || len(rec.Processes) != 2 || len(rec.Folders) != 2 {
		t.Fatalf("record %+v, want both parts with owner %+v", rec, Self())
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("records folder: %v, %v; want mode 0700", fi, err)
	}
	if err := forgetA(); err != nil {
		t.Fatal(err)
	}
	if rec := read(); len(rec.Processes) != 1 || rec.Processes[0] != b || rec.Folders[0] != "/tmp/k8s_test_framework_b" {
		t.Fatalf("record after forgetting the first part: %+v", rec)
	}
	// A live owner's record is not swept.
	if lines, err := Sweep(dir); err != nil || len(lines) != 0 || !exists(r.Path()) {
		t.Fatalf("sweep of a live owner's record: %q, %v", lines, err)
	}
	if err := forgetB(); err != nil {
		t.Fatal(err)
	}
	if exists(r.Path()) {
		t.Errorf("record %s still there with nothing in it", r.Path())
	}
}

// A pid with another start time is not the recorded process; a killed one is not alive.
func TestAlive(t *testing.T) {
	p, _ := named(t, "sleep")
	if !p.Alive() || (Proc{PID: p.PID, Start: p.Start + 1}).Alive() {
		t.Fatalf("Alive wrong for %+v", p)
	}
	if (Proc{PID: p.PID, Start: p.Start + 1}).Kill() || !p.Alive() {
		t.Fatal("Kill signalled a pid whose start time is not the recorded one")
	}
	if !p.Kill() || p.Alive() {
		t.Fatal("Kill did not end a live process")
	}
}

func TestChildren(t *testing.T) {
	p, _ := named(t, "kube-apiserver")
	found := false
	for _, c := range Children(os.Getpid()) {
		if c == p {
			found = true
		}
	}
	if !found {
		t.Errorf("Children(self) = %+v, want %+v among them", Children(os.Getpid()), p)
	}
	if args := p.Cmdline(); len(args) != 2 || args[1] != "600" {
		t.Errorf("Cmdline = %q", args)
	}
}
