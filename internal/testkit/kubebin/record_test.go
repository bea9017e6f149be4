// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kubebin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

// child starts a shell with args, ended when the test ends: a stand-in for a process envtest
// started with those flags.
func child(t *testing.T, args ...string) procrecord.Proc {
	t.Helper()
	// "; :" keeps the shell from exec'ing sleep, so that its arguments stay in the cmdline.
	cmd := exec.Command("sh", append([]string{"-c", "sleep 600; :", "sh"}, args...)...)
	// Its own process group, ended whole: killing the shell alone (as a sweep does) leaves sleep.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return procrecord.Proc{PID: cmd.Process.Pid, Start: procrecord.StartTime(cmd.Process.Pid)}
}

// The processes of an environment are told apart from other children (another environment's
// too) by the folder they were given; only folders envtest made are recorded.
func TestStarted(t *testing.T) {
	tmp := t.TempDir()
	data, certs := filepath.Join(tmp, "k8s_test_framework_1"), filepath.Join(tmp, "k8s_test_framework_2")
	etcd := child(t, "--data-dir="+data, "--listen-client-urls=http://127.0.0.1:1")
	apiserver := child(t, "--cert-dir", certs)
	child(t, "--data-dir="+filepath.Join(tmp, "k8s_test_framework_3")) // another environment's etcd
	child(t)

	env := &envtest.Environment{}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: data}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs}
	env.WebhookInstallOptions.LocalServingCertDir = filepath.Join(tmp, "envtest-serving-certs-1")
	procs, folders := started(env)
	etcd.Name, apiserver.Name = "etcd", "kube-apiserver"
	if len(procs) != 2 || procs[0] != etcd || procs[1] != apiserver {
		t.Errorf("processes %+v, want %+v and %+v", procs, etcd, apiserver)
	}
	if want := []string{data, certs, env.WebhookInstallOptions.LocalServingCertDir}; strings.Join(folders, " ") != strings.Join(want, " ") {
		t.Errorf("folders %q, want %q", folders, want)
	}

	// A folder the test chose itself is not envtest's to remove.
	env.ControlPlane.Etcd.DataDir = filepath.Join(tmp, "mine")
	if _, folders := started(env); len(folders) != 2 {
		t.Errorf("folders %q: the test's own data dir is recorded", folders)
	}
}

// Every start first sweeps what killed test binaries left, and says so, even when it then fails.
func TestStartSweepsFirst(t *testing.T) {
	records := t.TempDir()
	t.Setenv(procrecord.DirEnv, records)
	left := child(t)
	left.Name = "etcd"
	owner := exec.Command("true")
	if err := owner.Run(); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(t.TempDir(), "k8s_test_framework_9")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	// The owner's start time does not matter once its pid is gone.
	if err := procrecord.Write(records, procrecord.Record{
		Owner:     procrecord.Proc{Name: "dead.test", PID: owner.ProcessState.Pid(), Start: 1},
		Processes: []procrecord.Proc{left}, Folders: []string{folder},
	}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	SweepLeftovers(&out)
	if left.Alive() {
		t.Error("the recorded process still runs")
	}
	if _, err := os.Stat(folder); err == nil {
		t.Error("the recorded folder is still there")
	}
	if !strings.Contains(out.String(), "test records: ended etcd pid") || !strings.Contains(out.String(), "left by dead.test pid") {
		t.Errorf("sweep said %q", out.String())
	}

	// Start sweeps before it starts anything (here: nothing, there are no binaries).
	left2 := child(t)
	left2.Name = "kube-apiserver"
	if err := procrecord.Write(records, procrecord.Record{
		Owner: procrecord.Proc{Name: "dead.test", PID: owner.ProcessState.Pid(), Start: 1}, Processes: []procrecord.Proc{left2},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Environment(t.TempDir()).Start(); err == nil {
		t.Fatal("Start without binaries succeeded")
	}
	if left2.Alive() {
		t.Error("Start did not sweep first")
	}
}
