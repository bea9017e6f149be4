// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
)

// BenchmarkSilentNodeService: on the rig, the default install (node B's service on the kubelet's
// identity, its Lease renewed through the cluster deployment's heartbeat endpoint, the default
// grace), 20 pods on B with a marker condition; the real node service is killed. It prints the
// time from the kill (and from the last renewal + the grace) until each pod's condition is Unknown
// (p50/p99), and the API writes (pods, pod status, NodePodProbes, events; from the API server's
// apiserver_request_total) of the expiry, of a silence that lasts, and of the recovery. Numbers
// only: it asserts no timing.
func BenchmarkSilentNodeService(b *testing.B) {
	const pods = 20
	c := framework.Get(b)
	nodes := c.Nodes()
	if len(nodes) != 2 {
		b.Fatalf("the rig has %d nodes, want 2", len(nodes))
	}
	if err := cluster.Deploy(framework.Context(b, 4*time.Minute), c, b.Logf); err != nil {
		b.Fatal(err)
	}
	s := &suite{c: c, a: nodes[0], b: nodes[1]}
	s.setGrace(b, heartbeat.DefaultGrace)
	for range b.N {
		ns := c.Namespace(b)
		svc := c.StartNodeServiceOn(b, s.b, "") // the kubelet's identity: the default install
		s.waitLeaseRenewed(b, s.b.Name())
		created := make([]*corev1.Pod, pods)
		for i := range created {
			p := framework.NewPod(ns, fmt.Sprintf("gs-%02d", i), framework.Shell(markerCtr, "echo 'no players' > "+idleFile+"; "+appScript))
			p.Labels[groupLabel] = "gs"
			p.Spec.NodeName = s.b.Name()
			created[i] = c.CreatePod(b, p)
		}
		for _, p := range created {
			c.WaitForPodReady(b, p, waitPodReady)
		}
		s.createMarker(b, idleMarker(ns))
		waitConditions(b, s, ns, pods, corev1.ConditionTrue, nil)

		ctx := framework.Context(b, 10*time.Minute)
		lastRenewal, err := s.lease(ctx, s.b.Name())
		if err != nil {
			b.Fatal(err)
		}
		m0 := apiWrites(b, s)
		b.ResetTimer()
		svc.Kill()
		killed := time.Now()
		seen := map[string]time.Time{}
		waitConditions(b, s, ns, pods, corev1.ConditionUnknown, seen)
		b.StopTimer()
		settle := 10 * time.Second
		// measures: the expiry's writes (events, the NodePodProbe record), those of the first 10 s
		time.Sleep(settle)
		m1, expiryEnd := apiWrites(b, s), time.Now()
		lasting := 30 * time.Second
		time.Sleep(lasting) // measures: the writes of a silence that lasts 30 s
		m2 := apiWrites(b, s)
		started := time.Now()
		svc.Start(b)
		waitConditions(b, s, ns, pods, corev1.ConditionTrue, nil)
		back := time.Since(started)
		time.Sleep(settle) // measures: the recovery's writes, those of 10 s after it
		m3 := apiWrites(b, s)
		svc.Stop()

		var fromKill, fromExpiry []time.Duration
		for _, at := range seen {
			fromKill = append(fromKill, at.Sub(killed))
			fromExpiry = append(fromExpiry, at.Sub(lastRenewal.Add(heartbeat.DefaultGrace)))
		}
		slices.Sort(fromKill)
		slices.Sort(fromExpiry)
		expiry, silent, recovery := m1.minus(m0), m2.minus(m1), m3.minus(m2)
		b.ReportMetric(float64(pct(fromKill, 50).Milliseconds()), "kill-to-unknown-p50-ms")
		b.ReportMetric(float64(pct(fromKill, 99).Milliseconds()), "kill-to-unknown-p99-ms")
		b.ReportMetric(float64(expiry.total()+recovery.total()), "writes/node/silence")
		fmt.Printf("silent node service on the rig: %d pods with a marker on node %s, kubelet identity (Lease through the heartbeat endpoint), grace %s:\n",
			pods, s.b.Name(), heartbeat.DefaultGrace)
		fmt.Printf("  kill -> condition Unknown:                 p50 %s, p99 %s, max %s (the last renewal was %s before the kill)\n",
			round(pct(fromKill, 50)), round(pct(fromKill, 99)), round(fromKill[len(fromKill)-1]), round(killed.Sub(lastRenewal)))
		fmt.Printf("  last renewal + grace -> condition Unknown: p50 %s, p99 %s, max %s\n",
			round(pct(fromExpiry, 50)), round(pct(fromExpiry, 99)), round(fromExpiry[len(fromExpiry)-1]))
		fmt.Printf("  expiry writes   (from the kill to %s after the last Unknown, %s): %s\n", settle, round(expiryEnd.Sub(killed)), expiry)
		fmt.Printf("  lasting silence (%s): %s = %.1f writes per node per minute\n", lasting, silent, float64(silent.total())*float64(time.Minute)/float64(lasting))
		fmt.Printf("  recovery writes (every condition True %s after the restart): %s\n", round(back), recovery)
		fmt.Printf("  a node service that goes silent and comes back once a minute: %d API writes per node per minute (%.1f per pod)\n",
			expiry.total()+recovery.total(), float64(expiry.total()+recovery.total())/pods)
	}
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

// waitConditions waits until all n pods of ns have conditionIdle with status; seen, when given,
// gets when each was first seen so (polled every 100 ms).
func waitConditions(b *testing.B, s *suite, ns string, n int, status corev1.ConditionStatus, seen map[string]time.Time) {
	b.Helper()
	if seen == nil {
		seen = map[string]time.Time{}
	}
	ctx := framework.Context(b, 5*time.Minute)
	for {
		list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		for i := range list.Items {
			p := &list.Items[i]
			if c := condition(p, conditionIdle); c != nil && c.Status == status {
				if _, ok := seen[p.Name]; !ok {
					seen[p.Name] = now
				}
			}
		}
		if len(seen) >= n {
			return
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d pods have %s %s", len(seen), n, conditionIdle, status)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeCounts are the API server's write requests, by "VERB resource[/subresource]".
type writeCounts map[string]float64

func (w writeCounts) minus(o writeCounts) writeCounts {
	d := writeCounts{}
	for k, v := range w {
		if n := v - o[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func (w writeCounts) total() int {
	t := 0.0
	for _, v := range w {
		t += v
	}
	return int(t)
}

func (w writeCounts) String() string {
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, int(w[k])))
	}
	return fmt.Sprintf("%d [%s]", w.total(), strings.Join(parts, ", "))
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiWrites reads apiserver_request_total and sums the writes to the objects a silence touches:
// pods (metadata and status), NodePodProbes and events. Leases are left out: the kubelets renew
// their own all along.
func apiWrites(b *testing.B, s *suite) writeCounts {
	b.Helper()
	raw, err := s.c.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	w := writeCounts{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		switch labels["resource"] {
		case "pods", "nodepodprobes", "events":
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		w[key] += v
	}
	return w
}
