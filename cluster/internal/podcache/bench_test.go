// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/go-logr/logr"

	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// BenchmarkPodCacheMemory prints the memory each cached pod costs the cluster deployment, side
// by side in one run: whole pods, pods without their managed fields (the cache before the
// transform), slim pods (podcache.Transform) and packed pods (podcache.NewInformer: the store
// holds compactPods, readers get slim pods).
//
//   - decoded: N realistic pods (podcachetest, half with the enhanced liveness probe) decoded
//     from their JSON as an informer does, held in a slice; the live heap after a GC, per pod.
//   - informer: the same pods created in a real API server (envtest; skipped without its
//     binaries), then a controller-runtime cache with each option synced on them; the live heap
//     the cache adds, per pod. It includes the cache's own keys and indexes.
//
// PROBESHIM_PODCACHE_PODS sets N (default 2000). Run it with `make bench` or:
//
//	go test -run '^$' -bench '^BenchmarkPodCacheMemory$' -benchtime 1x ./cluster/internal/podcache/
func BenchmarkPodCacheMemory(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("PROBESHIM_PODCACHE_PODS")); err == nil && v > 0 {
		n = v
	}
	for i := 0; i < b.N; i++ { // -benchtime 1x: once
		var sb strings.Builder
		fmt.Fprintf(&sb, "pod cache memory per pod (BenchmarkPodCacheMemory), %d realistic pods:\n", n)
		decoded(b, n, &sb)
		informer(b, n, &sb)
		fmt.Print(sb.String()) // b.Log keeps only 10 lines of a benchmark's output
	}
}

type variant struct {
	name   string
	metric string
	opts   func() cache.Options
	keep   func(*corev1.Pod) any
}

var variants = []variant{
	{"whole pods", "whole", func() cache.Options { return cache.Options{} }, func(p *corev1.Pod) any { return p }},
	{"no managed fields (before)", "before", func() cache.Options {
		return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	}, func(p *corev1.Pod) any { p.ManagedFields = nil; return p }},
	{"slim (podcache.Transform)", "slim", func() cache.Options {
		return cache.Options{DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podcache.ByObject()}}
	}, func(p *corev1.Pod) any { return podcache.Slim(p) }},
	{"packed (podcache.NewInformer)", "packed", func() cache.Options {
		return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: podcache.NewInformer,
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podcache.ByObject()}}
	}, podcache.Pack},
}

func realistic(i int) *corev1.Pod {
	return podcachetest.Pod(fmt.Sprintf("shop-%d", i%5), i, podcachetest.Options{Liveness: i%2 == 0})
}

func liveHeap() float64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

func decoded(b *testing.B, n int, sb *strings.Builder) {
	raws := make([][]byte, n)
	for i := range raws {
		raw, err := json.Marshal(realistic(i))
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	fmt.Fprintf(sb, "  %-32s %.0f B of JSON per pod\n", "decoded:", float64(len(raws[n/2])))
	for _, v := range variants {
		h0 := liveHeap()
		held := make([]any, n)
		for i, raw := range raws {
			p := &corev1.Pod{}
			if err := json.Unmarshal(raw, p); err != nil {
				b.Fatal(err)
			}
			held[i] = v.keep(p)
		}
		per := (liveHeap() - h0) / float64(n)
		runtime.KeepAlive(held)
		fmt.Fprintf(sb, "    %-30s %6.0f B per pod\n", v.name, per)
		b.ReportMetric(per, "decoded-"+v.metric+"-B/pod")
	}
}

func informer(b *testing.B, n int, sb *strings.Builder) {
	dir, err := kubebin.Dir()
	if err != nil {
		fmt.Fprintf(sb, "  informer: skipped, envtest needs %v\n", err)
		return
	}
	logf.SetLogger(logr.Discard())
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	env := kubebin.Environment(dir)
	env.Scheme = scheme
	cfg, err := env.Start()
	if err != nil {
		b.Fatalf("starting envtest from %s: %v", dir, err)
	}
	defer func() { _ = env.Stop() }()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shop-%d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				pod := realistic(i)
				status := pod.Status
				pod.ResourceVersion, pod.UID, pod.ManagedFields, pod.CreationTimestamp = "", "", nil, metav1.Time{}
				pod.Status = corev1.PodStatus{}
				if err := cl.Create(ctx, pod); err != nil {
					failed.Store(err)
					return
				}
				pod.Status = status
				if err := cl.Status().Update(ctx, pod); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("creating pods: %v", err)
	}
	var one corev1.Pod
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "shop-1", Name: realistic(1).Name}, &one); err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(&one)
	fmt.Fprintf(sb, "  %-32s %.0f B of JSON per pod as the API server returns it; created in %.0f s\n",
		"informer (envtest):", float64(len(raw)), time.Since(start).Seconds())
	for _, v := range variants {
		h0 := liveHeap()
		opts := v.opts()
		opts.Scheme = scheme
		c, err := cache.New(cfg, opts)
		if err != nil {
			b.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		if _, err := c.GetInformer(cctx, &corev1.Pod{}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = c.Start(cctx) }()
		if !c.WaitForCacheSync(cctx) {
			b.Fatal("the cache did not sync")
		}
		var list corev1.PodList
		if err := c.List(cctx, &list, client.UnsafeDisableDeepCopy); err != nil || len(list.Items) != n {
			b.Fatalf("the cache holds %d pods (%v), want %d", len(list.Items), err, n)
		}
		list = corev1.PodList{}
		per := (liveHeap() - h0) / float64(n)
		runtime.KeepAlive(c)
		cancel()
		fmt.Fprintf(sb, "    %-30s %6.0f B per pod\n", v.name, per)
		b.ReportMetric(per, "informer-"+v.metric+"-B/pod")
	}
}
