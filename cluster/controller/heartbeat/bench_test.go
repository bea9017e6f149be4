// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// BenchmarkNodeServiceSilence: 20 pods with a marker condition on a node whose node service stops
// renewing its Lease. It prints how long after the last renewal + the grace each condition is
// Unknown (p50/p99), and the API writes the expiry and the recovery cost the node: pod patches,
// NodePodProbe patches and events, each once per transition; a silence that lasts writes nothing.
func BenchmarkNodeServiceSilence(b *testing.B) {
	if env == nil {
		b.Skip("skipped: " + skipReason)
	}
	const pods = 20
	for range b.N {
		ns := env.Namespace(b)
		node := env.Node(b, true).Name
		svc := startNodeService(b, node)
		marker(b, ns, "removes", "example.com/idle", "idle", nil)
		all := gamePods(b, ns, node, pods)
		nodePodProbe(b, node, all, []string{"removes#idle"}, v1alpha1.ProbeSucceeded)
		waitAll(b, ns, corev1.ConditionTrue, nil)
		waitNPPState(b, node, v1alpha1.NodeServiceLive)

		mark := env.Writes.Len()
		b.ResetTimer()
		last := svc.halt()
		expired := last.Add(grace)
		nppSilent := make(chan time.Time, 1) // when the NodePodProbe says Silent
		go func() {
			for {
				npp := &v1alpha1.NodePodProbe{}
				if env.Client.Get(context.Background(), client.ObjectKey{Name: node}, npp) == nil &&
					npp.Annotations[v1alpha1.AnnotationNodeService] == v1alpha1.NodeServiceSilent {
					nppSilent <- time.Now()
					return
				}
				time.Sleep(5 * time.Millisecond) // measures: when the NodePodProbe says Silent, to 5 ms
			}
		}()
		seen := map[string]time.Time{}
		waitAll(b, ns, corev1.ConditionUnknown, seen)
		b.StopTimer()
		waitNPPState(b, node, v1alpha1.NodeServiceSilent)
		waitEvents(b, ns, heartbeat.EventReasonSilent, pods)
		expiry := writesSince(mark, ns, node)

		mark = env.Writes.Len()
		quiet := 3 * time.Second
		time.Sleep(quiet) // measures: a silence that lasts, what it writes per minute
		steady := writesSince(mark, ns, node)

		mark = env.Writes.Len()
		start := time.Now()
		svc.start()
		waitAll(b, ns, corev1.ConditionTrue, nil)
		back := time.Since(start)
		waitNPPState(b, node, v1alpha1.NodeServiceLive)
		waitEvents(b, ns, heartbeat.EventReasonResumed, pods)
		recovery := writesSince(mark, ns, node)

		recorded := (<-nppSilent).Sub(expired)
		var lat []time.Duration
		for _, at := range seen {
			lat = append(lat, at.Sub(expired))
		}
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
		b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
		b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
		b.ReportMetric(float64(expiry.total()+pods), "expiry-writes/node")
		b.ReportMetric(float64(recovery.total()+pods), "recovery-writes/node")
		fmt.Printf("node service silence, %d pods on one node, grace %s (envtest):\n", pods, grace)
		fmt.Printf("  last renewal + grace -> NodePodProbe says Silent: %s\n", recorded.Round(time.Millisecond))
		fmt.Printf("  last renewal + grace -> every marker condition Unknown: min %s, p50 %s, p99 %s, max %s\n",
			lat[0].Round(time.Millisecond), p50.Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
		fmt.Printf("  expiry:   %d pod metadata patches, %d pod status patches, %d NodePodProbe patches, %d events (once per silence)\n",
			expiry.podMeta, expiry.podStatus, expiry.npp, pods)
		fmt.Printf("  silent:   %d writes in %s (%.0f per node per minute)\n", steady.total(), quiet, float64(steady.total())*float64(time.Minute)/float64(quiet))
		fmt.Printf("  recovery: %d pod metadata patches, %d pod status patches, %d NodePodProbe patches, %d events; every condition current %s after the first renewal\n",
			recovery.podMeta, recovery.podStatus, recovery.npp, pods, back.Round(time.Millisecond))
		fmt.Printf("  a node that goes silent and comes back once a minute: %d API writes per node per minute\n",
			expiry.total()+recovery.total()+2*pods)
	}
}

type writeCount struct{ podMeta, podStatus, npp int }

func (w writeCount) total() int { return w.podMeta + w.podStatus + w.npp }

func writesSince(mark int, ns, node string) writeCount {
	var c writeCount
	for _, w := range env.Writes.Since(mark) {
		switch {
		case w.Kind == "Pod" && w.Namespace == ns && w.Subresource == "status":
			c.podStatus++
		case w.Kind == "Pod" && w.Namespace == ns:
			c.podMeta++
		case w.Kind == "NodePodProbe" && w.Name == node:
			c.npp++
		}
	}
	return c
}

// waitAll waits until every pod of ns has example.com/idle with status; seen, when given, gets
// when each pod was first seen so (from a watch, so the times are the API server's pace).
func waitAll(b *testing.B, ns string, status corev1.ConditionStatus, seen map[string]time.Time) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	var list corev1.PodList
	if err := wc.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	if seen == nil {
		seen = map[string]time.Time{}
	}
	done := func(p *corev1.Pod) {
		if c := condition(p, "example.com/idle"); c != nil && c.Status == status {
			if _, ok := seen[p.Name]; !ok {
				seen[p.Name] = time.Now()
			}
		}
	}
	for i := range list.Items {
		done(&list.Items[i])
	}
	if len(seen) == len(list.Items) {
		return
	}
	// From the list's version: no change between the list and the watch is missed.
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for len(seen) < len(list.Items) {
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d pods have example.com/idle %s", len(seen), len(list.Items), status)
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified {
				done(p)
			}
		}
	}
}

func waitEvents(b *testing.B, ns, reason string, n int) {
	b.Helper()
	poll.Eventually(b, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		got := 0
		for _, e := range list.Items {
			if e.Reason == reason {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d %s events, want %d", got, reason, n)
		}
		return nil
	})
}
