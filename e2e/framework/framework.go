// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package framework is what the end-to-end suites use: one rig per test
// binary (Main), clients for it, helpers to run pods from the local images,
// wait for conditions, exec into containers, read events and reach the node's
// runtime, plus envtest wired to the same Kubernetes binaries.
//
// A suite's TestMain:
//
//	func TestMain(m *testing.M) { framework.Main(m) }
//
// and each test:
//
//	c := framework.Get(t)            // skips when there is no rig (not root, no binaries)
//	ns := c.Namespace(t)             // fresh namespace, deleted after the test
//	pod := c.CreatePod(t, framework.NewPod(ns, "web", framework.Shell("web", "exec httpd -f -p 8080")))
//	c.WaitForPodReady(t, pod, time.Minute)
package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log" //nolint:importas // logf is this package's printf logger

	"github.com/probeshim/probeshim/e2e/rig"
)

// Images of every rig (see rig.PauseImage and rig.TestImage).
const (
	TestImage  = rig.TestImage
	PauseImage = rig.PauseImage
)

// Cluster is a running rig and clients for it, all as rig-admin
// (system:masters).
type Cluster struct {
	Rig *rig.Rig
	// Config reaches the API server from this process (through a loopback
	// forwarder into the rig's netns).
	Config *rest.Config
	Kube   kubernetes.Interface
	// Client is a controller-runtime client with Scheme.
	Client client.Client
	Scheme *runtime.Scheme
}

// Option changes how Main brings the rig up.
type Option func(*options)

type options struct {
	rig    rig.Config
	scheme []func(*runtime.Scheme) error
}

// WithImages imports more images into every rig of this binary.
func WithImages(imgs ...rig.Image) Option {
	return func(o *options) { o.rig.Images = append(o.rig.Images, imgs...) }
}

// WithScheme adds types (e.g. the project's CRD types) to Cluster.Scheme.
func WithScheme(add ...func(*runtime.Scheme) error) Option {
	return func(o *options) { o.scheme = append(o.scheme, add...) }
}

// WithRigConfig edits the rig's config before it starts.
func WithRigConfig(edit func(*rig.Config)) Option {
	return func(o *options) { edit(&o.rig) }
}

// RigPerPackageEnv, when set (make e2e sets it when it runs packages side by side), gives each
// test binary a rig named after its package (rig.PackageRigName), so that they run beside each
// other.
const RigPerPackageEnv = "PROBESHIM_RIG_PER_PACKAGE"

var (
	shared     *Cluster
	skipReason string
	setupErr   error
)

// Main is a suite's TestMain: it brings one rig up, runs the tests, tears the
// rig down (also on SIGINT/SIGTERM) and exits. Without root or without the
// Kubernetes binaries the tests run and skip with the reason (Get). A rig that
// fails to come up fails the binary, with the end of the failing
// component's log.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts...))
}

func run(m *testing.M, opts ...Option) int {
	flag.Parse()
	// Last, after the rig's teardown: the node service's build (nodeServiceBinary).
	defer removeBuilds()
	o := options{rig: rig.Config{Logf: logf}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.rig.Name == "" && os.Getenv("PROBESHIM_RIG_NAME") == "" && os.Getenv(RigPerPackageEnv) != "" {
		o.rig.Name = rig.PackageRigName(os.Args[0], os.Getenv("PROBESHIM_ROW"))
	}
	if testing.Short() {
		skipReason = "-short: the real-component suites do not run"
	} else if reason := Unavailable(); reason != "" {
		skipReason = reason
	}
	if skipReason != "" {
		fmt.Fprintln(os.Stderr, "e2e: skipping:", skipReason)
		return m.Run()
	}
	scheme, err := newScheme(o.scheme...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	start := time.Now()
	r, err := rig.Start(ctx, o.rig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the rig did not come up after %s: %v\n", time.Since(start).Round(time.Millisecond), err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: rig up in %s\n", time.Since(start).Round(time.Millisecond))
	stop := func() error {
		t0 := time.Now()
		err := r.Stop(context.Background())
		if left := rig.Leftovers(o.rig); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
		}
		fmt.Fprintf(os.Stderr, "e2e: rig down in %s\n", time.Since(t0).Round(time.Millisecond))
		return err
	}
	go func() {
		if s, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "e2e: %s: tearing the rig down\n", s)
			_ = stop()
			removeBuilds()
			os.Exit(1)
		}
	}()
	// The clients log through controller-runtime; the tests say what matters.
	ctrllog.SetLogger(logr.Discard())
	shared, setupErr = newCluster(r, scheme)
	code := 1
	if setupErr == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, "e2e:", setupErr)
	}
	signal.Stop(sigs)
	if code != 0 || os.Getenv("PROBESHIM_KEEP_LOGS") != "" {
		if dir, err := r.SaveLogs(""); err == nil {
			fmt.Fprintf(os.Stderr, "e2e: component logs saved in %s\n", dir)
		}
	}
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: teardown:", err)
		code = 1
	}
	return code
}

// Unavailable says why the real-component suites cannot run here, or "".
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "the real-component suites need root (run `make e2e` as root)"
	}
	row, err := rig.CurrentRow()
	if err != nil {
		return err.Error()
	}
	if dir := rig.DefaultKubeBin(); len(rig.MissingKubeBinaries(dir)) > 0 {
		return fmt.Sprintf("Kubernetes %s binaries not found (PROBESHIM_KUBE_BIN=%q): run `make e2e`, or e2e/kubebin/build.sh %s and export PROBESHIM_KUBE_BIN",
			row.Kube, os.Getenv("PROBESHIM_KUBE_BIN"), row.Kube)
	}
	if rig.DefaultContainerdBin() == "" || rig.DefaultRunc() == "" {
		return fmt.Sprintf("containerd %s or runc not built (PROBESHIM_CONTAINERD_BIN=%q, PROBESHIM_RUNC=%q): run `make e2e`, or e2e/containerdbin/build.sh %s and runc",
			row.Containerd, os.Getenv("PROBESHIM_CONTAINERD_BIN"), os.Getenv("PROBESHIM_RUNC"), row.ContainerdBuild)
	}
	return ""
}

// Get returns the binary's cluster, or skips the test when Main found no way
// to run one. It fails the test if Main was not the binary's TestMain.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if shared == nil {
		t.Fatal("no rig: the package's TestMain must call framework.Main(m)")
	}
	return shared
}

func newScheme(add ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, f := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, add...) {
		if err := f(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewCluster wraps a rig started by hand (rig.Start) with clients; Main does
// this for the shared one.
func NewCluster(r *rig.Rig, add ...func(*runtime.Scheme) error) (*Cluster, error) {
	s, err := newScheme(add...)
	if err != nil {
		return nil, err
	}
	return newCluster(r, s)
}

func newCluster(r *rig.Rig, scheme *runtime.Scheme) (*Cluster, error) {
	cfg := r.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Cluster{Rig: r, Config: cfg, Kube: kube, Client: cl, Scheme: scheme}, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Context returns a context that ends with the test (or after timeout).
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
