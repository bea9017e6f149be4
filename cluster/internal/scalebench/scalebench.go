// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package scalebench is what the cluster part's scale benchmarks share: a real API server sized
// for 100,000 objects, writers that retry what an overloaded server answers, a count of the
// writes a component makes, and the CPU and memory readings the benchmarks print.
package scalebench

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// Size is the environment variable name as a positive number, or def.
func Size(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Scheme knows the built-in types and apps.kruise.io/v1alpha1.
func Scheme() (*kruntime.Scheme, error) {
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, v1alpha1.AddToScheme(scheme)
}

// Start runs kube-apiserver and etcd from the binaries in dir with probeshim's CRDs: etcd on
// tmpfs when there is one (envtest already runs it without fsync) with room for 100k objects and
// their history, and no queueing in the API server's own limits for the loaders' concurrent
// writers. The returned config has no client-side rate limit, as the deployment's.
func Start(dir string, scheme *kruntime.Scheme) (*rest.Config, func(), error) {
	env := kubebin.Environment(dir, kubebin.CRDs())
	env.Scheme = scheme
	etcd := &envtest.Etcd{}
	var tmp string
	if d, err := os.MkdirTemp("/dev/shm", "probeshim-scale-etcd-"); err == nil {
		etcd.DataDir, tmp = d, d
	}
	etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	env.ControlPlane.Etcd = etcd
	api := env.ControlPlane.GetAPIServer().Configure()
	api.Set("advertise-address", "127.0.0.1")
	api.Set("endpoint-reconciler-type", "none")
	api.Set("max-requests-inflight", "2000")
	api.Set("max-mutating-requests-inflight", "1000")
	api.Set("enable-priority-and-fairness", "false")
	stop := func() {
		_ = env.Stop()
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		stop()
		return nil, nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg, stop, nil
}

// Writes counts the mutating requests made through a config from CountWrites, by resource
// (the path segment after the namespace or the group version, e.g. "nodepodprobes",
// "nodepodprobes/status", "events").
type Writes struct {
	mu sync.Mutex
	by map[string]int
}

// CountWrites returns a copy of cfg whose requests Writes counts.
func CountWrites(cfg *rest.Config) (*rest.Config, *Writes) {
	w := &Writes{by: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				w.add(resourceOf(req.URL.Path))
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, w
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf is the resource (and subresource) of an API path: /api/v1/namespaces/ns/pods/p/status
// is "pods/status", /apis/g/v/nodepodprobes/n is "nodepodprobes".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

func (w *Writes) add(resource string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.by[resource]++
}

// Snapshot returns the counts so far.
func (w *Writes) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.by)
}

// Since is the counts added after the snapshot before, in "resource n" pairs sorted by resource,
// and their total.
func (w *Writes) Since(before map[string]int) (string, int) {
	now := w.Snapshot()
	var keys []string
	for k := range now {
		if now[k] > before[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	total := 0
	for _, k := range keys {
		n := now[k] - before[k]
		total += n
		parts = append(parts, k+" "+strconv.Itoa(n))
	}
	return strings.Join(parts, ", "), total
}

// CPU is the CPU time of this process so far, in seconds.
func CPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// ChildCPU is the CPU time of this process's running children (kube-apiserver, etcd), in
// seconds: getrusage counts only children that ended.
func ChildCPU() float64 {
	me := strconv.Itoa(os.Getpid())
	dirs, _ := os.ReadDir("/proc")
	var ticks float64
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid ... utime(12) stime(13)
		if len(f) < 13 || f[1] != me {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ticks += u + st
	}
	return ticks / 100 // USER_HZ
}

// Mem is the live Go heap after a GC and the process's RSS, in MB.
func Mem() (heap, rss float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapAlloc) / 1e6
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb / 1e3
			}
		}
	}
	return heap, rss
}

// Load is the machine's load average (1, 5, 15 minutes).
func Load() string {
	l, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(l)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// Parallel runs f(0..n-1) on workers goroutines; the first error stops it.
func Parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Create creates o, retrying what an overloaded API server may answer.
func Create(ctx context.Context, cl client.Client, o client.Object) error {
	return Retry(ctx, func() error { return cl.Create(ctx, o) })
}

// UpdateStatus writes o's status as Retry does. A conflict is retried on the current
// resourceVersion: the benchmarks own the statuses they write (the simulated kubelet and node
// service), and under load a try that timed out may have been applied after all, which makes the
// next one conflict.
func UpdateStatus(ctx context.Context, cl client.Client, o client.Object) error {
	for i := 0; ; i++ {
		err := Retry(ctx, func() error { return cl.Status().Update(ctx, o) })
		if !apierrors.IsConflict(err) || i == 8 {
			return err
		}
		cur := o.DeepCopyObject().(client.Object)
		if err := Retry(ctx, func() error { return cl.Get(ctx, client.ObjectKeyFromObject(o), cur) }); err != nil {
			return err
		}
		o.SetResourceVersion(cur.GetResourceVersion())
	}
}

// Retry retries f while it fails the way an overloaded API server fails.
func Retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < 8; i++ {
		err = f()
		if err == nil || !(apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
			apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<i) * time.Millisecond):
		}
	}
	return err
}
