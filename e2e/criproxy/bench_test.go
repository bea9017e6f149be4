// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/e2e/framework"
)

// BenchmarkProxyLatency times the kubelet's most frequent CRI calls and the
// one of exec probes through the node service's proxy and straight to
// containerd, alternating call by call on the same containers, and reports
// median and p99 of each and the ratio of the medians. It runs once
// (-benchtime 1x); the node holds 10 pods, so ListContainers returns a list
// of a realistic size.
func BenchmarkProxyLatency(b *testing.B) {
	c := framework.Get(b)
	c.InstallCRDs(b)
	_, sock := startProxy(b, c)
	ns := c.Namespace(b)
	pods := benchPods(b, c, ns, 10)
	id := appContainerID(b, pods[0])

	direct, dconn, err := c.CRI()
	if err != nil {
		b.Fatal(err)
	}
	defer dconn.Close()
	proxied, pconn, err := dialCRI(sock)
	if err != nil {
		b.Fatal(err)
	}
	defer pconn.Close()

	ops := []struct {
		name string
		n    int
		call func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error
	}{
		{"ListContainers", 300, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			if err == nil && len(resp.Containers) < len(pods) {
				err = fmt.Errorf("%d containers listed, want at least %d", len(resp.Containers), len(pods))
			}
			return err
		}},
		{"ContainerStatus", 300, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			_, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err
		}},
		{"ExecSync", 100, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			resp, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/tmp/f"}, Timeout: 5})
			if err == nil && resp.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", resp.ExitCode, resp.Stderr)
			}
			return err
		}},
	}
	ctx := framework.Context(b, 10*time.Minute)
	var report strings.Builder
	fmt.Fprintf(&report, "\nCRI latency through the probeshim proxy vs containerd directly (alternating, same containers, %d pods on the node):\n", len(pods))
	fmt.Fprintf(&report, "%-16s %6s %12s %12s %12s %12s %14s %12s\n", "call", "n", "direct p50", "direct p99", "proxy p50", "proxy p99", "added p50", "ratio p50")
	for _, op := range ops {
		// Warm both connections and containerd's caches first.
		for range 5 {
			if err := op.call(ctx, direct); err != nil {
				b.Fatalf("%s direct: %v", op.name, err)
			}
			if err := op.call(ctx, proxied); err != nil {
				b.Fatalf("%s through the proxy: %v", op.name, err)
			}
		}
		var d, p []time.Duration
		for range op.n {
			t0 := time.Now()
			if err := op.call(ctx, direct); err != nil {
				b.Fatalf("%s direct: %v", op.name, err)
			}
			d = append(d, time.Since(t0))
			t0 = time.Now()
			if err := op.call(ctx, proxied); err != nil {
				b.Fatalf("%s through the proxy: %v", op.name, err)
			}
			p = append(p, time.Since(t0))
		}
		dm, d99, pm, p99 := framework.Percentile(d, 0.5), framework.Percentile(d, 0.99), framework.Percentile(p, 0.5), framework.Percentile(p, 0.99)
		ratio := float64(pm) / float64(dm)
		fmt.Fprintf(&report, "%-16s %6d %12s %12s %12s %12s %14s %12.3f\n", op.name, op.n,
			round(dm), round(d99), round(pm), round(p99), round(pm-dm), ratio)
		b.ReportMetric(ms(dm), op.name+"-direct-p50-ms")
		b.ReportMetric(ms(pm), op.name+"-proxy-p50-ms")
		b.ReportMetric(ms(d99), op.name+"-direct-p99-ms")
		b.ReportMetric(ms(p99), op.name+"-proxy-p99-ms")
		b.ReportMetric(ratio, op.name+"-ratio")
	}
	b.Log(report.String())
}

func benchPods(b *testing.B, c *framework.Cluster, ns string, n int) []*corev1.Pod {
	b.Helper()
	out := make([]*corev1.Pod, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := framework.Context(b, 3*time.Minute)
			p := framework.NewPod(ns, fmt.Sprintf("bench-%d", i), framework.Shell("app", "echo ok > /tmp/f; exec sleep 100000"))
			if _, errs[i] = c.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); errs[i] == nil {
				out[i], errs[i] = c.WaitForPod(ctx, ns, p.Name, 2*time.Minute, "Ready", framework.PodReady)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return out
}

func appContainerID(b *testing.B, pod *corev1.Pod) string {
	b.Helper()
	cs := framework.ContainerStatus(pod, "app")
	if cs == nil || cs.ContainerID == "" {
		b.Fatalf("no container ID: %s", framework.DescribePod(pod))
	}
	return strings.TrimPrefix(cs.ContainerID, "containerd://")
}

func round(d time.Duration) string { return d.Round(time.Microsecond).String() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
