// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/scalebench"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// BenchmarkDeciderScale is issue 8's scale benchmark: a real API server (envtest) holding
// NodePodProbes for 5,000 simulated nodes, each with 10 enhanced-liveness pods of 2 containers
// (20 liveness probes per node, 100,000 in all, 50,000 pods), the pods owned by ~1,700
// Deployments (through ReplicaSets) and StatefulSets of 10-50 pods spread over the nodes. The
// decider runs in-process against it; then 1% of the liveness states (1,000 containers) flip to
// Failed, and the benchmark measures per failure the time from the NodePodProbe status write to
// the ContainerRecreateRequest's creation seen by a watch, and the decider's CPU and memory.
//
// Phases, on the same cluster:
//   - paced: 1% of the containers fail, spread evenly over 10 s;
//   - burst: another 1% fail at once (32 concurrent writers);
//   - default-rl: 20 more fail at once with the default rate limit (1/s, burst 5), to show the
//     limiter pacing restarts and the held ones coming back on time;
//   - w8-burst: the decider restarted with 8 workers (PROBESHIM_SCALE_WORKERS) instead of the
//     default 2, and another 1% fail at once.
//
// Each phase also reports, per failure, the round trip of the status write and the time until a
// watch of the load generator sees it: the API server's share of the latency.
//
// All but default-rl run with rateLimit qps/burst 100000, so the token bucket is not what is
// measured, and circuitBreaker.window 0s, so the decider acts on a failure as soon as it sees it:
// the latency is the decider's and the API server's work, not the designed wait (one probe period,
// 10 s here, by default; default-rl includes it). Failures are spread one per node and one per workload per phase, within the workload's default
// maxUnavailable (25%, at least 1) and far below the circuit breaker (50%).
//
// It needs kube-apiserver and etcd (internal/testkit/kubebin; `make kube-bins`) and skips without them.
// PROBESHIM_SCALE_NODES, PROBESHIM_SCALE_PODS_PER_NODE and PROBESHIM_SCALE_CONTAINERS change the
// size (defaults 5000, 10, 2). The numbers print as benchmark metrics and as a table on stdout.
// Run it with `make bench` or:
//
//	go test -run '^$' -bench '^BenchmarkDeciderScale$' -benchtime 1x -timeout 40m ./cluster/decider/
//
// CPU is getrusage of the test process (the decider, and the load generator's writes and watch),
// and separately the generator alone (the same writes with the decider not running), plus the
// CPU of the kube-apiserver and etcd children. Heap is the live Go heap after a GC, minus the
// same before the decider started (the generator's own bookkeeping). The package's TestMain runs
// a small envtest of its own for the unit tests; it idles meanwhile.
func BenchmarkDeciderScale(b *testing.B) {
	dir, err := kubebin.Dir()
	if err != nil {
		b.Skip("envtest needs " + err.Error())
	}
	if os.Getenv("PROBESHIM_TEST_LOG") != "" {
		logf.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	} else {
		logf.SetLogger(logr.Discard())
	}
	for i := 0; i < b.N; i++ { // -benchtime 1x: once
		runScale(b, dir)
	}
}

const (
	scaleDeciderNS   = "probeshim-system"
	scaleNamespaces  = 50
	scaleFastConfig  = "rateLimit:\n  qps: 100000\n  burst: 100000\ncircuitBreaker:\n  window: 0s\n"
	scaleDefConfig   = "enabled: true\n"
	scaleWriters     = 32
	scaleLoadWorkers = 64
)

type scalePod struct {
	ns, name string
	uid      types.UID
	wl       int
	node     int
	failing  bool
}

type scaleWorkload struct {
	ns, name, kind string
	size           int
	owner          metav1.OwnerReference // the pods' controller
	failing        int
	pods           []int
}

type scaleRig struct {
	b        *testing.B
	cfg      *rest.Config
	scheme   *kruntime.Scheme
	cl       client.WithWatch
	rng      *rand.Rand
	pods     []*scalePod
	wls      []*scaleWorkload
	nodes    []*v1alpha1.NodePodProbe
	nodePods [][]int
	usedNode []bool

	mu      sync.Mutex
	created map[string]time.Time // ns/pod -> first ContainerRecreateRequest seen
	nppSeen map[string]time.Time // NodePodProbe resourceVersion -> seen by a watch
	crrs    atomic.Int64
	// watchRestarts counts the generator's NodePodProbe watch ending.
	watchRestarts atomic.Int64
}

func runScale(b *testing.B, dir string) {
	nodes := scalebench.Size("PROBESHIM_SCALE_NODES", 5000)
	podsPerNode := scalebench.Size("PROBESHIM_SCALE_PODS_PER_NODE", 10)
	containers := scalebench.Size("PROBESHIM_SCALE_CONTAINERS", 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	scheme, err := scalebench.Scheme()
	if err != nil {
		b.Fatal(err)
	}
	cfg, stopEnv, err := scalebench.Start(dir, scheme)
	if err != nil {
		b.Fatalf("starting envtest from %s: %v", dir, err)
	}
	defer stopEnv()
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	r := &scaleRig{b: b, cfg: cfg, scheme: scheme, cl: cl, rng: rand.New(rand.NewPCG(8, 8)),
		created: map[string]time.Time{}, nppSeen: map[string]time.Time{}}
	rows := [][2]string{}
	row := func(k string, format string, args ...any) {
		rows = append(rows, [2]string{k, fmt.Sprintf(format, args...)})
	}
	load := func() string {
		l, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(l))[:3], " ")
	}
	row("machine", "%d CPUs, load %s at start", runtime.NumCPU(), load())

	// Populate.
	start := time.Now()
	if err := r.populate(ctx, nodes, podsPerNode, containers); err != nil {
		b.Fatalf("populating: %v", err)
	}
	populate := time.Since(start)
	row("cluster", "%d nodes x %d pods x %d containers = %d pods, %d liveness probes; %d workloads (%d ns)",
		nodes, podsPerNode, containers, len(r.pods), len(r.pods)*containers, len(r.wls), scaleNamespaces)
	row("populate", "%.0f s (%.0f objects/s)", populate.Seconds(),
		float64(2*len(r.pods)+2*len(r.nodes)+2*len(r.wls))/populate.Seconds())
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(len(r.pods)), "pods")
	b.ReportMetric(float64(len(r.pods)*containers), "probes")

	go r.watchRequests(ctx)
	go r.watchNodePodProbes(ctx)
	defer runtime.KeepAlive(r)

	// The load generator alone: the same writes as a burst phase, with no decider running.
	k := max(1, len(r.pods)*containers/100)
	genCPU := r.controlWrites(ctx, k)
	row("generator alone", "%.2f s CPU for %d NodePodProbe status writes (+ the watch)", genCPU, k)

	heap0, rss0 := scalebench.Mem()
	row("heap before decider", "%.0f MB live heap, %.0f MB RSS (the generator's bookkeeping)", heap0, rss0)

	// The decider, with its default workers; the burst again with more workers after.
	workers := scalebench.Size("PROBESHIM_SCALE_WORKERS", 8)
	type phase struct {
		name   string
		n      int
		spread time.Duration
		config string
	}
	for ri, run := range []struct {
		name    string
		workers int
		phases  []phase
	}{
		{"", 0, []phase{
			{"paced", k, 10 * time.Second, ""},
			{"burst", k, 0, ""},
			{"default-rl", min(20, k), 0, scaleDefConfig},
		}},
		{fmt.Sprintf("w%d", workers), workers, []phase{{"burst", k, 0, scaleFastConfig}}},
	} {
		pre := ""
		if run.name != "" {
			pre = run.name + "-"
		}
		if ri > 0 {
			r.setConfig(ctx, scaleFastConfig)
		}
		stop := r.startDecider(ctx, run.workers, pre, heap0, rss0, row)
		for _, ph := range run.phases {
			if ph.config != "" && ri == 0 {
				c0, a0, t0 := scalebench.CPU(), scalebench.ChildCPU(), time.Now()
				_, _, rec0, _ := scaleQueue()
				r.setConfig(ctx, ph.config)
				// The new configuration has reached the decider once it decides the failing
				// workloads again; only then can settling mean they are done.
				err := poll.Until(ctx, time.Minute, "the decider to decide again after the config change", func(context.Context) (bool, string, error) {
					depth, active, total, _ := scaleQueue()
					return depth > 0 || active > 0 || total > rec0, fmt.Sprintf("%.0f reconciles since", total-rec0), nil
				})
				if err != nil {
					b.Log(err)
				}
				r.settle(ctx, 5*time.Minute)
				row("config change", "%.1f s until settled, %.2f s CPU (API server+etcd %.2f s): every failing workload decided again",
					time.Since(t0).Seconds(), scalebench.CPU()-c0, scalebench.ChildCPU()-a0)
			}
			res := r.phase(ctx, ph.name, ph.n, ph.spread)
			name := pre + ph.name
			row(name, "%s", res)
			if ph.name == "default-rl" {
				name = "defrl"
			}
			b.ReportMetric(res.p(50), name+"-p50-ms")
			b.ReportMetric(res.p(99), name+"-p99-ms")
			if ph.name != "default-rl" {
				b.ReportMetric(res.cpu, name+"-cpu-s")
				b.ReportMetric(max(0, res.cpu-genCPU*float64(ph.n)/float64(k)), name+"-decider-cpu-s")
			}
			if res.missed > 0 {
				b.ReportMetric(float64(res.missed), name+"-missed")
			}
		}
		heap2, rss2 := scalebench.Mem()
		row(pre+"memory after", "+%.0f MB live heap, +%.0f MB RSS over the baseline", heap2-heap0, rss2-rss0)
		if ri == 0 {
			b.ReportMetric(heap2-heap0, "heap-after-MB")
		}
		stop()
	}
	row("machine", "load %s at the end", load())

	var sb strings.Builder
	fmt.Fprintf(&sb, "decider at scale (BenchmarkDeciderScale):\n")
	for _, rw := range rows {
		fmt.Fprintf(&sb, "  %-22s %s\n", rw[0], rw[1])
	}
	fmt.Print(sb.String()) // b.Log keeps only 10 lines of a benchmark's output
}

// startDecider starts a manager with the decider and waits for it to sync and settle; stop stops
// it.
func (r *scaleRig) startDecider(ctx context.Context, workers int, pre string, heap0, rss0 float64, row func(string, string, ...any)) (stop func()) {
	b := r.b
	// As the deployment does (cluster/cmd/probeshim-cluster); PROBESHIM_SCALE_WHOLE_PODS=1 caches
	// whole pods (less their managed fields), as it did before podcache, for comparison.
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: podcache.NewInformer,
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podcache.ByObject()}}
	podsCached := "slim pods packed, podcache"
	if os.Getenv("PROBESHIM_SCALE_WHOLE_PODS") == "1" {
		cacheOpts.ByObject, cacheOpts.NewInformer, podsCached = nil, nil, "whole pods, PROBESHIM_SCALE_WHOLE_PODS"
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(r.cfg), ctrl.Options{
		Scheme:                 r.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cacheOpts,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := decider.SetupWithManager(mgr, decider.Options{Namespace: scaleDeciderNS, Workers: workers}); err != nil {
		b.Fatal(err)
	}
	apiCPU0 := scalebench.ChildCPU()
	cpu0 := scalebench.CPU()
	_, _, rec0, _ := scaleQueue()
	start := time.Now()
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stop = func() {
		mcancel()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(os.Stderr, "the decider's manager stopped with:", err)
			}
		case <-time.After(30 * time.Second):
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 5*time.Minute)
	synced := mgr.GetCache().WaitForCacheSync(syncCtx)
	syncCancel()
	if !synced {
		stop()
		b.Fatal("the decider's cache did not sync")
	}
	syncTime := time.Since(start)
	r.settle(ctx, 10*time.Minute)
	settleTime := time.Since(start)
	cpuStart, apiStart := scalebench.CPU()-cpu0, scalebench.ChildCPU()-apiCPU0
	_, _, rec1, _ := scaleQueue()
	heap1, rss1 := scalebench.Mem()
	if workers == 0 {
		workers = 2
	}
	row(pre+"decider start", "%d workers: cache synced in %.1f s; initial reconciles done at %.1f s (%d reconciles); %.1f s CPU (API server+etcd %.1f s)",
		workers, syncTime.Seconds(), settleTime.Seconds(), int(rec1-rec0), cpuStart, apiStart)
	row(pre+"decider memory", "+%.0f MB live heap, +%.0f MB RSS over the baseline (%.0f MB / %.0f MB total); %.0f B of live heap per pod (%s)",
		heap1-heap0, rss1-rss0, heap1, rss1, (heap1-heap0)*1e6/float64(len(r.pods)), podsCached)
	b.ReportMetric((heap1-heap0)*1e6/float64(len(r.pods)), pre+"heap-B/pod")
	b.ReportMetric(syncTime.Seconds(), pre+"sync-s")
	b.ReportMetric(settleTime.Seconds(), pre+"settle-s")
	b.ReportMetric(cpuStart, pre+"start-cpu-s")
	b.ReportMetric(heap1-heap0, pre+"heap-MB")
	b.ReportMetric(rss1-rss0, pre+"rss-MB")
	return stop
}

// populate creates the namespaces, workloads, pods (Ready, on their nodes) and NodePodProbes
// (every liveness state Succeeded).
func (r *scaleRig) populate(ctx context.Context, nodes, podsPerNode, containers int) error {
	cl := r.cl
	for i := 0; i < scaleNamespaces; i++ {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", i)}}); err != nil {
			return err
		}
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleDeciderNS}}); err != nil {
		return err
	}
	if err := cl.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: scaleDeciderNS, Name: decider.ConfigMapName},
		Data:       map[string]string{decider.ConfigKey: scaleFastConfig},
	}); err != nil {
		return err
	}

	// Workloads of 10-50 pods: 4 in 5 Deployments (one ReplicaSet each), the rest StatefulSets.
	total := nodes * podsPerNode
	for n := 0; n < total; {
		size := min(10+r.rng.IntN(41), total-n)
		kind := "Deployment"
		if r.rng.IntN(5) == 0 {
			kind = "StatefulSet"
		}
		i := len(r.wls)
		r.wls = append(r.wls, &scaleWorkload{ns: fmt.Sprintf("scale-%02d", i%scaleNamespaces),
			name: fmt.Sprintf("app-%04d", i), kind: kind, size: size})
		n += size
	}
	names := make([]string, containers)
	for c := range names {
		names[c] = fmt.Sprintf("c%d", c)
		if c < 4 {
			names[c] = []string{"app", "sidecar", "proxy", "agent"}[c]
		}
	}
	probe := corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		FailureThreshold: 3,
		SuccessThreshold: 1,
	}
	var ctxProbes []v1alpha1.ContainerLivenessProbe
	for _, c := range names {
		ctxProbes = append(ctxProbes, v1alpha1.ContainerLivenessProbe{Name: c, LivenessProbe: probe})
	}
	probeContext, err := v1alpha1.FormatContainerProbeContext(ctxProbes)
	if err != nil {
		return err
	}
	template := func(w *scaleWorkload, extra map[string]string) corev1.PodTemplateSpec {
		lbls := map[string]string{"app": w.name}
		for k, v := range extra {
			lbls[k] = v
		}
		t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: map[string]string{
			v1alpha1.AnnotationUsingEnhancedLiveness: "true",
			v1alpha1.AnnotationContainerProbeContext: probeContext,
		}}}
		for _, c := range names {
			t.Spec.Containers = append(t.Spec.Containers, corev1.Container{
				Name: c, Image: "registry.example/" + w.name + "/" + c + ":v1.2.3",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			})
		}
		return t
	}
	templates := make([]corev1.PodTemplateSpec, len(r.wls))
	if err := scalebench.Parallel(ctx, len(r.wls), scaleLoadWorkers, func(i int) error {
		w := r.wls[i]
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}}
		if w.kind == "StatefulSet" {
			templates[i] = template(w, nil)
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(w.size)), Selector: sel, ServiceName: w.name, Template: templates[i]}}
			if err := scalebench.Create(ctx, r.cl, sts); err != nil {
				return err
			}
			w.owner = *metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
			return nil
		}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(w.size)), Selector: sel, Template: template(w, nil)}}
		if err := scalebench.Create(ctx, r.cl, dep); err != nil {
			return err
		}
		hash := fmt.Sprintf("%x", 0x5d0000000+i)
		templates[i] = template(w, map[string]string{"pod-template-hash": hash})
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name + "-" + hash,
			Labels:          templates[i].Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(w.size)),
				Selector: &metav1.LabelSelector{MatchLabels: templates[i].Labels}, Template: templates[i]}}
		if err := scalebench.Create(ctx, r.cl, rs); err != nil {
			return err
		}
		w.owner = *metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		return nil
	}); err != nil {
		return fmt.Errorf("workloads: %w", err)
	}

	// Pods, dealt out to nodes at random.
	for wi, w := range r.wls {
		for j := 0; j < w.size; j++ {
			name := fmt.Sprintf("%s-%d", w.name, j)
			if w.kind == "Deployment" {
				name = fmt.Sprintf("%s-x%04x", w.owner.Name, j)
			}
			w.pods = append(w.pods, len(r.pods))
			r.pods = append(r.pods, &scalePod{ns: w.ns, name: name, wl: wi})
		}
	}
	order := r.rng.Perm(len(r.pods))
	r.nodePods = make([][]int, nodes)
	for i, p := range order {
		r.pods[p].node = i / podsPerNode
		r.nodePods[i/podsPerNode] = append(r.nodePods[i/podsPerNode], p)
	}
	r.usedNode = make([]bool, nodes)
	now := metav1.Now()
	var done atomic.Int64
	if err := scalebench.Parallel(ctx, len(r.pods), scaleLoadWorkers, func(i int) error {
		p := r.pods[i]
		w := r.wls[p.wl]
		t := templates[p.wl].DeepCopy() // a response decodes into the maps
		pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
		pod.Namespace, pod.Name = p.ns, p.name
		pod.OwnerReferences = []metav1.OwnerReference{w.owner}
		pod.Spec.NodeName = fmt.Sprintf("node-%05d", p.node)
		if err := scalebench.Create(ctx, r.cl, pod); err != nil {
			return err
		}
		p.uid = pod.UID
		ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16, i>>8&255, i&255)
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: fmt.Sprintf("192.168.%d.%d", p.node>>8, p.node&255),
			PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now, QOSClass: corev1.PodQOSBestEffort,
		}
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:0123456789abcdef", Ready: true, Started: ptr.To(true),
				ContainerID: fmt.Sprintf("containerd://%064x", uint64(i)<<8|uint64(len(c.Name))),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		if err := scalebench.UpdateStatus(ctx, r.cl, pod); err != nil {
			return err
		}
		if n := done.Add(1); n%10000 == 0 {
			fmt.Fprintf(os.Stderr, "populate: %d pods at %s\n", n, time.Now().Format(time.TimeOnly))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("pods: %w", err)
	}

	r.nodes = make([]*v1alpha1.NodePodProbe, nodes)
	return scalebench.Parallel(ctx, nodes, scaleLoadWorkers, func(n int) error {
		npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", n)}}
		for _, pi := range r.nodePods[n] {
			p := r.pods[pi]
			pp := v1alpha1.PodProbe{Name: p.name, Namespace: p.ns, UID: string(p.uid), IP: fmt.Sprintf("10.%d.%d.%d", 64+pi>>16, pi>>8&255, pi&255)}
			ps := v1alpha1.PodProbeStatus{Name: p.name, Namespace: p.ns, UID: string(p.uid)}
			for _, c := range names {
				pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: v1alpha1.LivenessProbeName(c), ContainerName: c,
					Probe: v1alpha1.ContainerProbeSpec{Probe: probe}})
				ps.ProbeStates = append(ps.ProbeStates, v1alpha1.ContainerProbeState{Name: v1alpha1.LivenessProbeName(c),
					State: v1alpha1.ProbeSucceeded, LastProbeTime: now, LastTransitionTime: now})
			}
			npp.Spec.PodProbes = append(npp.Spec.PodProbes, pp)
			npp.Status.PodProbeStatuses = append(npp.Status.PodProbeStatuses, ps)
		}
		st := npp.Status
		if err := scalebench.Create(ctx, r.cl, npp); err != nil {
			return err
		}
		npp.Status = st
		if err := scalebench.UpdateStatus(ctx, r.cl, npp); err != nil {
			return err
		}
		r.nodes[n] = npp
		return nil
	})
}

// watchRequests notes when the first ContainerRecreateRequest for each pod appears.
func (r *scaleRig) watchRequests(ctx context.Context) {
	rv := ""
	retry := watchRetry()
	for retry.Wait(ctx) == nil {
		w, err := r.cl.Watch(ctx, &v1alpha1.ContainerRecreateRequestList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			seen := time.Now()
			crr, ok := ev.Object.(*v1alpha1.ContainerRecreateRequest)
			if !ok {
				continue
			}
			rv = crr.ResourceVersion
			if ev.Type != watch.Added {
				continue
			}
			r.crrs.Add(1)
			key := crr.Namespace + "/" + crr.Spec.PodName
			r.mu.Lock()
			if _, ok := r.created[key]; !ok {
				r.created[key] = seen
			}
			r.mu.Unlock()
		}
		w.Stop()
	}
}

// watchNodePodProbes notes when each NodePodProbe change reaches a watch: the API server's share
// of the latency.
func (r *scaleRig) watchNodePodProbes(ctx context.Context) {
	rv := ""
	retry := watchRetry()
	for retry.Wait(ctx) == nil {
		if rv == "" {
			// Start at the current version, without the synthetic events for every object a
			// watch from "" begins with.
			var list v1alpha1.NodePodProbeList
			if err := r.cl.List(ctx, &list, client.Limit(1)); err != nil {
				continue
			}
			rv = list.ResourceVersion
		}
		w, err := r.cl.Watch(ctx, &v1alpha1.NodePodProbeList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			seen := time.Now()
			npp, ok := ev.Object.(*v1alpha1.NodePodProbe)
			if !ok {
				fmt.Fprintf(os.Stderr, "NodePodProbe watch: %s %v\n", ev.Type, ev.Object)
				rv = "" // start over: some writes of the moment go unseen
				continue
			}
			rv = npp.ResourceVersion
			if ev.Type != watch.Modified {
				continue
			}
			r.mu.Lock()
			r.nppSeen[rv] = seen
			r.mu.Unlock()
		}
		w.Stop()
		r.watchRestarts.Add(1)
	}
}

// watchRetry paces the watchers' attempts: a watch that fails (or ends) at once is tried again
// at most ten times a second, one that lasted at once.
func watchRetry() *rate.Limiter { return rate.NewLimiter(rate.Every(100*time.Millisecond), 1) }

// pick chooses n pods to fail, one per node not used before and one per workload, keeping each
// workload within its default maxUnavailable (25%, at least 1) and below the breaker (50%).
func (r *scaleRig) pick(n int) []*scalePod {
	var out []*scalePod
	used := map[int]bool{}
	for _, node := range r.rng.Perm(len(r.nodes)) {
		if len(out) == n {
			break
		}
		if r.usedNode[node] {
			continue
		}
		cands := slices.Clone(r.nodePods[node])
		r.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		for _, pi := range cands {
			p := r.pods[pi]
			w := r.wls[p.wl]
			if p.failing || used[p.wl] || w.failing+1 > max(1, w.size/4) || 2*(w.failing+1) > w.size {
				continue
			}
			used[p.wl] = true
			w.failing++
			p.failing = true
			r.usedNode[node] = true
			out = append(out, p)
			break
		}
	}
	return out
}

type scaleResult struct {
	name         string
	n            int
	lat          []time.Duration // sorted
	write        []time.Duration // the status write's round trip, sorted
	delivery     []time.Duration // from the write to its watch event, sorted
	missed       int
	cpu, api     float64
	window       time.Duration
	restarts     int64
	reconciles   int
	reconcileSec float64
}

func (s scaleResult) p(q float64) float64 {
	if len(s.lat) == 0 {
		return 0
	}
	i := min(len(s.lat)-1, int(float64(len(s.lat))*q/100))
	return float64(s.lat[i]) / float64(time.Millisecond)
}

func scalePct(d []time.Duration, q float64) float64 {
	return scaleResult{lat: d}.p(q)
}

func (s scaleResult) String() string {
	return fmt.Sprintf("%d failures -> %d requests (%d missed): p50 %.0f ms, p99 %.0f ms, max %.0f ms "+
		"(of which the status write's round trip p50 %.0f / p99 %.0f ms, write to its watch event p50 %.0f / p99 %.0f ms); "+
		"window %.1f s: %.2f s CPU in the test process, API server+etcd %.2f s; %d reconciles taking %.1f s in all (mean %.0f ms)",
		s.n, len(s.lat), s.missed, s.p(50), s.p(99), s.p(100), scalePct(s.write, 50), scalePct(s.write, 99),
		scalePct(s.delivery, 50), scalePct(s.delivery, 99), s.window.Seconds(), s.cpu, s.api,
		s.reconciles, s.reconcileSec, 1000*s.reconcileSec/float64(max(1, s.reconciles))) +
		fmt.Sprintf("; %d of %d writes seen by the watch", len(s.delivery), s.n)
}

// phase flips n liveness states to Failed (spread evenly over spread, else all at once by
// scaleWriters writers) and waits for their requests.
func (r *scaleRig) phase(ctx context.Context, name string, n int, spread time.Duration) scaleResult {
	pods := r.pick(n)
	if len(pods) < n {
		r.b.Logf("%s: only %d of %d failures fit the budgets", name, len(pods), n)
	}
	r.settle(ctx, 5*time.Minute)
	crrs0 := r.crrs.Load()
	_, _, rec0, sec0 := scaleQueue()
	written := make([]time.Time, len(pods))
	acked := make([]time.Time, len(pods))
	rvs := make([]string, len(pods))
	which := make([]int, len(pods)) // the failing container
	for i := range which {
		which[i] = r.rng.IntN(len(r.nodes[0].Status.PodProbeStatuses[0].ProbeStates))
	}
	cpu0, api0, start := scalebench.CPU(), scalebench.ChildCPU(), time.Now()
	flip := func(i int) error {
		p := pods[i]
		npp := r.nodes[p.node]
		c := which[i]
		for si := range npp.Status.PodProbeStatuses {
			st := &npp.Status.PodProbeStatuses[si]
			if st.UID == string(p.uid) {
				st.ProbeStates[c%len(st.ProbeStates)].State = v1alpha1.ProbeFailed
				st.ProbeStates[c%len(st.ProbeStates)].LastTransitionTime = metav1.Now()
				st.ProbeStates[c%len(st.ProbeStates)].Message = "HTTP probe failed with statuscode: 503"
			}
		}
		written[i] = time.Now()
		err := scalebench.UpdateStatus(ctx, r.cl, npp)
		acked[i], rvs[i] = time.Now(), npp.ResourceVersion
		return err
	}
	var err error
	if spread > 0 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// measures: a paced phase, its flips spread evenly over the window
				time.Sleep(time.Until(start.Add(spread * time.Duration(i) / time.Duration(len(pods)))))
				if e := flip(i); e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	} else {
		err = scalebench.Parallel(ctx, len(pods), scaleWriters, flip)
	}
	if err != nil {
		r.b.Fatalf("%s: writing liveness states: %v", name, err)
	}
	res := scaleResult{name: name, n: len(pods)}
	// Until every pod has its request, or 3 minutes; those without count as missed.
	_ = poll.Until(ctx, 3*time.Minute, name+": a request for every pod", func(context.Context) (bool, string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		res.lat, res.missed = res.lat[:0], 0
		res.write, res.delivery = res.write[:0], res.delivery[:0]
		for i := range pods {
			res.write = append(res.write, acked[i].Sub(written[i]))
			if t, ok := r.nppSeen[rvs[i]]; ok {
				res.delivery = append(res.delivery, t.Sub(written[i]))
			}
		}
		for i, p := range pods {
			if t, ok := r.created[p.ns+"/"+p.name]; ok {
				res.lat = append(res.lat, t.Sub(written[i]))
			} else {
				res.missed++
			}
		}
		return res.missed == 0, "", nil
	})
	r.settle(ctx, 2*time.Minute)
	res.window = time.Since(start)
	res.cpu, res.api = scalebench.CPU()-cpu0, scalebench.ChildCPU()-api0
	res.restarts = r.crrs.Load() - crrs0
	_, _, rec1, sec1 := scaleQueue()
	res.reconciles, res.reconcileSec = int(rec1-rec0), sec1-sec0
	slices.Sort(res.lat)
	slices.Sort(res.write)
	slices.Sort(res.delivery)
	return res
}

// controlWrites makes n NodePodProbe status writes like a phase's (a probe time moves, no state
// changes) before the decider runs, and returns the CPU they cost this process.
func (r *scaleRig) controlWrites(ctx context.Context, n int) float64 {
	cpu0 := scalebench.CPU()
	nodes := r.rng.Perm(len(r.nodes))[:min(n, len(r.nodes))]
	if err := scalebench.Parallel(ctx, len(nodes), scaleWriters, func(i int) error {
		npp := r.nodes[nodes[i]]
		npp.Status.PodProbeStatuses[0].ProbeStates[0].LastProbeTime = metav1.Now()
		return scalebench.UpdateStatus(ctx, r.cl, npp)
	}); err != nil {
		r.b.Fatalf("control writes: %v", err)
	}
	return scalebench.CPU() - cpu0
}

func (r *scaleRig) setConfig(ctx context.Context, doc string) {
	cm := &corev1.ConfigMap{}
	if err := r.cl.Get(ctx, types.NamespacedName{Namespace: scaleDeciderNS, Name: decider.ConfigMapName}, cm); err != nil {
		r.b.Fatal(err)
	}
	cm.Data[decider.ConfigKey] = doc
	if err := r.cl.Update(ctx, cm); err != nil {
		r.b.Fatal(err)
	}
}

// settle waits until the decider's queue is empty, no reconcile runs and none started for a
// second.
func (r *scaleRig) settle(ctx context.Context, timeout time.Duration) {
	last, since := -1.0, time.Now()
	err := poll.Until(ctx, timeout, "the decider to settle", func(context.Context) (bool, string, error) {
		depth, active, total, _ := scaleQueue()
		if depth != 0 || active != 0 || total != last {
			last, since = total, time.Now()
		}
		return time.Since(since) >= time.Second, fmt.Sprintf("queue %.0f, running %.0f", depth, active), nil
	})
	if err != nil {
		r.b.Log(err)
	}
}

// scaleQueue reads the decider's controller metrics: queue depth, running reconciles, reconciles
// so far and the seconds they took.
func scaleQueue() (depth, active, total, seconds float64) {
	mfs, _ := ctrlmetrics.Registry.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			ours := false
			for _, l := range m.GetLabel() {
				if l.GetValue() == decider.ControllerName {
					ours = true
				}
			}
			if !ours {
				continue
			}
			switch mf.GetName() {
			case "workqueue_depth":
				depth += m.GetGauge().GetValue()
			case "controller_runtime_active_workers":
				active += m.GetGauge().GetValue()
			case "controller_runtime_reconcile_total":
				total += m.GetCounter().GetValue()
			case "controller_runtime_reconcile_time_seconds":
				seconds += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return depth, active, total, seconds
}
