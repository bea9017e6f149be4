// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/runtime"
)

// BenchmarkExecFreeVsExec compares the CPU one probe of `cat /tmp/f` costs the machine when
// probeshim runs it as a containerd task exec and when it reads the file exec-free (issue 20:
// at least 100x cheaper), on the same container, in one run. The CPU counted is everything the
// probe makes run: this process (the runtime client), containerd, and the container's shim with
// the processes it reaped (runc and the exec'd cat); whole-machine busy time over each loop is
// printed beside it (it includes whatever else the machine did).
func BenchmarkExecFreeVsExec(b *testing.B) {
	c := framework.Get(b)
	ns := c.Namespace(b)
	pod := createPods(b, c, ns, "execfree", 1, nil)[0]
	id := containerID(b, c, pod, "app")
	rt, err := runtime.New(runtime.WithContainerdSocket(c.ContainerdSocket()))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	ctx := framework.Context(b, 10*time.Minute)
	containerd := findPid(b, "containerd", c.Rig.Dir())
	shim := shimOf(b, c, id)

	const execs, reads = 200, 20000
	cmd := []string{"cat", "/tmp/f"}
	exec := func() {
		if res, err := rt.Exec(ctx, id, cmd, 5*time.Second); err != nil || res.ExitCode != 0 || string(res.Output) != "ok\n" {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
	read := func() {
		if out, err := rt.ReadFile(ctx, id, "/tmp/f", prober.MaxOutput, 5*time.Second); err != nil || string(out) != "ok\n" {
			b.Fatalf("read: %v %q", err, out)
		}
	}
	for range 5 { // warm both paths (exec target cached, connections up)
		exec()
		read()
	}
	e := cpuOf(b, execs, containerd, shim, exec)
	r := cpuOf(b, reads, containerd, shim, read)
	b.Logf("CPU per probe of cat /tmp/f: exec %v (this process %v, containerd %v, shim+runc+cat %v; machine %v, wall %v), "+
		"exec-free read %v (this process %v, containerd %v, shim %v; machine %v, wall %v); exec / read = %.0fx",
		e.total(), e.self, e.containerd, e.shim, e.machine, e.wall, r.total(), r.self, r.containerd, r.shim, r.machine, r.wall,
		float64(e.total())/float64(r.total()))
	b.ReportMetric(float64(e.total().Nanoseconds())/1e3, "exec-cpu-us/probe")
	b.ReportMetric(float64(r.total().Nanoseconds())/1e3, "read-cpu-us/probe")
	b.ReportMetric(float64(e.total())/float64(r.total()), "exec/read")
}

// probeCPU is the CPU per probe of a loop, by whom.
type probeCPU struct {
	self, containerd, shim, machine, wall time.Duration
}

func (p probeCPU) total() time.Duration { return p.self + p.containerd + p.shim }

// cpuOf runs fn n times and returns the CPU per run.
func cpuOf(b *testing.B, n int, containerd, shim int, fn func()) probeCPU {
	b.Helper()
	const tick = 10 * time.Millisecond // USER_HZ 100
	ticks := func(pid int, children bool) time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		var sum float64
		fields := []int{11, 12} // utime, stime
		if children {
			fields = append(fields, 13, 14) // cutime, cstime: runc and the exec'd processes it reaped
		}
		for _, i := range fields {
			v, _ := strconv.ParseFloat(f[i], 64)
			sum += v
		}
		return time.Duration(sum) * tick
	}
	self := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s0, c0, h0, m0, t0 := self(), ticks(containerd, false), ticks(shim, true), machineTicks(b), time.Now()
	for range n {
		fn()
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	return probeCPU{
		self:       per(self() - s0),
		containerd: per(ticks(containerd, false) - c0),
		shim:       per(ticks(shim, true) - h0),
		machine:    per(time.Duration((machineTicks(b) - m0) * float64(tick))),
		wall:       per(time.Since(t0)),
	}
}

// shimOf finds the pid of the shim of container id: the parent of its init process.
func shimOf(b *testing.B, c *framework.Cluster, id string) int {
	b.Helper()
	cri, conn, err := c.CRI()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	st, err := cri.ContainerStatus(framework.Context(b, time.Minute), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		b.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid == 0 {
		b.Fatalf("container %s: no pid in its verbose status: %v", id, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", info.Pid))
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	ppid, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[1])
	if err != nil {
		b.Fatal(err)
	}
	return ppid
}
