// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kubebin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

// Env is an envtest environment that records what it starts (see Start), so that a later run
// ends what this one leaves behind when it is killed.
type Env struct {
	*envtest.Environment
	forget func() error
}

// Environment is the one envtest set-up of the project's tests: etcd and kube-apiserver from
// dir (see Dir) on loopback ports, with the CRDs of crdDirs installed (see CRDs). The API server
// is told not to look for a routable address (advertise-address 127.0.0.1,
// endpoint-reconciler-type none), so it also starts in a network namespace without a default
// route, such as the rig's. Start it with Start and stop it with Stop.
func Environment(dir string, crdDirs ...string) *Env {
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	return &Env{Environment: env}
}

// Start first ends what killed test binaries left behind (SweepLeftovers), then starts etcd and
// kube-apiserver and records them (pid and start time) and the folders envtest made in the
// records folder (procrecord.Dir): envtest starts them in their own process group, so they
// outlive a test binary killed by a timeout or a signal.
func (e *Env) Start() (*rest.Config, error) {
	SweepLeftovers(os.Stderr)
	cfg, err := e.Environment.Start()
	if err != nil {
		return cfg, err
	}
	procs, folders := started(e.Environment)
	forget, err := recorder().Add(procs, folders)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("test records: %w", err), e.Environment.Stop())
	}
	e.forget = forget
	return cfg, nil
}

// Stop stops the environment and, when that went well, deletes its record. After a failed stop
// the record stays for the next run to sweep once this binary is gone.
func (e *Env) Stop() error {
	if err := e.Environment.Stop(); err != nil {
		return err
	}
	if e.forget == nil {
		return nil
	}
	forget := e.forget
	e.forget = nil
	return forget()
}

// SweepLeftovers ends what the records of test binaries that are gone list (see
// procrecord.Sweep) and says so on w, one line per record.
func SweepLeftovers(w io.Writer) {
	lines, err := procrecord.Sweep(procrecord.Dir())
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if err != nil {
		fmt.Fprintln(w, err)
	}
}

var recorders = struct {
	sync.Mutex
	byDir map[string]*procrecord.Recorder
}{byDir: map[string]*procrecord.Recorder{}}

// recorder is this process's recorder for the current records folder.
func recorder() *procrecord.Recorder {
	dir := procrecord.Dir()
	recorders.Lock()
	defer recorders.Unlock()
	r := recorders.byDir[dir]
	if r == nil {
		r = procrecord.NewRecorder(dir, procrecord.Self())
		recorders.byDir[dir] = r
	}
	return r
}

// started finds the etcd and kube-apiserver env started, among this process's children by the
// folder each was told to use (several environments may run in one test binary), and the
// temporary folders envtest made for them.
func started(env *envtest.Environment) ([]procrecord.Proc, []string) {
	var roles []struct{ name, flag, dir string }
	if e := env.ControlPlane.Etcd; e != nil && e.DataDir != "" {
		roles = append(roles, struct{ name, flag, dir string }{"etcd", "data-dir", e.DataDir})
	}
	if s := env.ControlPlane.APIServer; s != nil && s.CertDir != "" {
		roles = append(roles, struct{ name, flag, dir string }{"kube-apiserver", "cert-dir", s.CertDir})
	}
	var procs []procrecord.Proc
	var folders []string
	children := procrecord.Children(os.Getpid())
	for _, r := range roles {
		for _, c := range children {
			if hasFlag(c.Cmdline(), r.flag, r.dir) {
				c.Name = r.name
				procs = append(procs, c)
			}
		}
		if madeByEnvtest(r.dir) {
			folders = append(folders, r.dir)
		}
	}
	if d := env.WebhookInstallOptions.LocalServingCertDir; madeByEnvtest(d) {
		folders = append(folders, d)
	}
	return procs, folders
}

// madeByEnvtest is true for the temporary folders envtest creates itself (the ones it removes on
// Stop), never for a folder a test handed it.
func madeByEnvtest(dir string) bool {
	base := filepath.Base(dir)
	return dir != "" && (strings.HasPrefix(base, "k8s_test_framework_") || strings.HasPrefix(base, "envtest-serving-certs-"))
}

// hasFlag reports whether args set --flag to value (as --flag=value or --flag value).
func hasFlag(args []string, flag, value string) bool {
	for i, a := range args {
		if a == "--"+flag+"="+value || a == "--"+flag && i+1 < len(args) && args[i+1] == value {
			return true
		}
	}
	return false
}

// CRDs is the folder of the project's CRD manifests (apis/crds), wherever the test runs from.
func CRDs() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "apis", "crds")
}
