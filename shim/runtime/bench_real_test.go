// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRealExecVsExecSync compares an exec probe through Client.Exec
// with CRI's ExecSync of the same command in the same container, in
// alternation, and reports both medians and their ratio (PERFORMANCE.md:
// at most 1.05). It makes at least 40 pairs whatever b.N is.
func BenchmarkRealExecVsExecSync(b *testing.B) {
	r := realContainerd(b)
	p := r.runPod(b, false)
	id := r.runContainer(b, p, "app", 0)
	ctx := context.Background()
	cmd := []string{"/bin/cat", "/etc/hostname"}
	pairs := max(b.N, 40)
	var ours, cri []time.Duration
	viaShim := func() time.Duration {
		start := time.Now()
		if _, err := r.client.Exec(ctx, id, cmd, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	viaCRI := func() time.Duration {
		start := time.Now()
		resp, err := r.cri.ExecSync(ctx, &criapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
		if err != nil || resp.ExitCode != 0 {
			b.Fatalf("ExecSync: %v %v", resp, err)
		}
		return time.Since(start)
	}
	for i := range pairs + 2 {
		var d1, d2 time.Duration
		if i%2 == 0 { // alternate who goes first
			d1, d2 = viaShim(), viaCRI()
		} else {
			d2, d1 = viaCRI(), viaShim()
		}
		if i >= 2 { // the first pairs warm caches on both sides
			ours, cri = append(ours, d1), append(cri, d2)
		}
	}
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	mo, mc := median(ours), median(cri)
	b.ReportMetric(float64(mo.Microseconds())/1000, "probeshim-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "execsync-ms")
	b.ReportMetric(float64(mo)/float64(mc), "ratio")
}

// BenchmarkRealExecCPU measures the client's own CPU per exec probe (user
// and system time of this process, which is only the client: containerd, its
// shim and runc are other processes) with a Tracker following containerd's
// events as in the node service. -cpuprofile shows where it goes.
func BenchmarkRealExecCPU(b *testing.B) {
	r := realContainerd(b)
	p := r.runPod(b, false)
	id := r.runContainer(b, p, "app", 0)
	ctx := followEvents(b, r)
	cmd := []string{"/bin/cat", "/etc/hostname"}
	run := func() {
		if res, err := r.client.Exec(ctx, id, cmd, 10*time.Second); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
	for range 5 { // warm the target cache and the connection
		run()
	}
	b.ResetTimer()
	c0 := cpuTime(b)
	for range b.N {
		run()
	}
	c1 := cpuTime(b)
	b.StopTimer()
	b.ReportMetric(float64((c1-c0).Microseconds())/float64(b.N), "cpu-us/exec")
}

// cpuTime is this process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
