// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

var (
	t0  = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	web = podMeta{uid: "u1", namespace: "ns", name: "web-0"}
)

func update(probe string, r prober.Result, msg string, at time.Time) prober.Update {
	return prober.Update{Key: prober.Key{PodUID: web.uid, Container: "c", Probe: probe}, Result: r, Message: msg, Time: at}
}

func TestBookTransitionsAndMessages(t *testing.T) {
	b := newBook()
	changed, msgOnly, tr := b.apply(web, update("m#idle", prober.Unknown, "", t0))
	if !changed || msgOnly || tr != nil {
		t.Fatalf("first Unknown: changed=%v transition=%v, want a change without event", changed, tr)
	}
	changed, msgOnly, tr = b.apply(web, update("m#idle", prober.Success, "ok", t0.Add(time.Second)))
	if !changed || msgOnly || tr == nil || tr.state != v1alpha1.ProbeSucceeded {
		t.Fatalf("Unknown→Success: changed=%v transition=%+v", changed, tr)
	}
	changed, msgOnly, tr = b.apply(web, update("m#idle", prober.Success, "still ok", t0.Add(2*time.Second)))
	if !changed || !msgOnly || tr != nil {
		t.Fatalf("message-only change: changed=%v messageOnly=%v transition=%v, want a message-only change without event", changed, msgOnly, tr)
	}
	st := b.status()[0].ProbeStates[0]
	if st.Message != "still ok" || !st.LastTransitionTime.Time.Equal(t0.Add(time.Second)) || !st.LastProbeTime.Time.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("state after message change: %+v", st)
	}
	if changed, _, _ := b.apply(web, update("m#idle", prober.Success, "still ok", t0.Add(3*time.Second))); changed {
		t.Fatal("identical result must not dirty the status")
	}
	_, _, tr = b.apply(web, update("m#idle", prober.Unknown, "container restarted", t0.Add(4*time.Second)))
	if tr != nil || b.status()[0].ProbeStates[0].State != v1alpha1.ProbeUnknown {
		t.Fatalf("container restart must report Unknown without an event, got %+v", b.status())
	}
	_, _, tr = b.apply(web, update("m#idle", prober.Failure, "exit 1", t0.Add(5*time.Second)))
	if tr == nil || tr.state != v1alpha1.ProbeFailed {
		t.Fatalf("Unknown→Failure must be a transition, got %+v", tr)
	}
}

func TestBookSeedSurvivesRestart(t *testing.T) {
	b := newBook()
	b.seed(&v1alpha1.NodePodProbeStatus{PodProbeStatuses: []v1alpha1.PodProbeStatus{{
		Name: web.name, Namespace: web.namespace, UID: web.uid,
		ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeSucceeded, Message: "ok"}},
	}}})
	// A restarted engine first says Unknown with no message: keep the seeded state.
	if changed, _, _ := b.apply(web, update("m#idle", prober.Unknown, "", t0)); changed {
		t.Fatal("the engine's first Unknown must not overwrite a seeded state")
	}
	if changed, _, tr := b.apply(web, update("m#idle", prober.Success, "ok", t0)); changed || tr != nil {
		t.Fatalf("same result as seeded: changed=%v transition=%v", changed, tr)
	}
}

// Why a probe could not run yet (an error while the service restarts) does not replace a result
// seeded from its earlier run; it does replace a seeded Unknown, which said less.
func TestBookSeedBeatsAnError(t *testing.T) {
	b := newBook()
	b.seed(&v1alpha1.NodePodProbeStatus{PodProbeStatuses: []v1alpha1.PodProbeStatus{{
		Name: web.name, Namespace: web.namespace, UID: web.uid,
		ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeSucceeded, Message: "ok"},
			{Name: "m#new", State: v1alpha1.ProbeUnknown}},
	}}})
	errored := func(probe string) prober.Update {
		u := update(probe, prober.Unknown, "probe error: failed to start io pipe copy", t0)
		u.Errored = true
		return u
	}
	if changed, _, _ := b.apply(web, errored("m#idle")); changed {
		t.Error("a probe error replaced the seeded Succeeded")
	}
	if changed, _, _ := b.apply(web, errored("m#new")); !changed {
		t.Error("a probe error did not replace a seeded Unknown without a reason")
	}
}

func TestBookRetainDropsExactlyWhatLeftTheSpec(t *testing.T) {
	b := newBook()
	b.apply(web, update("a#p", prober.Success, "", t0))
	b.apply(web, update("a#p2", prober.Success, "", t0))
	other := podMeta{uid: "u2", namespace: "ns", name: "web-1"}
	b.apply(other, prober.Update{Key: prober.Key{PodUID: "u2", Container: "c", Probe: "a#p"}, Result: prober.Failure, Time: t0})
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{
		Name: web.name, Namespace: web.namespace, UID: web.uid,
		Probes: []v1alpha1.ContainerProbe{{Name: "a#p", ContainerName: "c"}},
	}}}
	if !b.retain(spec, nil, t0) {
		t.Fatal("retain must report the removals")
	}
	st := b.status()
	if len(st) != 1 || st[0].UID != web.uid || len(st[0].ProbeStates) != 1 || st[0].ProbeStates[0].Name != "a#p" {
		t.Fatalf("after retain: %+v", st)
	}
	if b.retain(spec, nil, t0) {
		t.Fatal("a second retain with the same spec must change nothing")
	}
}

func TestDesiredRefusesProbesAimedAwayFromThePod(t *testing.T) {
	probe := func(h corev1.ProbeHandler) v1alpha1.ContainerProbeSpec {
		return v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h}}
	}
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{
		Name: "web-0", Namespace: "ns", UID: "u1", IP: "10.88.0.5",
		Probes: []v1alpha1.ContainerProbe{
			{Name: "m#ok", ContainerName: "c", Probe: probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}})},
			{Name: "m#node", ContainerName: "c", Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Port: intstr.FromInt32(10250)}})},
			// A Host header only sets the header: the probe still goes to the pod, so it runs.
			{Name: "m#hdr", ContainerName: "c", Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
				HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: "metadata.internal"}}}})},
			{Name: "m#h2", ContainerName: "c", Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
				Protocol: ptr.To(corev1.HTTPProtocolHTTP2)}})},
			{Name: v1alpha1.LivenessProbeName("c"), ContainerName: "c", Probe: probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}})},
		},
	}}}
	run, refused := desiredFromSpec(spec)
	if len(run) != 3 || run[0].Key.Probe != "m#ok" || run[0].ProbeType != probeTypeCustom || run[1].Key.Probe != "m#hdr" ||
		run[2].ProbeType != probeTypeLiveness {
		t.Fatalf("run = %+v", run)
	}
	if len(refused) != 2 {
		t.Fatalf("refused = %+v, want the host field and the HTTP/2 probe (not implemented, never run as HTTP/1)", refused)
	}
	for _, r := range refused {
		if !strings.Contains(r.reason, "refused") || !strings.Contains(r.reason, "spec.podProbes[0].probes[") {
			t.Errorf("refusal reason %q should say it was refused and name the field", r.reason)
		}
	}
}
