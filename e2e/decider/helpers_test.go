// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
)

// Names the scenarios use.
const (
	appContainer = "app"
	// failMarker makes the app's liveness probe fail while it exists; it is in the container's
	// own filesystem, so the recreated container starts without it and the probe recovers.
	failMarker = "/tmp/fail"
	// stickyMarker is on an emptyDir: it survives the container's restarts.
	stickyMarker = "/data/fail"
	// appScript serves the liveness probe (livenessProbe) and exits at once on SIGTERM, so the
	// restart timings are the decider's and the node's, not a timeout's.
	appScript    = framework.ServingScript
	appPort      = framework.ServingPort
	waitPodReady = 2 * time.Minute
	// waitRestart bounds one liveness failure becoming a restarted container: the probe period
	// (1 s), a status write (1 s), the decider, the rate limit (1/s, shared by the scenarios
	// that run at once) and the node's kill and the kubelet's restart. Seconds on an idle
	// machine; the room is for a loaded 2-core one.
	waitRestart = 90 * time.Second
	// probeTimeout (seconds) is the timeout of the probes that must not fail unless a scenario
	// makes them: these scenarios are about results, never about timeouts.
	probeTimeout = 15
)

var livenessProbeName = v1alpha1.LivenessProbeName(appContainer)

// ---- pods and workloads ----

// livenessProbe fails while marker exists: every second, one result flips it. It asks appScript's
// server (framework.FailingWhile) rather than exec `test ! -e`: these scenarios are about the
// decider, and every pod's exec every second cost a runc run and its shim's work (about 900 runc
// runs a row, measured with process accounting). The probes start a second after the container,
// once the server listens (a refused first probe would restart a pod the test did not make fail).
// The exit scenarios keep an exec (execLivenessProbe).
func livenessProbe(marker string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        framework.FailingWhile(marker),
		InitialDelaySeconds: 1, PeriodSeconds: 1, TimeoutSeconds: probeTimeout, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// execLivenessProbe is livenessProbe as an exec. A probe that times out fails too, and a loaded
// 2-core machine has been seen to take over 5 s for an exec (CI, with the package tests beside the
// row): the timeout of probeTimeout keeps that from restarting a pod the test did not make fail.
func execLivenessProbe(marker string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "!", "-e", marker}}},
		PeriodSeconds: 1, TimeoutSeconds: probeTimeout, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// appPod is a pod template whose container app has probe as its livenessProbe, taken over by
// probeshim when enhanced (the annotation), left to the kubelet when not.
func appPod(ns, name string, enhanced bool, probe *corev1.Probe) *corev1.Pod {
	ctr := framework.Shell(appContainer, appScript)
	ctr.LivenessProbe = probe
	pod := framework.NewPod(ns, name, ctr)
	if enhanced {
		pod.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	}
	return pod
}

// withStickyMarker mounts an emptyDir at /data in the app container.
func withStickyMarker(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
}

// barePod creates a pod without a controller (its own workload) and waits until it is Ready
// and, when enhanced, its liveness probe succeeds.
func (s *suite) barePod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p := s.c.WaitForPodReady(t, s.c.CreatePod(t, pod), waitPodReady)
	if pod.Annotations[v1alpha1.AnnotationUsingEnhancedLiveness] == "true" {
		s.waitProbe(t, p, v1alpha1.ProbeSucceeded)
	}
	return p
}

// createDeployment creates a Deployment of replicas pods like tmpl (label app=name).
func (s *suite) createDeployment(t testing.TB, tmpl *corev1.Pod, replicas int32) *appsv1.Deployment {
	t.Helper()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: tmpl.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec},
		},
	}
	if err := s.c.Client.Create(framework.Context(t, time.Minute), dep); err != nil {
		t.Fatalf("create Deployment %s/%s: %v", dep.Namespace, dep.Name, err)
	}
	return dep
}

// deployment creates a Deployment like tmpl and waits for all its pods to be Ready and their
// enhanced liveness probes (if any) to succeed; it returns the pods sorted by name.
func (s *suite) deployment(t testing.TB, tmpl *corev1.Pod, replicas int32) []*corev1.Pod {
	t.Helper()
	s.createDeployment(t, tmpl, replicas)
	return s.waitWorkload(t, tmpl.Namespace, tmpl.Name, int(replicas), tmpl.Annotations[v1alpha1.AnnotationUsingEnhancedLiveness] == "true")
}

func (s *suite) waitWorkload(t testing.TB, ns, app string, n int, enhanced bool) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	err := framework.WaitFor(framework.Context(t, waitPodReady+time.Minute), waitPodReady, fmt.Sprintf("%d pods of %s/%s Ready, liveness Succeeded", n, ns, app),
		func(ctx context.Context) (bool, string, error) {
			list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, err.Error(), nil
			}
			pods = pods[:0]
			var obs []string
			ok := len(list.Items) == n
			for i := range list.Items {
				p := &list.Items[i]
				pods = append(pods, p)
				obs = append(obs, p.Name+": "+framework.DescribePod(p))
				if p.DeletionTimestamp != nil || !framework.PodReady(p) {
					ok = false
				}
			}
			if ok && enhanced {
				npp, err := s.npp(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				for _, p := range pods {
					if st := probeState(npp, p); st.State != v1alpha1.ProbeSucceeded {
						ok = false
						obs = append(obs, fmt.Sprintf("%s liveness %q", p.Name, st.State))
					}
				}
			}
			return ok, strings.Join(obs, "; "), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

func (s *suite) createPDB(t testing.TB, ns, app string, maxUnavailable int) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable))),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if err := s.c.Client.Create(framework.Context(t, time.Minute), pdb); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
}

// fail makes the pod's liveness probe fail by creating marker in its app container.
func (s *suite) fail(t testing.TB, pod *corev1.Pod, marker string) {
	t.Helper()
	if _, _, err := s.c.Exec(framework.Context(t, time.Minute), pod.Namespace, pod.Name, appContainer, "touch", marker); err != nil {
		t.Fatal(err)
	}
}

// failAll makes the pods fail at once.
func (s *suite) failAll(t testing.TB, pods []*corev1.Pod, marker string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = s.c.Exec(framework.Context(t, time.Minute), p.Namespace, p.Name, appContainer, "touch", marker)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (s *suite) pod(t testing.TB, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur, err := s.c.Kube.CoreV1().Pods(p.Namespace).Get(framework.Context(t, 30*time.Second), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

func restarts(p *corev1.Pod) int32 {
	if st := framework.ContainerStatus(p, appContainer); st != nil {
		return st.RestartCount
	}
	return -1
}

// waitRestarts waits for the app container's restartCount to be n and its liveness probe (when
// enhanced) to succeed again.
func (s *suite) waitRestarts(t testing.TB, pod *corev1.Pod, n int32, timeout time.Duration) *corev1.Pod {
	t.Helper()
	p, err := s.c.WaitForPod(framework.Context(t, timeout+time.Minute), pod.Namespace, pod.Name, timeout,
		fmt.Sprintf("restartCount %d, Ready", n), func(p *corev1.Pod) bool { return restarts(p) == n && framework.PodReady(p) })
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
	return p
}

// record is the decider's record on the pod.
func record(t testing.TB, p *corev1.Pod) decider.Record {
	t.Helper()
	r, err := decider.ParseRecord(p.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ---- NodePodProbe ----

func (s *suite) npp(ctx context.Context) (*v1alpha1.NodePodProbe, error) {
	npp := &v1alpha1.NodePodProbe{}
	return npp, s.c.Client.Get(ctx, client.ObjectKey{Name: s.c.Rig.NodeName()}, npp)
}

func probeState(npp *v1alpha1.NodePodProbe, pod *corev1.Pod) v1alpha1.ContainerProbeState {
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.UID == string(pod.UID) {
			for _, st := range ps.ProbeStates {
				if st.Name == livenessProbeName {
					return st
				}
			}
		}
	}
	return v1alpha1.ContainerProbeState{}
}

func (s *suite) waitProbe(t testing.TB, pod *corev1.Pod, want v1alpha1.ProbeState) {
	t.Helper()
	err := s.c.WaitForProbeState(framework.Context(t, 2*time.Minute), s.c.Rig.NodeName(), pod.UID, livenessProbeName, want, time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
}

// ---- events ----

// waitHeld waits for the decider's held event with reason on the pod.
func (s *suite) waitHeld(t testing.TB, pod *corev1.Pod, reason decider.Reason, timeout time.Duration) *corev1.Event {
	t.Helper()
	return s.waitEvent(t, pod, decider.EventReasonHeld, "("+string(reason)+")", timeout)
}

func (s *suite) waitEvent(t testing.TB, pod *corev1.Pod, reason, substr string, timeout time.Duration) *corev1.Event {
	t.Helper()
	ev, err := s.c.WaitForEvent(framework.Context(t, timeout+time.Minute), pod.Namespace, pod.Name, reason, substr, timeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
	return ev
}

// heldReasons lists the reasons of the decider's held events on the pod, oldest first.
func (s *suite) heldReasons(t testing.TB, pod *corev1.Pod) []string {
	t.Helper()
	evs, err := s.c.Events(framework.Context(t, 30*time.Second), pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	re := regexp.MustCompile(`held back \(([A-Za-z]+)\)`)
	for _, e := range evs {
		if m := re.FindStringSubmatch(e.Message); e.Reason == decider.EventReasonHeld && m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// explain is the state around a pod, for failure messages.
func (s *suite) explain(pod *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	if p, err := s.c.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "pod %s: %s\n  record: %s\n", p.Name, framework.DescribePod(p), p.Annotations[decider.AnnotationRestarts])
		if npp, err := s.npp(ctx); err == nil {
			st := probeState(npp, p)
			fmt.Fprintf(&b, "  liveness: %s since %s %q\n", st.State, st.LastTransitionTime, st.Message)
		}
	}
	if evs, err := s.c.Events(ctx, pod.Namespace, pod.Name); err == nil {
		b.WriteString("  events:\n" + framework.FormatEvents(evs))
	}
	fmt.Fprintf(&b, "  requests seen for the namespace: %s\n", s.crrs.describe(pod.Namespace))
	return b.String()
}

// ---- the ContainerRecreateRequests, as a watch sees them ----

// crrEvent is one watch event of a ContainerRecreateRequest, with when this process saw it.
type crrEvent struct {
	at  time.Time
	typ watch.EventType
	crr *v1alpha1.ContainerRecreateRequest
}

// crrLog records every ContainerRecreateRequest event from the moment it starts, in the order
// the API server sends them (one watch: resourceVersion order, the true order of the changes).
type crrLog struct {
	mu     sync.Mutex
	events []crrEvent
	err    error
}

// watchRequests starts recording; it stops when ctx ends.
func watchRequests(ctx context.Context, c *framework.Cluster) (*crrLog, error) {
	l := &crrLog{}
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	var list v1alpha1.ContainerRecreateRequestList
	if err := wc.List(ctx, &list); err != nil {
		return nil, err
	}
	rv := list.ResourceVersion
	open := func() (watch.Interface, error) {
		return wc.Watch(ctx, &v1alpha1.ContainerRecreateRequestList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	}
	w, err := open()
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			for ev := range w.ResultChan() {
				now := time.Now()
				if ev.Type == watch.Error {
					l.fail(fmt.Errorf("the ContainerRecreateRequest watch failed: %w", apierrors.FromObject(ev.Object)))
					w.Stop()
					return
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				crr, ok := ev.Object.(*v1alpha1.ContainerRecreateRequest)
				if !ok {
					continue
				}
				l.mu.Lock()
				l.events = append(l.events, crrEvent{at: now, typ: ev.Type, crr: crr})
				l.mu.Unlock()
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = open(); err != nil { // the server closed the watch: go on from rv
				l.fail(fmt.Errorf("reopening the ContainerRecreateRequest watch: %w", err))
				return
			}
		}
	}()
	return l, nil
}

func (l *crrLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *crrLog) check(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatal(l.err)
	}
}

// created lists the creations (ADDED events) in namespace ns, for pod when not "", in order.
func (l *crrLog) created(ns, pod string) []crrEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []crrEvent
	for _, e := range l.events {
		if e.typ == watch.Added && e.crr.Namespace == ns && (pod == "" || e.crr.Spec.PodName == pod) {
			out = append(out, e)
		}
	}
	return out
}

// deleted says whether the request named ns/name was deleted after its last creation.
func (l *crrLog) deleted(ns, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	gone := false
	for _, e := range l.events {
		if e.crr.Namespace == ns && e.crr.Name == name {
			gone = e.typ == watch.Deleted
		}
	}
	return gone
}

// maxActive is the most requests of namespace ns active (created, not yet completed or deleted)
// at one time, and when that was first reached.
func (l *crrLog) maxActive(ns string) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	active := map[string]bool{}
	most, at := 0, []string(nil)
	for _, e := range l.events {
		if e.crr.Namespace != ns {
			continue
		}
		done := e.typ == watch.Deleted || e.crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || e.crr.Status.CompletionTime != nil
		if done {
			delete(active, e.crr.Name)
		} else {
			active[e.crr.Name] = true
		}
		if len(active) > most {
			most, at = len(active), nil
			for n := range active {
				at = append(at, n)
			}
			sort.Strings(at)
		}
	}
	return most, at
}

// killedAt is when the log first saw the request ns/name with a container killed.
func (l *crrLog) killedAt(ns, name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.crr.Namespace == ns && e.crr.Name == name {
			for _, st := range e.crr.Status.ContainerRecreateStates {
				if st.IsKilled {
					return e.at
				}
			}
		}
	}
	return time.Time{}
}

// completedAt is when the log first saw the request ns/name completed.
func (l *crrLog) completedAt(ns, name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.crr.Namespace == ns && e.crr.Name == name && e.crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted {
			return e.at
		}
	}
	return time.Time{}
}

func (l *crrLog) describe(ns string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, e := range l.events {
		if e.crr.Namespace == ns {
			parts = append(parts, fmt.Sprintf("%s %s %s(pod %s phase %q)", e.at.Format("15:04:05.000"), e.typ, e.crr.Name, e.crr.Spec.PodName, e.crr.Status.Phase))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return "\n    " + strings.Join(parts, "\n    ")
}

// waitCreated waits for n creations of requests for pod (all of them, since the log started)
// and returns them.
func (s *suite) waitCreated(t testing.TB, pod *corev1.Pod, n int, timeout time.Duration) []crrEvent {
	t.Helper()
	var got []crrEvent
	err := framework.WaitFor(framework.Context(t, timeout+time.Minute), timeout, fmt.Sprintf("%d ContainerRecreateRequests for %s/%s", n, pod.Namespace, pod.Name),
		func(context.Context) (bool, string, error) {
			got = s.crrs.created(pod.Namespace, pod.Name)
			return len(got) >= n, fmt.Sprintf("%d", len(got)), nil
		})
	s.crrs.check(t)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
	return got
}

// waitAllDeleted waits until every request created in ns was deleted (the decider deletes its
// requests once it has seen them finish and updated its record).
func (s *suite) waitAllDeleted(t testing.TB, ns string, timeout time.Duration) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, timeout+time.Minute), timeout, "every ContainerRecreateRequest of "+ns+" deleted by the decider",
		func(context.Context) (bool, string, error) {
			var left []string
			for _, e := range s.crrs.created(ns, "") {
				if !s.crrs.deleted(ns, e.crr.Name) {
					left = append(left, e.crr.Name)
				}
			}
			return len(left) == 0, strings.Join(left, ","), nil
		})
	if err != nil {
		t.Fatalf("%v\nrequests: %s", err, s.crrs.describe(ns))
	}
}

// noRequests fails the test if any request was created for the namespace (pod "" for all).
func (s *suite) noRequests(t testing.TB, ns, pod string) {
	t.Helper()
	s.crrs.check(t)
	if got := s.crrs.created(ns, pod); len(got) > 0 {
		t.Errorf("ContainerRecreateRequests were created for %s/%s: %s", ns, pod, s.crrs.describe(ns))
	}
}

// checkRequest checks what the decider puts in a request it creates.
func checkRequest(t testing.TB, e crrEvent, pod *corev1.Pod) {
	t.Helper()
	r := e.crr
	if got := r.Labels[decider.LabelCreatedBy]; got != decider.ControllerName {
		t.Errorf("request %s: label %s=%q, want %q", r.Name, decider.LabelCreatedBy, got, decider.ControllerName)
	}
	if !strings.HasPrefix(r.Name, pod.Name+"-liveness-") {
		t.Errorf("request %s: want the name %s-liveness-<hash>", r.Name, pod.Name)
	}
	if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Kind != "Pod" || r.OwnerReferences[0].UID != pod.UID {
		t.Errorf("request %s: owner references %+v, want the pod %s", r.Name, r.OwnerReferences, pod.UID)
	}
	if r.Spec.Strategy == nil || r.Spec.Strategy.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyFail {
		t.Errorf("request %s: strategy %+v, want failurePolicy Fail", r.Name, r.Spec.Strategy)
	}
	if len(r.Spec.Containers) != 1 || r.Spec.Containers[0].Name != appContainer {
		t.Errorf("request %s: containers %+v, want exactly %s", r.Name, r.Spec.Containers, appContainer)
	}
}

// ---- the decider's configuration and deployment ----

// setConfig writes the decider's configuration document and waits until the decider has
// loaded it (its log says so after the write).
func (s *suite) setConfig(t testing.TB, doc string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	unchanged := false
	written := time.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.c.Kube.CoreV1().ConfigMaps(cluster.Namespace).Get(ctx, decider.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data[decider.ConfigKey] == doc {
			unchanged = true
			return nil
		}
		cm.Data[decider.ConfigKey] = doc
		written = time.Now()
		_, err = s.c.Kube.CoreV1().ConfigMaps(cluster.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating ConfigMap %s: %v", decider.ConfigMapName, err)
	}
	if unchanged {
		return
	}
	err = framework.WaitFor(ctx, time.Minute, "the decider to load its new configuration", func(ctx context.Context) (bool, string, error) {
		n, err := s.configLoads(ctx, written)
		return n > 0, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// configLoads counts the configurations the decider loaded (valid or not) since the time given
// (zero for all), from the logs of the deployment's current containers, whose lines the kubelet
// stamps with the time of this machine's clock.
func (s *suite) configLoads(ctx context.Context, since time.Time) (int, error) {
	pods, err := s.c.Kube.CoreV1().Pods(cluster.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=probeshim,app.kubernetes.io/component=cluster"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		opts := &corev1.PodLogOptions{Timestamps: true}
		if !since.IsZero() {
			opts.SinceTime = &metav1.Time{Time: since.Add(-time.Second)} // whole seconds: a little earlier, filtered below
		}
		b, err := s.c.Kube.CoreV1().Pods(cluster.Namespace).GetLogs(p.Name, opts).DoRaw(ctx)
		if err != nil {
			continue // a container restarting has no log yet
		}
		for _, line := range strings.Split(string(b), "\n") {
			stamp, text, _ := strings.Cut(line, " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil || at.Before(since) {
				continue
			}
			if strings.Contains(text, "configuration loaded") || strings.Contains(text, "invalid configuration") {
				n++
			}
		}
	}
	return n, nil
}

// withConfig sets the configuration for the rest of the test and restores the shipped one
// when it ends.
func (s *suite) withConfig(t *testing.T, doc string) {
	t.Helper()
	s.setConfig(t, doc)
	t.Cleanup(func() { s.setConfig(t, s.defaultConfig) })
}

// shippedConfig is the configuration document of cluster/deploy.
func shippedConfig() (string, error) {
	root, err := framework.ModuleRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "cluster", "deploy", "decider-config.yaml"))
	if err != nil {
		return "", err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return "", err
	}
	doc, ok := cm.Data[decider.ConfigKey]
	if !ok {
		return "", fmt.Errorf("decider-config.yaml has no %s", decider.ConfigKey)
	}
	return doc, nil
}

// config is the shipped configuration with edits applied (a YAML map merged at the top level).
func (s *suite) config(t testing.TB, edits string) string {
	t.Helper()
	base := map[string]any{}
	if err := yaml.Unmarshal([]byte(s.defaultConfig), &base); err != nil {
		t.Fatal(err)
	}
	over := map[string]any{}
	if err := yaml.Unmarshal([]byte(edits), &over); err != nil {
		t.Fatal(err)
	}
	for k, v := range over {
		base[k] = v
	}
	b, err := yaml.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leader is the pod of the deployment that holds the leader election Lease.
func (s *suite) leader(ctx context.Context) (*corev1.Pod, error) {
	lease, err := s.c.Kube.CoordinationV1().Leases(cluster.Namespace).Get(ctx, cluster.Deployment, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	holder := leaseHolder(lease)
	name, _, _ := strings.Cut(holder, "_")
	if name == "" {
		return nil, fmt.Errorf("lease %s has no holder", lease.Name)
	}
	return s.c.Kube.CoreV1().Pods(cluster.Namespace).Get(ctx, name, metav1.GetOptions{})
}

func leaseHolder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// crashLeader kills the leader's container with SIGKILL through the CRI, as a crash (or the
// OOM killer) would: no lease released, nothing finished. The kubelet restarts it.
func (s *suite) crashLeader(t testing.TB) (pod string, holder string) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	p, err := s.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.c.Kube.CoordinationV1().Leases(cluster.Namespace).Get(ctx, cluster.Deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("leader %s has no container: %s", p.Name, framework.DescribePod(p))
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	rs, conn, err := s.c.CRI()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Timeout 0: containerd sends SIGKILL at once.
	if _, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
		t.Fatalf("killing the leader %s: %v", p.Name, err)
	}
	return p.Name, leaseHolder(lease)
}

// ---- numbers ----

func roundAll(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond).String()
	}
	return out
}

// ---- availability, as watches see it ----

// readyLog records the Ready condition of a namespace's pods as a watch sees it change.
type readyLog struct {
	mu     sync.Mutex
	events []readyEvent
}

type readyEvent struct {
	at    time.Time
	pod   string
	ready bool
}

// watchReady starts recording the readiness of the pods of ns; call it while they are all Ready.
func (s *suite) watchReady(t testing.TB, ns string) *readyLog {
	t.Helper()
	l := &readyLog{}
	last := map[string]bool{}
	err := watchFunc(framework.Context(t, time.Hour), s.c, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns)},
		func(at time.Time, typ watch.EventType, o client.Object) {
			p := o.(*corev1.Pod)
			ready := typ != watch.Deleted && framework.PodReady(p)
			l.mu.Lock()
			defer l.mu.Unlock()
			if prev, ok := last[p.Name]; ok && prev == ready || !ok && ready {
				last[p.Name] = ready
				return
			}
			last[p.Name] = ready
			l.events = append(l.events, readyEvent{at: at, pod: p.Name, ready: ready})
		})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// unavailable merges the readiness of the pods of ns with the requests for them: a pod is
// unavailable while it is not Ready or has an active request. It returns the most pods
// unavailable at once, how long two or more were, and the timeline.
func (s *suite) unavailable(ns string, rl *readyLog) (most int, overlap time.Duration, timeline string) {
	type change struct {
		at     time.Time
		pod    string
		what   string
		active *bool
		ready  *bool
	}
	var changes []change
	rl.mu.Lock()
	for _, e := range rl.events {
		changes = append(changes, change{at: e.at, pod: e.pod, what: fmt.Sprintf("ready=%t", e.ready), ready: ptr.To(e.ready)})
	}
	rl.mu.Unlock()
	s.crrs.mu.Lock()
	activeNow := map[string]bool{}
	for _, e := range s.crrs.events {
		if e.crr.Namespace != ns {
			continue
		}
		done := e.typ == watch.Deleted || e.crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || e.crr.Status.CompletionTime != nil
		if activeNow[e.crr.Name] != !done {
			activeNow[e.crr.Name] = !done
			changes = append(changes, change{at: e.at, pod: e.crr.Spec.PodName, what: fmt.Sprintf("request active=%t", !done), active: ptr.To(!done)})
		}
	}
	s.crrs.mu.Unlock()
	slices.SortStableFunc(changes, func(a, b change) int { return a.at.Compare(b.at) })
	notReady, active := map[string]bool{}, map[string]bool{}
	var lines []string
	var since time.Time
	for _, c := range changes {
		if c.ready != nil {
			notReady[c.pod] = !*c.ready
		}
		if c.active != nil {
			active[c.pod] = *c.active
		}
		n := 0
		for p := range unionKeys(notReady, active) {
			if notReady[p] || active[p] {
				n++
			}
		}
		most = max(most, n)
		switch {
		case n >= 2 && since.IsZero():
			since = c.at
		case n < 2 && !since.IsZero():
			overlap += c.at.Sub(since)
			since = time.Time{}
		}
		lines = append(lines, fmt.Sprintf("%s %s %s -> %d unavailable", c.at.Format("15:04:05.000"), c.pod, c.what, n))
	}
	return most, overlap, "\n    " + strings.Join(lines, "\n    ")
}

func unionKeys(a, b map[string]bool) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
