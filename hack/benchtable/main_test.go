// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkEngine/http+tcp-2         	       1	30000000000 ns/op	         0.04600 cpu-s/1000probes	 9000 probes/s	 0.5 rss-KiB/worker
BenchmarkEngine/noop-exec-2        	       1	5000143628 ns/op	         0 %overran	         0.01579 cpu-s/1000probes	 1.209 p99-late-ms	 10000 probes/s
BenchmarkPodCacheMemory-2   	       1	 4.9e+03 informer-slim-B/pod	 1215 informer-packed-B/pod	 21700 informer-whole-B/pod
BenchmarkMarkerScale-2   	       1	 88.0 marker-s	 1.000 marker-writes/node
== bench row k1.37-c2.4
BenchmarkProbeCost 	       1	 119.0 kubelet-added-%cpu	 106.4 probeshim-added-%cpu	 13.9 probeshim-own-%cpu	 6.4 kubelet-own-added-%cpu	 50.6 probeshim-rss-MB	 8.3 execfree-added-%cpu	 12.0 kubelet+containerd-added-%cpu	 10.5 probeshim+containerd-added-%cpu
BenchmarkScale100-2 	       1	 38.5 steady-rss-MB	 500 steady-log-B/min
== bench row k1.35-c1.7
BenchmarkProbeCost 	       1	 96.4 kubelet-added-%cpu	 70 probeshim-added-%cpu	 5.0 probeshim-own-%cpu	 6.1 kubelet-own-added-%cpu
`

func TestTable(t *testing.T) {
	m, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	render(&out, m)
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 {
			lines[l] = f[len(f)-1]
		}
	}
	want := []struct{ contains, met string }{
		{"own CPU, 60 probes/s mixed (% of a core)  k1.37-c2.4  13.9", "no"},
		{"own CPU, 60 probes/s mixed (% of a core)  k1.35-c1.7  5.0", "yes"},
		{"probeshim / the kubelet, same probes  k1.37-c2.4  0.89x (106.4%)", "no"},
		{"probeshim / the kubelet, same probes  k1.35-c1.7  0.73x (70.0%)", "yes"},
		{"the exec probe exec-free (a marker's opt-in)  k1.37-c2.4  0.07x (8.3%)  119.0%", "yes"},
		{"with containerd's CPU (where ExecSync does the exec work)  k1.37-c2.4  10.5  12.0", "yes"},
		{"RSS, 100 pods x 3 probes (MB)  k1.37-c2.4  38.5", "yes"},
		{"(cores; p99 start lateness)  -  0.16 (10000 probes/s; 1.2 ms)", "yes"},
		{"HTTP and TCP probes to loopback (cores)  -  0.41 (9000 probes/s)", "—"},
		{"per cached pod (KB)  -  1.22", "yes"},
		{"writes per node  -  1.00 (placed in 88 s)", "yes"},
		{"log at steady state, 100 pods (KB/min)  k1.37-c2.4  0.50", "yes"},
		{"in-netns TCP connect / host dial to the pod IP  -  not run", "-"},
	}
	for _, w := range want {
		found := false
		for l, met := range lines {
			if strings.Contains(strings.Join(strings.Fields(l), "  "), strings.Join(strings.Fields(w.contains), "  ")) {
				found = true
				if met != w.met {
					t.Errorf("%q: met %q, want %q", l, met, w.met)
				}
			}
		}
		if !found {
			t.Errorf("no line with %q in:\n%s", w.contains, out.String())
		}
	}
}
