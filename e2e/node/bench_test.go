// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/shim/runtime"
)

// Benchmarks on the rig; each runs once (-benchtime 1x) and reports what it
// measured side by side. Windows are wall-clock seconds of steady probing.
var window = envDuration("PROBESHIM_BENCH_WINDOW", 30*time.Second)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// BenchmarkProbeCost compares what the same probes cost when the kubelet runs
// them natively and when probeshim runs them (PERFORMANCE.md): 20 pods, each
// with an exec probe (cat a file) and a TCP probe on one container and an HTTP
// probe on a second, all at a 1 s period — 60 probes/s.
func BenchmarkProbeCost(b *testing.B) {
	c := framework.Get(b)
	c.InstallCRDs(b)
	const pods = 20
	svc := c.StartNodeService(b)
	ns := c.Namespace(b)

	plain := createPods(b, c, ns, "plain", pods, nil)
	baseline := measure(b, c, svc, "baseline", window)

	s := &suite{c: c, svc: svc}
	var entries []v1alpha1.PodProbe
	for _, p := range plain {
		entries = append(entries, v1alpha1.PodProbe{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), IP: p.Status.PodIP,
			Probes: []v1alpha1.ContainerProbe{
				probe("exec", "app", exec("cat", "/tmp/f")),
				probe("tcp", "app", tcp(8080)),
				probe("http", "side", httpGet(8081, "/")),
			}})
	}
	s.writeEntries(b, entries)
	waitAllSucceeded(b, s, entries)
	shim := measure(b, c, svc, "probeshim", window)
	// The same probes with the exec one exec-free (a marker's opt-in): the file read by the
	// service, no process started in the container.
	for i := range entries {
		entries[i].Probes[0].ExecFree = true
	}
	s.writeEntries(b, entries)
	waitExecFree(b, s, len(entries))
	execFree := measure(b, c, svc, "execfree", window)
	s.writeEntries(b, nil)
	deletePods(b, c, plain)

	native := createPods(b, c, ns, "native", pods, func(p *corev1.Pod) {
		app, side := &p.Spec.Containers[0], &p.Spec.Containers[1]
		app.ReadinessProbe = &corev1.Probe{ProbeHandler: exec("cat", "/tmp/f"), PeriodSeconds: 1}
		app.LivenessProbe = &corev1.Probe{ProbeHandler: tcp(8080), PeriodSeconds: 1, FailureThreshold: 3}
		side.ReadinessProbe = &corev1.Probe{ProbeHandler: httpGet(8081, "/"), PeriodSeconds: 1}
	})
	kubelet := measure(b, c, svc, "kubelet", window)
	deletePods(b, c, native)

	kubeletAdded := kubelet.machine - baseline.machine
	b.Logf("\n%d pods x 3 probes at 1 s (%d probes/s), %s windows, CPU in %% of one core:\n"+
		"%-40s %10s %10s %10s %10s\n%-40s %10.1f %10.1f %10.1f %10.1f\n%-40s %10.1f %10.1f %10.1f %10.1f\n%-40s %10.1f %10.1f %10.1f %10.1f\n%-40s %10.1f %10.1f %10.1f %10.1f\n"+
		"machine CPU added over baseline: kubelet %.1f%%, probeshim %.1f%% (ratio probeshim/kubelet %.2f), "+
		"probeshim with the exec probe exec-free %.1f%% (ratio %.2f)\n"+
		"probeshim RSS %.1f MB; NodePodProbe status writes during the probeshim window: %.0f/min; its log %.0f B/min",
		pods, pods*3, window,
		"", "machine", "kubelet", "probeshim", "containerd",
		"baseline (pods, no probes)", baseline.machine, baseline.kubelet, baseline.shim, baseline.containerd,
		"kubelet runs the probes", kubelet.machine, kubelet.kubelet, kubelet.shim, kubelet.containerd,
		"probeshim runs the probes", shim.machine, shim.kubelet, shim.shim, shim.containerd,
		"probeshim runs them, the exec exec-free", execFree.machine, execFree.kubelet, execFree.shim, execFree.containerd,
		kubeletAdded, shim.machine-baseline.machine, (shim.machine-baseline.machine)/kubeletAdded,
		execFree.machine-baseline.machine, (execFree.machine-baseline.machine)/kubeletAdded,
		shim.rssMB, shim.writesPerMin, shim.logBytesPerMin)
	b.ReportMetric(kubeletAdded, "kubelet-added-%cpu")
	b.ReportMetric(shim.machine-baseline.machine, "probeshim-added-%cpu")
	b.ReportMetric(execFree.machine-baseline.machine, "execfree-added-%cpu")
	b.ReportMetric(execFree.shim, "execfree-own-%cpu")
	b.ReportMetric(shim.shim, "probeshim-own-%cpu")
	// What the kubelet's own process spent on the same probes: the figure probeshim's own CPU is held to.
	b.ReportMetric(kubelet.kubelet-baseline.kubelet, "kubelet-own-added-%cpu")
	// The probe callers with containerd, where each side's exec work happens: CRI's ExecSync does
	// in the daemon what the service does itself (output, exit, process spec).
	b.ReportMetric(kubelet.kubelet-baseline.kubelet+kubelet.containerd-baseline.containerd, "kubelet+containerd-added-%cpu")
	b.ReportMetric(shim.shim-baseline.shim+shim.containerd-baseline.containerd, "probeshim+containerd-added-%cpu")
	b.ReportMetric(shim.rssMB, "probeshim-rss-MB")
	b.ReportMetric(shim.writesPerMin, "status-writes/min")
	b.ReportMetric(shim.logBytesPerMin, "probeshim-log-B/min")
}

// BenchmarkScale100 runs 100 pods x 3 network probes at 1 s through probeshim:
// its CPU and RSS, status writes per minute and the bytes per minute the
// service logs at its default level (info), at steady state and while 10 pods
// flip their HTTP result every 2 s (each flip is a state change, logged).
func BenchmarkScale100(b *testing.B) {
	c := framework.Get(b)
	c.InstallCRDs(b)
	const pods, flipping = 100, 10
	svc := c.StartNodeService(b)
	ns := c.Namespace(b)
	created := createPods(b, c, ns, "scale", pods, func(p *corev1.Pod) {
		var idx int
		_, _ = fmt.Sscanf(p.Name, "scale-%d", &idx)
		if idx < flipping { // churn: the side server switches 200 <-> 503 every 2 s
			p.Spec.Containers[1].Command = []string{"sh", "-c", "localhttp-server -listen :8081 & " +
				"while sleep 2; do localhttp-server set -listen 127.0.0.1:8081 503; sleep 2; localhttp-server set -listen 127.0.0.1:8081 200; done"}
		}
	})
	s := &suite{c: c, svc: svc}
	var entries []v1alpha1.PodProbe
	for _, p := range created {
		entries = append(entries, v1alpha1.PodProbe{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), IP: p.Status.PodIP,
			Probes: []v1alpha1.ContainerProbe{
				probe("tcp", "app", tcp(8080)),
				probe("http", "side", httpGet(8081, "/")),
				probe("grpc-less-http", "app", httpGet(8080, "/")),
			}})
	}
	s.writeEntries(b, entries)
	waitAllReported(b, s, entries)
	// What a scraper stores of this node, once every probe runs: /metrics must not grow with the
	// pods (issue 32); /metrics/probes has the kubelet's per-container series, for whoever opts in.
	for _, path := range []string{"/metrics", "/metrics/probes"} {
		body, err := svc.Get(framework.Context(b, time.Minute), path)
		if err != nil {
			b.Fatalf("GET %s: %v", path, err)
		}
		n := 0
		for _, line := range strings.Split(body, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				n++
			}
		}
		b.Logf("%s at %d pods x 3 probes: %d series", path, pods, n)
		b.ReportMetric(float64(n), strings.TrimPrefix(strings.ReplaceAll(path, "/", "-"), "-")+"-series")
	}
	waitAllSucceeded(b, s, entries[flipping:])
	churn := measure(b, c, svc, "churn", window)
	// Steady: stop the flipping by deleting those pods' probes.
	s.writeEntries(b, entries[flipping:])
	// The removal written (and with it the last flip, or the flip dropped as raced with it).
	waitStatusOf(b, s, entries[flipping:])
	steady := measure(b, c, svc, "steady", window)
	b.Logf("\n%d pods x 3 probes at 1 s through probeshim, %s windows:\n"+
		"steady: probeshim CPU %.1f%% of a core, RSS %.1f MB (anon %.1f, file %.1f), status writes %.1f/min, log %.0f B/min (info level; target <= 10 KB/min)\n"+
		"churn (%d pods flipping every 2 s): probeshim CPU %.1f%%, RSS %.1f MB, status writes %.1f/min, log %.0f B/min",
		pods, window, steady.shim, steady.rssMB, steady.anonMB, steady.fileMB, steady.writesPerMin, steady.logBytesPerMin,
		flipping, churn.shim, churn.rssMB, churn.writesPerMin, churn.logBytesPerMin)
	b.ReportMetric(steady.shim, "steady-%cpu")
	b.ReportMetric(steady.rssMB, "steady-rss-MB")
	b.ReportMetric(steady.writesPerMin, "steady-writes/min")
	b.ReportMetric(churn.writesPerMin, "churn-writes/min")
	if steady.logBytesPerMin > 0 {
		b.Logf("logged at steady state (first lines):\n%s", loggedIn(svc, steady, 10))
	}
	b.ReportMetric(steady.logBytesPerMin, "steady-log-B/min")
	b.ReportMetric(churn.logBytesPerMin, "churn-log-B/min")
	deletePods(b, c, created)
}

// waitExecFree waits until the service reads the exec probes' files itself:
// every pod's file read twice since the switch, and no exec since the last poll.
func waitExecFree(b *testing.B, s *suite, pods int) {
	b.Helper()
	lastExecs, reads0 := -1.0, runtimeCalls(b, s.svc, "read")[0]
	err := framework.WaitFor(framework.Context(b, 2*time.Minute), time.Minute, "exec probes read without an exec",
		func(ctx context.Context) (bool, string, error) {
			n := runtimeCalls(b, s.svc, "exec", "read")
			execs, reads := n[0], n[1]-reads0
			done := execs == lastExecs && reads >= float64(2*pods)
			lastExecs = execs
			return done, fmt.Sprintf("%.0f reads since the switch, %.0f execs in all", reads, execs), nil
		})
	if err != nil {
		b.Fatal(err)
	}
}

func createPods(b *testing.B, c *framework.Cluster, ns, prefix string, n int, edit func(*corev1.Pod)) []*corev1.Pod {
	b.Helper()
	out := make([]*corev1.Pod, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		p := framework.NewPod(ns, fmt.Sprintf("%s-%d", prefix, i),
			framework.Command("app", "sh", "-c", "echo ok > /tmp/f; exec localhttp-server -listen :8080"),
			framework.Command("side", "localhttp-server", "-listen", ":8081"))
		if edit != nil {
			edit(p)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := framework.Context(b, 3*time.Minute)
			created, err := c.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if err == nil {
				created, err = c.WaitForPod(ctx, ns, p.Name, 3*time.Minute, "Ready", framework.PodReady)
			}
			out[i] = created
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return out
}

func deletePods(b *testing.B, c *framework.Cluster, pods []*corev1.Pod) {
	b.Helper()
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.DeletePod(framework.Context(b, 2*time.Minute), p, 2*time.Minute) }()
	}
	wg.Wait()
}

// settle is how long every probe of a measured set must have kept its Succeeded before a window
// opens: right after pods are created or another benchmark's are deleted, the machine is busy
// enough that probes time out and flap, and a window then measures that, not the probing.
const settle = 10 * time.Second

func waitAllSucceeded(b *testing.B, s *suite, entries []v1alpha1.PodProbe) {
	b.Helper()
	measured := map[string]bool{}
	for _, e := range entries {
		measured[e.UID] = true
	}
	what := fmt.Sprintf("every probe Succeeded, none changed in the last %s", settle)
	err := framework.WaitFor(framework.Context(b, 4*time.Minute), 3*time.Minute, what,
		func(ctx context.Context) (bool, string, error) {
			npp, err := s.readNodePodProbe(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			ok, recent := map[string]int{}, 0
			var sample []string // what is not (yet) Succeeded, for the message of a timeout
			for _, ps := range npp.Status.PodProbeStatuses {
				for _, st := range ps.ProbeStates {
					if !measured[ps.UID] {
						continue
					}
					if st.State != v1alpha1.ProbeSucceeded {
						if len(sample) < 5 {
							sample = append(sample, fmt.Sprintf("%s %s %s %q since %s", ps.Name, st.Name, st.State, st.Message, st.LastTransitionTime.Format(time.TimeOnly)))
						}
						continue
					}
					ok[ps.UID]++
					if time.Since(st.LastTransitionTime.Time) < settle {
						recent++
					}
				}
			}
			missing := 0
			for _, e := range entries {
				if ok[e.UID] < len(e.Probes) {
					missing++
				}
			}
			return missing == 0 && recent == 0, fmt.Sprintf("%d pods not all Succeeded, %d probes Succeeded for less than %s (not Succeeded: %s)",
				missing, recent, settle, strings.Join(sample, "; ")), nil
		})
	if err != nil {
		b.Fatal(err)
	}
}

// waitAllReported waits until the NodePodProbe's status holds a state of every probe of entries.
func waitAllReported(b *testing.B, s *suite, entries []v1alpha1.PodProbe) {
	b.Helper()
	want := 0
	for _, e := range entries {
		want += len(e.Probes)
	}
	err := framework.WaitFor(framework.Context(b, 4*time.Minute), 3*time.Minute, "a state of every probe",
		func(ctx context.Context) (bool, string, error) {
			npp, err := s.readNodePodProbe(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			n := 0
			for _, ps := range npp.Status.PodProbeStatuses {
				n += len(ps.ProbeStates)
			}
			return n >= want, fmt.Sprintf("%d of %d probes have a state", n, want), nil
		})
	if err != nil {
		b.Fatal(err)
	}
}

// waitStatusOf waits until the NodePodProbe's status holds the pods of entries, all Succeeded,
// and no other pod.
func waitStatusOf(b *testing.B, s *suite, entries []v1alpha1.PodProbe) {
	b.Helper()
	want := map[string]bool{}
	for _, e := range entries {
		want[e.UID] = true
	}
	waitAllSucceeded(b, s, entries)
	err := framework.WaitFor(framework.Context(b, 3*time.Minute), 2*time.Minute, "the status of the remaining pods only",
		func(ctx context.Context) (bool, string, error) {
			npp, err := s.readNodePodProbe(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			others := 0
			for _, ps := range npp.Status.PodProbeStatuses {
				if !want[ps.UID] {
					others++
				}
			}
			return others == 0, fmt.Sprintf("%d pods' status still there", others), nil
		})
	if err != nil {
		b.Fatal(err)
	}
}

type sample struct {
	machine, kubelet, shim float64 // % of one core
	containerd             float64 // % of one core: the daemon, where CRI's ExecSync does the work the service does itself
	rssMB                  float64
	anonMB, fileMB         float64 // RssAnon (heap, stacks) and RssFile (the binary's touched pages) of rssMB
	writesPerMin           float64
	logBytesPerMin         float64 // what the service logged, at its default level
	logFrom, logTo         int64   // the log file's size at the window's start and end
}

// measure samples machine, kubelet and probeshim CPU over a window. With
// PROBESHIM_BENCH_PROFILES=<folder> it also saves the service's CPU profile of
// the window there, as <benchmark>-<label>.pprof.
func measure(b *testing.B, c *framework.Cluster, svc *framework.NodeService, label string, d time.Duration) sample {
	b.Helper()
	if dir := os.Getenv("PROBESHIM_BENCH_PROFILES"); dir != "" {
		done := profileWindow(b, svc, filepath.Join(dir, b.Name()+"-"+label+".pprof"), d)
		defer func() { <-done }()
	}
	kubelet, ctrd := findPid(b, "kubelet", c.Rig.Dir()), findPid(b, "containerd", c.Rig.Dir())
	shim := svc.Pid()
	w0, l0 := writes(b, svc), logSize(svc)
	m0, k0, s0, c0 := machineTicks(b), procTicks(kubelet), procTicks(shim), procTicks(ctrd)
	start := time.Now()
	time.Sleep(d) // measures: CPU, writes and log over the window
	el := time.Since(start).Seconds()
	m1, k1, s1, c1 := machineTicks(b), procTicks(kubelet), procTicks(shim), procTicks(ctrd)
	l1 := logSize(svc)
	const hz = 100.0 // USER_HZ
	return sample{
		machine:      (m1 - m0) / hz / el * 100,
		kubelet:      (k1 - k0) / hz / el * 100,
		shim:         (s1 - s0) / hz / el * 100,
		containerd:   (c1 - c0) / hz / el * 100,
		rssMB:        rssMB(shim, "VmRSS:"),
		anonMB:       rssMB(shim, "RssAnon:"),
		fileMB:       rssMB(shim, "RssFile:"),
		writesPerMin: (writes(b, svc) - w0) / el * 60,
		// The log file only grows (the service appends to it), so the
		// difference is what was logged in the window.
		logBytesPerMin: float64(l1-l0) / el * 60,
		logFrom:        l0,
		logTo:          l1,
	}
}

// profileWindow records the service's CPU for d into path, in the background;
// the channel closes when it is written. A profile that cannot be had fails
// the benchmark: it was asked for.
func profileWindow(b *testing.B, svc *framework.NodeService, path string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		prof, err := svc.CPUProfile(framework.Context(b, d+time.Minute), d)
		if err == nil {
			err = os.WriteFile(path, prof, 0o644)
		}
		if err != nil {
			b.Errorf("CPU profile of the window: %v", err)
			return
		}
		b.Logf("CPU profile of the window: %s", path)
	}()
	return done
}

// loggedIn returns the first n lines the service logged in s's window, to
// show what a non-zero log volume is made of.
func loggedIn(svc *framework.NodeService, s sample, n int) string {
	raw, err := os.ReadFile(svc.LogPath())
	if err != nil || s.logTo > int64(len(raw)) || s.logFrom >= s.logTo {
		return ""
	}
	lines := strings.SplitN(string(raw[s.logFrom:s.logTo]), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// logSize is the size of the service's log file.
func logSize(svc *framework.NodeService) int64 {
	st, err := os.Stat(svc.LogPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

func machineTicks(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])[1:]
	var busy float64
	for i, v := range f {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy
}

func procTicks(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return u + st
}

// rssMB reads one of the memory lines of /proc/PID/status (VmRSS:, RssAnon:, RssFile:) in MB.
func rssMB(pid int, field string) float64 {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// findPid finds the rig's process whose command is name and whose command
// line mentions the rig's folder.
func findPid(b *testing.B, name, dir string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmd), "\x00")
		if filepath.Base(args[0]) == name && strings.Contains(string(cmd), dir) {
			return pid
		}
	}
	b.Fatalf("no %s process of the rig", name)
	return 0
}

// writes reads probeshim_api_writes_total from the service's /metrics.
func writes(b *testing.B, svc *framework.NodeService) float64 {
	return counters(b, svc, "probeshim_api_writes_total{")[0]
}

// runtimeCalls reads probeshim_runtime_calls_total of operations (exec, read), from one fetch.
func runtimeCalls(b *testing.B, svc *framework.NodeService, operations ...string) []float64 {
	prefixes := make([]string, len(operations))
	for i, op := range operations {
		prefixes[i] = fmt.Sprintf("probeshim_runtime_calls_total{operation=%q}", op)
	}
	return counters(b, svc, prefixes...)
}

// counters reads the service's /metrics once and sums, per prefix, the samples whose line
// starts with it.
func counters(b *testing.B, svc *framework.NodeService, prefixes ...string) []float64 {
	body, err := svc.Get(framework.Context(b, time.Minute), "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	totals := make([]float64, len(prefixes))
	for _, l := range strings.Split(body, "\n") {
		for i, prefix := range prefixes {
			if strings.HasPrefix(l, prefix) {
				f := strings.Fields(l)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				totals[i] += v
			}
		}
	}
	return totals
}

// BenchmarkExecVsExecSync times an exec probe as probeshim runs it (a
// containerd task exec) against CRI ExecSync, as the kubelet runs it, on the
// same container, alternating, and reports the ratio of the medians.
func BenchmarkExecVsExecSync(b *testing.B) {
	c := framework.Get(b)
	ns := c.Namespace(b)
	pod := createPods(b, c, ns, "exec", 1, nil)[0]
	id := containerID(b, c, pod, "app")
	rt, err := runtime.New(runtime.WithContainerdSocket(c.ContainerdSocket()))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	cri, conn, err := c.CRI()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ctx := framework.Context(b, 5*time.Minute)
	const n = 100
	var viaShim, viaCRI []time.Duration
	for range n {
		t0 := time.Now()
		if res, err := rt.Exec(ctx, id, []string{"cat", "/tmp/f"}, 5*time.Second); err != nil || res.ExitCode != 0 {
			b.Fatalf("probeshim exec: %v %+v", err, res)
		}
		viaShim = append(viaShim, time.Since(t0))
		t0 = time.Now()
		if res, err := cri.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/tmp/f"}, Timeout: 5}); err != nil || res.ExitCode != 0 {
			b.Fatalf("CRI ExecSync: %v %+v", err, res)
		}
		viaCRI = append(viaCRI, time.Since(t0))
	}
	ms, mc := framework.Percentile(viaShim, 0.5), framework.Percentile(viaCRI, 0.5)
	b.Logf("exec probe latency, median of %d each on one container: probeshim (containerd task exec) %v, CRI ExecSync %v, ratio %.3f",
		n, ms.Round(10*time.Microsecond), mc.Round(10*time.Microsecond), float64(ms)/float64(mc))
	b.ReportMetric(float64(ms.Microseconds())/1000, "probeshim-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "execsync-ms")
	b.ReportMetric(float64(ms)/float64(mc), "ratio")
}

// readNodePodProbe reads the node's NodePodProbe.
func (s *suite) readNodePodProbe(ctx context.Context) (*v1alpha1.NodePodProbe, error) {
	npp := s.npp()
	return npp, s.c.Client.Get(ctx, clientKey(npp), npp)
}
