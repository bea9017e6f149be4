// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// reactions is how many liveness failures BenchmarkReaction times.
var reactions = envInt("PROBESHIM_BENCH_REACTIONS", 20)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkReaction times the decider's reaction on the rig: one pod at a time (each its own
// workload, so no budget or backoff waits) has its enhanced liveness probe fail, and three
// moments are seen through watches from this process (millisecond clocks, unlike the API's
// second-resolution timestamps): the NodePodProbe status showing Failed, the decider's
// ContainerRecreateRequest created, and the container killed — the node service marking it
// killed in the request, and the kubelet reporting the restart (restartCount) in the pod status.
// It runs once (-benchtime 1x) and reports p50/p99 of each span from the status turning Failed.
func BenchmarkReaction(b *testing.B) {
	s := setup(b)
	ns := s.c.Namespace(b)
	ctx := framework.Context(b, time.Hour)

	pods := make([]*corev1.Pod, reactions)
	for i := range pods {
		pods[i] = s.c.CreatePod(b, appPod(ns, fmt.Sprintf("r-%02d", i), true, execLivenessProbe(failMarker)))
	}
	for i := range pods {
		pods[i] = s.c.WaitForPodReady(b, pods[i], waitPodReady)
		s.waitProbe(b, pods[i], v1alpha1.ProbeSucceeded)
	}

	var mu sync.Mutex
	failedAt := map[types.UID]time.Time{}
	restartedAt := map[types.UID]time.Time{}
	if err := watchFunc(ctx, s.c, &v1alpha1.NodePodProbeList{}, nil, func(at time.Time, _ watch.EventType, o client.Object) {
		npp := o.(*v1alpha1.NodePodProbe)
		mu.Lock()
		defer mu.Unlock()
		for _, ps := range npp.Status.PodProbeStatuses {
			for _, st := range ps.ProbeStates {
				if uid := types.UID(ps.UID); st.Name == livenessProbeName && st.State == v1alpha1.ProbeFailed && failedAt[uid].IsZero() {
					failedAt[uid] = at
				}
			}
		}
	}); err != nil {
		b.Fatal(err)
	}
	if err := watchFunc(ctx, s.c, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns)}, func(at time.Time, _ watch.EventType, o client.Object) {
		p := o.(*corev1.Pod)
		mu.Lock()
		defer mu.Unlock()
		if restarts(p) > 0 && restartedAt[p.UID].IsZero() {
			restartedAt[p.UID] = at
		}
	}); err != nil {
		b.Fatal(err)
	}
	seen := func(m map[types.UID]time.Time, uid types.UID) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return m[uid]
	}

	var toCRR, toKilled, toRestart []time.Duration
	for _, pod := range pods {
		s.fail(b, pod, failMarker)
		var crrName string
		err := framework.WaitFor(ctx, waitRestart, "failure, request, kill and restart of "+pod.Name, func(context.Context) (bool, string, error) {
			created := s.crrs.created(ns, pod.Name)
			if len(created) > 0 {
				crrName = created[0].crr.Name
			}
			ok := !seen(failedAt, pod.UID).IsZero() && crrName != "" && !s.crrs.killedAt(ns, crrName).IsZero() && !seen(restartedAt, pod.UID).IsZero()
			return ok, fmt.Sprintf("failed %s, request %q, killed %s, restarted %s", seen(failedAt, pod.UID).Format("15:04:05.000"),
				crrName, s.crrs.killedAt(ns, crrName).Format("15:04:05.000"), seen(restartedAt, pod.UID).Format("15:04:05.000")), nil
		})
		s.crrs.check(b)
		if err != nil {
			b.Fatalf("%v\n%s", err, s.explain(pod))
		}
		failed := seen(failedAt, pod.UID)
		toCRR = append(toCRR, s.crrs.created(ns, pod.Name)[0].at.Sub(failed))
		toKilled = append(toKilled, s.crrs.killedAt(ns, crrName).Sub(failed))
		toRestart = append(toRestart, seen(restartedAt, pod.UID).Sub(failed))
		// Settled before the next: probe recovered, request deleted by the decider.
		s.waitProbe(b, pod, v1alpha1.ProbeSucceeded)
		err = framework.WaitFor(ctx, time.Minute, "request "+crrName+" deleted", func(context.Context) (bool, string, error) {
			return s.crrs.deleted(ns, crrName), "", nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}

	report := func(name string, ds []time.Duration) {
		b.ReportMetric(float64(framework.Percentile(ds, 0.5).Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(framework.Percentile(ds, 0.99).Microseconds())/1000, name+"-p99-ms")
	}
	report("failed-to-crr", toCRR)
	report("failed-to-killed", toKilled)
	report("failed-to-restarted", toRestart)
	b.Logf("\n%d liveness failures, from the NodePodProbe status showing Failed:\n"+
		"%-44s p50 %8s  p99 %8s\n%-44s p50 %8s  p99 %8s\n%-44s p50 %8s  p99 %8s\nall (ms): crr %v\n          killed %v\n          restarted %v",
		len(pods),
		"ContainerRecreateRequest created", framework.Percentile(toCRR, 0.5).Round(time.Millisecond), framework.Percentile(toCRR, 0.99).Round(time.Millisecond),
		"container killed (request status isKilled)", framework.Percentile(toKilled, 0.5).Round(time.Millisecond), framework.Percentile(toKilled, 0.99).Round(time.Millisecond),
		"restart seen by the kubelet (restartCount)", framework.Percentile(toRestart, 0.5).Round(time.Millisecond), framework.Percentile(toRestart, 0.99).Round(time.Millisecond),
		roundAll(toCRR), roundAll(toKilled), roundAll(toRestart))
}

// watchFunc calls fn for every event of the objects of list's kind from now on (bookmarks
// aside), until ctx ends. A watch the server closes is reopened where it left off.
func watchFunc(ctx context.Context, c *framework.Cluster, list client.ObjectList, opts []client.ListOption, fn func(time.Time, watch.EventType, client.Object)) error {
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Scheme})
	if err != nil {
		return err
	}
	if err := wc.List(ctx, list, opts...); err != nil {
		return err
	}
	rv := list.(metav1.ListInterface).GetResourceVersion()
	open := func() (watch.Interface, error) {
		o := append(append([]client.ListOption{}, opts...), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		return wc.Watch(ctx, list, o...)
	}
	w, err := open()
	if err != nil {
		return err
	}
	go func() {
		for {
			for ev := range w.ResultChan() {
				at := time.Now()
				if ev.Type == watch.Error {
					return
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if o, ok := ev.Object.(client.Object); ok && ev.Type != watch.Bookmark {
					fn(at, ev.Type, o)
				}
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = open(); err != nil {
				return
			}
		}
	}()
	return nil
}
