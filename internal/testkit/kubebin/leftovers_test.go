// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kubebin_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

// helperEnv makes the test binary an envtest user that starts an environment, prints its etcd
// data dir and API server cert dir, and waits to be killed.
const helperEnv = "PROBESHIM_KUBEBIN_ENVTEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	os.Exit(m.Run())
}

func runHelper() {
	dir, err := kubebin.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := kubebin.Environment(dir)
	if _, err := env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(env.ControlPlane.Etcd.DataDir, env.ControlPlane.APIServer.CertDir)
	select {} // until killed, as by go test's -timeout or a signal
}

// A test binary killed with SIGKILL leaves envtest's etcd and kube-apiserver running and their
// folders behind; the next start's sweep ends exactly those (by recorded pid and start time) and
// removes the folders, and says so. Processes of the same names that are not recorded stay.
func TestKilledRunLeavesNothing(t *testing.T) {
	if os.Getenv(kubebin.UnitOnlyEnv) != "" {
		t.Skip(kubebin.UnitOnlyEnv + " is set: this test starts a real API server (make integration)")
	}
	if _, err := kubebin.Dir(); err != nil {
		t.Fatal(err)
	}
	records := t.TempDir() // never the shared records folder: other runs' records are not ours
	t.Setenv(procrecord.DirEnv, records)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper := cmd.Process.Pid
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	// Whatever fails below, the helper and what it started go.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
		_, _ = procrecord.Sweep(records)
	})

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, out)
	}()
	var dirs []string
	select {
	case l := <-line:
		dirs = strings.Fields(l)
	case <-time.After(3 * time.Minute):
	}
	if len(dirs) != 2 {
		t.Fatalf("the helper did not start envtest; its output:\n%s", stderr.String())
	}
	dataDir, certDir := dirs[0], dirs[1]

	// What the helper recorded: itself, its etcd and kube-apiserver, envtest's folders.
	files, _ := filepath.Glob(filepath.Join(records, "*.json"))
	if len(files) != 1 {
		t.Fatalf("records %q, want the helper's one", files)
	}
	var rec procrecord.Record
	if b, err := os.ReadFile(files[0]); err != nil || json.Unmarshal(b, &rec) != nil {
		t.Fatalf("record %s: %v", files[0], err)
	}
	if rec.Owner.PID != helper {
		t.Fatalf("record owner %+v, want the helper pid %d", rec.Owner, helper)
	}
	byName := map[string]procrecord.Proc{}
	for _, p := range rec.Processes {
		byName[p.Name] = p
	}
	etcd, apiserver := byName["etcd"], byName["kube-apiserver"]
	if len(rec.Processes) != 2 || !slices.Contains(etcd.Cmdline(), "--data-dir="+dataDir) ||
		!slices.Contains(apiserver.Cmdline(), "--cert-dir="+certDir) {
		t.Fatalf("recorded processes %+v: want the etcd of %s and the kube-apiserver of %s", rec.Processes, dataDir, certDir)
	}
	if !slices.Contains(rec.Folders, dataDir) || !slices.Contains(rec.Folders, certDir) {
		t.Fatalf("recorded folders %q, want %s and %s among them", rec.Folders, dataDir, certDir)
	}

	// Processes named like envtest's that nobody recorded: another test binary's, say.
	decoys := []procrecord.Proc{decoy(t, "etcd"), decoy(t, "kube-apiserver")}

	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited

	// The bug: the killed binary's etcd and kube-apiserver still run, its folders are still there.
	for _, p := range []procrecord.Proc{etcd, apiserver} {
		if !p.Alive() {
			t.Errorf("%s pid %d ended with the test binary: nothing left to sweep", p.Name, p.PID)
		}
	}
	for _, f := range rec.Folders {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("folder %s: %v", f, err)
		}
	}
	t.Logf("after SIGKILL of pid %d: etcd pid %d and kube-apiserver pid %d still run; folders %q", helper, etcd.PID, apiserver.PID, rec.Folders)

	var said bytes.Buffer
	kubebin.SweepLeftovers(&said)
	t.Logf("the sweep said: %s", strings.TrimSpace(said.String()))
	want := regexp.MustCompile(fmt.Sprintf(`^test records: ended etcd pid %d and kube-apiserver pid %d, removed %d folders, left by %s pid %d that is gone\n$`,
		etcd.PID, apiserver.PID, len(rec.Folders), regexp.QuoteMeta(filepath.Base(os.Args[0])), helper))
	if !want.MatchString(said.String()) {
		t.Errorf("the sweep said %q, want it to match %s", said.String(), want)
	}
	for _, p := range []procrecord.Proc{etcd, apiserver} {
		if p.Alive() {
			t.Errorf("%s pid %d still runs after the sweep", p.Name, p.PID)
		}
	}
	for _, f := range rec.Folders {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("folder %s still there after the sweep", f)
		}
	}
	if _, err := os.Stat(files[0]); err == nil {
		t.Errorf("record %s still there after the sweep", files[0])
	}
	for _, p := range decoys {
		if !p.Alive() {
			t.Errorf("unrecorded %s pid %d was ended", p.Name, p.PID)
		}
	}
}

// decoy runs a copy of sleep under the command name name until the test ends.
func decoy(t *testing.T, name string) procrecord.Proc {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return procrecord.Proc{Name: name, PID: cmd.Process.Pid, Start: procrecord.StartTime(cmd.Process.Pid)}
}

// A clean stop ends etcd and kube-apiserver itself and deletes the record: nothing is left to sweep.
func TestCleanStopDeletesRecord(t *testing.T) {
	if os.Getenv(kubebin.UnitOnlyEnv) != "" {
		t.Skip(kubebin.UnitOnlyEnv + " is set: this test starts a real API server (make integration)")
	}
	dir, err := kubebin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	records := t.TempDir()
	t.Setenv(procrecord.DirEnv, records)
	env := kubebin.Environment(dir)
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = env.Stop()
		}
	})
	files, _ := filepath.Glob(filepath.Join(records, "*.json"))
	if len(files) != 1 {
		t.Fatalf("records while running: %q, want one", files)
	}
	stopped = true
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(records, "*.json")); len(files) != 0 {
		t.Errorf("records after a clean stop: %q, want none", files)
	}
}
