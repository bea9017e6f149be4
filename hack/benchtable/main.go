// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command benchtable reads the output of `make bench` (go test -bench lines and the
// Makefile's "== bench row" headers) and prints the figures that say whether probeshim
// is lighter than the kubelet at its own job: each one as measured in this run, the
// kubelet's figure from the same run where there is one, the figure before the work
// on it, and the target.
//
//	make bench 2>&1 | tee dist/bench.log; go run ./hack/benchtable < dist/bench.log
//
// A figure whose benchmark did not run (not root, another ROW) is printed as "not run".
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

// metrics holds every reported value: matrix row ("" before the rig section) →
// benchmark (without its -GOMAXPROCS suffix) → unit → value. The last report wins.
type metrics map[string]map[string]map[string]float64

// rowHeader is the Makefile's line before each matrix row's benchmarks. parse turns it into a
// benchmark-format configuration line (rowKey: ROW), which applies to the results after it.
var rowHeader = regexp.MustCompile(`(?m)^== bench row (\S+).*$`)

const rowKey = "probeshim-row"

// parse reads go test -bench output with golang.org/x/perf's benchfmt, the reader benchstat uses.
func parse(r io.Reader) (metrics, error) {
	in, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	in = rowHeader.ReplaceAll(in, []byte(rowKey+": $1"))
	m := metrics{}
	br := benchfmt.NewReader(bytes.NewReader(in), "bench output")
	for br.Scan() {
		// A *benchfmt.SyntaxError is a line that starts like a benchmark's and is not one (a
		// log line): skipped, as go test's own output around the results is.
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		row, bench := res.GetConfig(rowKey), benchName(res.Name)
		if m[row] == nil {
			m[row] = map[string]map[string]float64{}
		}
		if m[row][bench] == nil {
			m[row][bench] = map[string]float64{}
		}
		for _, v := range res.Values {
			// The unit as the benchmark reported it: benchfmt tidies ns and MB into sec and B.
			if v.OrigUnit != "" {
				m[row][bench][v.OrigUnit] = v.OrigValue
				continue
			}
			m[row][bench][v.Unit] = v.Value
		}
	}
	return m, br.Err()
}

// benchName is the benchmark's name as the figures know it: with "Benchmark", without the
// -GOMAXPROCS suffix.
func benchName(n benchfmt.Name) string {
	base, parts := n.Parts()
	name := "Benchmark" + string(base)
	for _, p := range parts {
		if p[0] != '-' {
			name += string(p)
		}
	}
	return name
}

// reading is one figure measured in one matrix row.
type reading struct {
	now, kubelet string // kubelet: the kubelet's figure from the same run, "" if none
	met          bool
}

// figure is one line of the table. measure returns false when its benchmark did not
// report in that row.
type figure struct {
	name, before, target string
	informational        bool // no target: "met" shows "—"
	measure              func(bench map[string]map[string]float64) (reading, bool)
}

// get returns bench's unit, and whether it was reported.
func get(m map[string]map[string]float64, bench, unit string) (float64, bool) {
	v, ok := m[bench][unit]
	return v, ok
}

// atMost is a figure whose target is a fixed ceiling.
func atMost(bench, unit string, ceiling float64, format string) func(map[string]map[string]float64) (reading, bool) {
	return func(m map[string]map[string]float64) (reading, bool) {
		v, ok := get(m, bench, unit)
		return reading{now: fmt.Sprintf(format, v), met: v <= ceiling}, ok
	}
}

// engineCores is the CPU of one BenchmarkEngine case in cores, and its probes per second.
func engineCores(m map[string]map[string]float64, bench string) (cores, rate float64, ok bool) {
	per1k, ok1 := get(m, bench, "cpu-s/1000probes")
	rate, ok2 := get(m, bench, "probes/s")
	return per1k * rate / 1000, rate, ok1 && ok2
}

// machineRatio is BenchmarkProbeCost's machine CPU added with probeshim (unit) over the same added
// with the kubelet running the probes; the target is at most 0.8.
func machineRatio(unit string) func(map[string]map[string]float64) (reading, bool) {
	return func(m map[string]map[string]float64) (reading, bool) {
		ps, ok1 := get(m, "BenchmarkProbeCost", unit)
		kl, ok2 := get(m, "BenchmarkProbeCost", "kubelet-added-%cpu")
		if !ok1 || !ok2 || kl <= 0 {
			return reading{}, false
		}
		return reading{now: fmt.Sprintf("%.2fx (%.1f%%)", ps/kl, ps), kubelet: fmt.Sprintf("%.1f%%", kl), met: ps/kl <= 0.8}, true
	}
}

// notAboveKubelet is a BenchmarkProbeCost figure of probeshim's (unit) held to the kubelet's
// (kubeletUnit) from the same run.
func notAboveKubelet(unit, kubeletUnit string) func(map[string]map[string]float64) (reading, bool) {
	return func(m map[string]map[string]float64) (reading, bool) {
		own, ok1 := get(m, "BenchmarkProbeCost", unit)
		kl, ok2 := get(m, "BenchmarkProbeCost", kubeletUnit)
		return reading{now: fmt.Sprintf("%.1f", own), kubelet: fmt.Sprintf("%.1f", kl), met: own <= kl}, ok1 && ok2
	}
}

var figures = []figure{
	{
		name: "node service own CPU, 60 probes/s mixed (% of a core)", before: "9.7", target: "≤ the kubelet's own increase",
		measure: notAboveKubelet("probeshim-own-%cpu", "kubelet-own-added-%cpu"),
	},
	{
		name: "the same with containerd's CPU (where ExecSync does the exec work)", before: "—", target: "≤ the kubelet's",
		measure: notAboveKubelet("probeshim+containerd-added-%cpu", "kubelet+containerd-added-%cpu"),
	},
	{
		name: "node service RSS, 100 pods x 3 probes (MB)", before: "68", target: "≤ 40",
		measure: atMost("BenchmarkScale100", "steady-rss-MB", 40, "%.1f"),
	},
	{
		name: "machine CPU added, probeshim / the kubelet, same probes", before: "1.05x", target: "≤ 0.8x",
		measure: machineRatio("probeshim-added-%cpu"),
	},
	{
		name: "the same, the exec probe exec-free (a marker's opt-in)", before: "—", target: "≤ 0.8x",
		measure: machineRatio("execfree-added-%cpu"),
	},
	{
		name: "in-netns TCP connect / host dial to the pod IP", before: "1.41x", target: "≤ 1.2x",
		measure: atMost("BenchmarkProbeVsHostPodIP", "tcp-netns/host", 1.2, "%.2fx"),
	},
	{
		name: "in-netns HTTP probe / host dial to the pod IP", before: "1.04x", target: "≤ 1.2x",
		measure: atMost("BenchmarkProbeVsHostPodIP", "http-netns/host", 1.2, "%.2fx"),
	},
	{
		// The engine's own work: scheduling, timers, results (probes that do nothing).
		name: "engine alone, 10,000 workers at 1 s (cores; p99 start lateness)", before: "1.06", target: "≤ 0.5; < 50 ms",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			cores, rate, ok := engineCores(m, "BenchmarkEngine/noop-exec")
			late, _ := get(m, "BenchmarkEngine/noop-exec", "p99-late-ms")
			return reading{now: fmt.Sprintf("%.2f (%.0f probes/s; %.1f ms)", cores, rate, late), met: cores <= 0.5 && late < 50}, ok
		},
	},
	{
		// The same with real probes: most of it is the kernel's TCP work and net/http's per probe.
		name: "the same with HTTP and TCP probes to loopback (cores)", before: "—", target: "—", informational: true,
		measure: func(m map[string]map[string]float64) (reading, bool) {
			cores, rate, ok := engineCores(m, "BenchmarkEngine/http+tcp")
			return reading{now: fmt.Sprintf("%.2f (%.0f probes/s)", cores, rate)}, ok
		},
	},
	{
		name: "exec probe, probeshim / CRI ExecSync (median)", before: "0.92x", target: "≤ 1.05x",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			r, ok := get(m, "BenchmarkExecVsExecSync", "ratio")
			ms, _ := get(m, "BenchmarkExecVsExecSync", "probeshim-ms")
			cri, _ := get(m, "BenchmarkExecVsExecSync", "execsync-ms")
			return reading{now: fmt.Sprintf("%.2fx (%.1f ms)", r, ms), kubelet: fmt.Sprintf("%.1f ms", cri), met: r <= 1.05}, ok
		},
	},
	{
		name: "exec-free read vs exec, CPU per probe", before: "—", target: "≥ 100x cheaper",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			r, ok := get(m, "BenchmarkExecFreeVsExec", "exec/read")
			return reading{now: fmt.Sprintf("%.0fx", r), met: r >= 100}, ok
		},
	},
	{
		name: "node service log at steady state, 100 pods (KB/min)", before: "0 at 20 pods", target: "≤ 10",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			v, ok := get(m, "BenchmarkScale100", "steady-log-B/min")
			return reading{now: fmt.Sprintf("%.2f", v/1000), met: v <= 10000}, ok
		},
	},
	{
		name: "decider memory per cached pod (KB)", before: "7.5", target: "≤ 1.5",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			// Pods as probeshim-cluster's informer holds them, through a real API server.
			best, ok := get(m, "BenchmarkPodCacheMemory", "informer-packed-B/pod")
			return reading{now: fmt.Sprintf("%.2f", best/1000), met: best <= 1500}, ok
		},
	},
	{
		name: "marker over every pod: NodePodProbe writes per node", before: "not measured", target: "1",
		measure: func(m map[string]map[string]float64) (reading, bool) {
			w, ok := get(m, "BenchmarkMarkerScale", "marker-writes/node")
			s, _ := get(m, "BenchmarkMarkerScale", "marker-s")
			return reading{now: fmt.Sprintf("%.2f (placed in %.0f s)", w, s), met: w <= 1.01}, ok
		},
	},
}

func render(w io.Writer, m metrics) {
	rows := make([]string, 0, len(m))
	for r := range m {
		rows = append(rows, r)
	}
	sort.Strings(rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\trow\tnow\tkubelet, same run\tbefore\ttarget\tmet")
	for _, f := range figures {
		printed := false
		for _, r := range rows {
			rd, ok := f.measure(m[r])
			if !ok {
				continue
			}
			printed = true
			kl, met, where := rd.kubelet, "no", r
			if kl == "" {
				kl = "—"
			}
			switch {
			case f.informational:
				met = "—"
			case rd.met:
				met = "yes"
			}
			if where == "" {
				where = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.name, where, rd.now, kl, f.before, f.target, met)
		}
		if !printed {
			fmt.Fprintf(tw, "%s\t-\tnot run\t—\t%s\t%s\t-\n", f.name, f.before, f.target)
		}
	}
	_ = tw.Flush()
}

func main() {
	m, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable: reading the benchmark output:", err)
		os.Exit(1)
	}
	render(os.Stdout, m)
}
