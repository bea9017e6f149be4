// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/scalebench"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// BenchmarkMarkerScale is issue 20's marker at scale: a real API server (envtest) with 5,000
// Ready nodes (simulated: Node objects, no kubelets) and 50,000 running pods, 10 per node, in one
// namespace; the NodePodProbe controller runs in-process as probeshim-cluster runs it. Phases:
//   - nodes: the controller starts and gives every node its NodePodProbe;
//   - marker: one PodProbeMarker with two probes (exec and HTTP) selects all 50,000 pods; it
//     ends when every NodePodProbe holds its pods' entries, as a watch sees them;
//   - probe edit: the marker's period changes, so every entry is rewritten.
//
// Per phase: the time, the controller's API writes by resource (the goal: one per node), the
// CPU of the test process (the controller, plus the benchmark's own NodePodProbe watch) and of
// the API server and etcd, and the controller's heap. PROBESHIM_SCALE_NODES and
// PROBESHIM_SCALE_PODS_PER_NODE change the size. Run it with `make bench` or:
//
//	go test -run '^$' -bench '^BenchmarkMarkerScale$' -benchtime 1x -timeout 40m ./cluster/controller/nodepodprobe/
func BenchmarkMarkerScale(b *testing.B) {
	dir, err := kubebin.Dir()
	if err != nil {
		b.Skip("envtest needs " + err.Error())
	}
	logf.SetLogger(logr.Discard())
	for i := 0; i < b.N; i++ { // -benchtime 1x: once
		runMarkerScale(b, dir)
	}
}

const scaleNS = "game"

func runMarkerScale(b *testing.B, dir string) {
	nodes := scalebench.Size("PROBESHIM_SCALE_NODES", 5000)
	perNode := scalebench.Size("PROBESHIM_SCALE_PODS_PER_NODE", 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	scheme, err := scalebench.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg, stop, err := scalebench.Start(dir, scheme)
	if err != nil {
		b.Fatalf("starting envtest from %s: %v", dir, err)
	}
	defer stop()
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	var rows [][2]string
	row := func(k, format string, args ...any) { rows = append(rows, [2]string{k, fmt.Sprintf(format, args...)}) }
	row("machine", "%d CPUs, load %s at start", runtime.NumCPU(), scalebench.Load())

	start := time.Now()
	if err := populateMarkerScale(ctx, cl, nodes, perNode); err != nil {
		b.Fatalf("populating: %v", err)
	}
	row("cluster", "%d Ready nodes, %d running pods in namespace %s (populated in %.0f s)",
		nodes, nodes*perNode, scaleNS, time.Since(start).Seconds())

	seen := watchEntries(ctx, b, cfg, scheme)
	heap0, rss0 := scalebench.Mem()

	counted, writes := scalebench.CountWrites(cfg)
	mgr, err := ctrl.NewManager(counted, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// As probeshim-cluster's manager.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: podcache.NewInformer,
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podcache.ByObject()}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	phase := func(name string, act func(), done func() bool) {
		w0, cpu0, api0, t0 := writes.Snapshot(), scalebench.CPU(), scalebench.ChildCPU(), time.Now()
		act()
		err := poll.Until(context.Background(), 20*time.Minute, name+" done", func(context.Context) (bool, string, error) {
			return done(), "", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		// Writes that come after the last entry (marker status, events) belong to the phase too.
		time.Sleep(5 * time.Second) // measures: the phase's trailing writes, those of the next 5 s
		by, total := writes.Since(w0)
		heap, rss := scalebench.Mem()
		row(name, "%.1f s; %d writes (%.2f per node: %s); CPU %.1f s (API server+etcd %.1f s); heap +%.0f MB, RSS +%.0f MB",
			took.Seconds(), total, float64(total)/float64(nodes), by, scalebench.CPU()-cpu0, scalebench.ChildCPU()-api0, heap-heap0, rss-rss0)
		b.ReportMetric(took.Seconds(), name+"-s")
		b.ReportMetric(float64(total)/float64(nodes), name+"-writes/node")
	}

	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	phase("nodes", func() {
		go func() { _ = mgr.Start(mctx) }()
	}, func() bool { return seen.nodes() == nodes })

	marker := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: "idle"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{
				scaleProbe("idle", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/idle"}}}),
				scaleProbe("healthy", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}),
			},
		},
	}
	phase("marker", func() {
		if err := cl.Create(ctx, marker); err != nil {
			b.Fatal(err)
		}
	}, func() bool { return seen.complete(nodes, perNode, 1) })

	phase("probe-edit", func() {
		if err := scalebench.Retry(ctx, func() error {
			cur := &v1alpha1.PodProbeMarker{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(marker), cur); err != nil {
				return err
			}
			for i := range cur.Spec.Probes {
				cur.Spec.Probes[i].Probe.PeriodSeconds = 2
			}
			return cl.Update(ctx, cur)
		}); err != nil {
			b.Fatal(err)
		}
	}, func() bool { return seen.complete(nodes, perNode, 2) })
	row("machine", "load %s at the end", scalebench.Load())

	var sb strings.Builder
	sb.WriteString("a marker at scale (BenchmarkMarkerScale):\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "  %-12s %s\n", r[0], r[1])
	}
	fmt.Print(sb.String()) // b.Log keeps only 10 lines of a benchmark's output
}

func scaleProbe(name string, h corev1.ProbeHandler) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{Name: name, ContainerName: "main", PodConditionType: "game.example.com/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h,
			InitialDelaySeconds: 1, TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}}}
}

func populateMarkerScale(ctx context.Context, cl client.Client, nodes, perNode int) error {
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNS}}); err != nil {
		return err
	}
	const workers = 64
	nodeName := func(i int) string { return fmt.Sprintf("node-%05d", i) }
	if err := scalebench.Parallel(ctx, nodes, workers, func(i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}}
		if err := scalebench.Create(ctx, cl, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
		return scalebench.UpdateStatus(ctx, cl, n)
	}); err != nil {
		return err
	}
	return scalebench.Parallel(ctx, nodes*perNode, workers, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: fmt.Sprintf("gs-%06d", i), Labels: map[string]string{"app": "game"}},
			Spec: corev1.PodSpec{NodeName: nodeName(i % nodes), Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/game/server:v1.2.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "game", ContainerPort: 7777}},
			}}},
		}
		if err := scalebench.Create(ctx, cl, p); err != nil {
			return err
		}
		ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16&63, i>>8&255, i&255)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: p.Spec.Containers[0].Image, Ready: true, Started: ptr.To(true),
				ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		return scalebench.UpdateStatus(ctx, cl, p)
	})
}

// entries is what a watch of the NodePodProbes has seen: per node, the marker entries and the
// period they carry.
type entries struct {
	mu     sync.Mutex
	byNode map[string]nodeEntries
}

type nodeEntries struct {
	probes int // marker probes in the spec
	period int32
}

func watchEntries(ctx context.Context, b *testing.B, cfg *rest.Config, scheme *kruntime.Scheme) *entries {
	b.Helper()
	e := &entries{byNode: map[string]nodeEntries{}}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &v1alpha1.NodePodProbe{})
	if err != nil {
		b.Fatal(err)
	}
	update := func(obj any) {
		npp, ok := obj.(*v1alpha1.NodePodProbe)
		if !ok {
			return
		}
		var ne nodeEntries
		for _, pp := range npp.Spec.PodProbes {
			for _, p := range pp.Probes {
				if strings.HasPrefix(p.Name, "idle#") { // the marker's probes: <marker>#<probe>
					ne.probes++
					ne.period = p.Probe.PeriodSeconds
				}
			}
		}
		e.mu.Lock()
		e.byNode[npp.Name] = ne
		e.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: update, UpdateFunc: func(_, o any) { update(o) },
	}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the NodePodProbe watch did not sync")
	}
	return e
}

func (e *entries) nodes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byNode)
}

// complete says whether every node's NodePodProbe holds both probes of the marker for each of its
// pods, with the given period.
func (e *entries) complete(nodes, perNode int, period int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.byNode) < nodes {
		return false
	}
	for _, ne := range e.byNode {
		if ne.probes != 2*perNode || ne.period != period {
			return false
		}
	}
	return true
}
