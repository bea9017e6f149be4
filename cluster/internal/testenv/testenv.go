// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package testenv runs the controllers' integration tests against a real kube-apiserver and
// etcd (controller-runtime's envtest) with the apps.kruise.io CRDs installed. There is no
// kubelet, scheduler or garbage collector: tests create Nodes and set pod status themselves.
//
// The binaries come from KUBEBUILDER_ASSETS, else from the cache e2e/kubebin/build.sh fills
// ($PROBESHIM_CACHE or /var/cache/probeshim, kube/v1.37.2-etcd-*). Without them the tests skip
// and say how to get them.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// KubeVersion is the Kubernetes release whose binaries the tests look for in the cache.
const KubeVersion = "v1.37.2"

// Env is a running API server with a manager whose client records every write it makes.
type Env struct {
	Scheme *kruntime.Scheme
	Config *rest.Config
	// Client talks to the API server directly (no cache); tests use it to set up and check.
	Client client.Client
	// Writes records the manager's writes.
	Writes *Writes

	env    *kubebin.Env
	cancel context.CancelFunc
	done   chan error
}

// Start starts the API server and a manager, calls setup to add controllers to it, and starts
// it. It returns a skip reason instead when the binaries are missing. Call it from TestMain.
func Start(setup func(ctrl.Manager) error) (*Env, string, error) {
	dir, err := kubebin.Dir()
	if err != nil {
		return nil, "envtest needs " + err.Error(), nil
	}
	if os.Getenv("PROBESHIM_TEST_LOG") != "" {
		logf.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1}))
	} else {
		logf.SetLogger(logr.Discard())
	}
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	env := kubebin.Environment(dir, kubebin.CRDs())
	env.Scheme = scheme
	cfg, err := env.Start()
	if err != nil {
		return nil, "", fmt.Errorf("starting envtest from %s: %w", dir, err)
	}
	e := &Env{Scheme: scheme, Config: cfg, env: env, Writes: &Writes{}, done: make(chan error, 1)}
	fail := func(err error) (*Env, string, error) {
		_ = env.Stop()
		return nil, "", err
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// The deployment's pod cache (cluster/cmd/probeshim-cluster): the controllers are tested
		// on the slim pods they read in production.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: podcache.NewInformer,
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podcache.ByObject()}},
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, opts)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, e.Writes.funcs()), nil
		},
	})
	if err != nil {
		return fail(err)
	}
	if err := setup(mgr); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return fail(errors.New("manager cache did not sync"))
	}
	return e, "", nil
}

// Stop stops the manager and the API server.
func (e *Env) Stop() {
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv: the manager stopped with:", err)
		}
	case <-time.After(10 * time.Second):
	}
	_ = e.env.Stop()
}

// Write is one write the manager's client made.
type Write struct {
	Verb        string // create, update, patch, delete
	Kind        string // e.g. Pod, NodePodProbe
	Namespace   string
	Name        string
	Subresource string // e.g. status
}

// Writes records writes; safe for concurrent use.
type Writes struct {
	mu  sync.Mutex
	all []Write
}

// Since returns the writes recorded after the first n (use Len to mark a point).
func (w *Writes) Since(n int) []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Write(nil), w.all[n:]...)
}

// Len is the number of writes so far.
func (w *Writes) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.all)
}

func (w *Writes) add(c client.Client, verb string, obj client.Object, sub string) {
	kind := ""
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		kind = gvk.Kind
	}
	w.mu.Lock()
	w.all = append(w.all, Write{Verb: verb, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Subresource: sub})
	w.mu.Unlock()
}

func (w *Writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add(c, "create", obj, "")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add(c, "update", obj, "")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.add(c, "patch", obj, "")
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add(c, "delete", obj, "")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add(c, "update", obj, sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add(c, "patch", obj, sub)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

// Require skips t when the environment could not start.
func Require(t testing.TB, env *Env, skip string) {
	t.Helper()
	if env == nil {
		t.Skip("skipped: " + skip)
	}
}

// Main is a test binary's TestMain: it starts an environment with setup's controllers, stores it
// (or why there is none) in env and skip for the tests, runs them, stops it and exits.
func Main(m *testing.M, setup func(ctrl.Manager) error, env **Env, skip *string) {
	e, reason, err := Start(setup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env, *skip = e, reason
	code := m.Run()
	if e != nil {
		e.Stop()
	}
	os.Exit(code)
}
