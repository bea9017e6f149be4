// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkProbeVsHostPodIP measures what PERFORMANCE.md targets: a TCP
// probe (connect, close) and an HTTP probe (GET on a new connection) made
// inside the pod's namespace against the same made by a plain dial from the
// node's namespace to the pod IP over a veth, as the kubelet does.
//
// The node is a namespace of its own: the benchmark re-runs itself inside a
// fresh one (nsenter), so the veth and addresses never touch the machine's
// real network. Needs root and iproute2.
func BenchmarkProbeVsHostPodIP(b *testing.B) {
	if os.Getenv("PROBESHIM_BENCH_NODE_NS") == "" {
		node := newTestNS(b)
		cmd := exec.Command("nsenter", "--net="+node.path, os.Args[0],
			"-test.run=^$", "-test.bench=^BenchmarkProbeVsHostPodIP$", "-test.benchtime=1x", "-test.count=1")
		cmd.Env = append(os.Environ(), "PROBESHIM_BENCH_NODE_NS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("benchmark inside the node namespace: %v\n%s", err, out)
		}
		// Report the child's numbers as ours.
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "BenchmarkProbeVsHostPodIP") {
				continue
			}
			for _, m := range regexp.MustCompile(`([0-9.]+) ([a-z/-]+)`).FindAllStringSubmatch(line, -1) {
				if v, err := strconv.ParseFloat(m[1], 64); err == nil && m[2] != "ns/op" {
					b.ReportMetric(v, m[2])
				}
			}
		}
		return
	}

	pod := newTestNS(b)
	ipCmd(b, "link", "add", "psbench0", "type", "veth", "peer", "name", "eth0", "netns", pod.name)
	ipCmd(b, "addr", "add", "10.254.254.1/30", "dev", "psbench0")
	ipCmd(b, "link", "set", "psbench0", "up")
	ipCmd(b, "-n", pod.name, "addr", "add", "10.254.254.2/30", "dev", "eth0")
	ipCmd(b, "-n", pod.name, "link", "set", "eth0", "up")
	l := listenIn(b, pod.path, "0.0.0.0:0", "")
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	httpL := listenAt(b, pod.path, "0.0.0.0:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(httpL) }()
	b.Cleanup(func() { srv.Close() })
	httpPort := strconv.Itoa(httpL.Addr().(*net.TCPAddr).Port)
	podIP := "10.254.254.2"

	d, err := NewDialer(pod.path)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	host := HostDialer()
	client := func(dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
		return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true, DisableCompression: true}}
	}
	hostHTTP, nsHTTP := client(host.DialContext), client(d.DialContext)
	get := func(c *http.Client, url string) {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	cases := []struct {
		name string
		op   func()
	}{
		{"tcp-host-podip", func() { dialClose(b, host.DialContext, podIP+":"+port) }},
		{"tcp-netns-loopback", func() { dialClose(b, d.DialContext, "127.0.0.1:"+port) }},
		{"tcp-netns-podip", func() { dialClose(b, d.DialContext, podIP+":"+port) }},
		{"http-host-podip", func() { get(hostHTTP, "http://"+podIP+":"+httpPort+"/") }},
		{"http-netns-loopback", func() { get(nsHTTP, "http://127.0.0.1:"+httpPort+"/") }},
	}
	const block, rounds = 100, 20
	wall := make([]time.Duration, len(cases))
	cpu := make([]time.Duration, len(cases))
	for range rounds {
		for i, c := range cases {
			c0, w0 := cpuTime(), time.Now()
			for range block {
				c.op()
			}
			wall[i] += time.Since(w0)
			cpu[i] += cpuTime() - c0
		}
	}
	n := float64(block * rounds)
	for i, c := range cases {
		b.ReportMetric(float64(wall[i].Microseconds())/n, c.name+"-us")
		b.ReportMetric(float64(cpu[i].Microseconds())/n, c.name+"-cpu-us")
	}
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "tcp-netns/host")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "tcp-netns/host-cpu")
	b.ReportMetric(float64(wall[4])/float64(wall[3]), "http-netns/host")
	b.ReportMetric(float64(cpu[4])/float64(cpu[3]), "http-netns/host-cpu")
}
