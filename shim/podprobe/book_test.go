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
		u := update(probe, prober.Unknown, "failed to start io pipe copy", t0)
		u.Errored, u.Reason = true, prober.ReasonRuntimeError
		return u
	}
	// The engine's first word on each container after a restart of the service: no result yet.
	if changed, _, _ := b.apply(web, update("m#idle", prober.Unknown, prober.NoResultYet, t0)); changed {
		t.Error("the engine's 'no result yet' replaced the seeded Succeeded")
	}
	if changed, _, _ := b.apply(web, errored("m#idle")); changed {
		t.Error("a probe error replaced the seeded Succeeded")
	}
	if changed, _, _ := b.apply(web, errored("m#new")); !changed {
		t.Error("a probe error did not replace a seeded Unknown without a reason")
	}
}

// probeErr is the engine's Unknown of a probe that could not run.
func probeErr(probe, reason, detail string, at time.Time) prober.Update {
	u := update(probe, prober.Unknown, detail, at)
	u.Reason, u.Errored = reason, reason != prober.ReasonTargetRefused
	return u
}

// A probe that could not run reads Unknown with its reason first in the message. Becoming Unknown
// that way, or for another reason, is a transition (an event); the same reason again, with new
// text, only a message.
func TestBookProbeErrors(t *testing.T) {
	b := newBook()
	const notFound = `exec: "nc": executable file not found in $PATH`
	steps := []struct {
		name          string
		u             prober.Update
		msgOnly       bool
		reason        string // of the transition; "-" for none
		state         v1alpha1.ProbeState
		statusMessage string
	}{
		{"a new container", update("m#idle", prober.Unknown, prober.NoResultYet, t0), false, "-", v1alpha1.ProbeUnknown, prober.NoResultYet},
		{"its command is missing", probeErr("m#idle", prober.ReasonCommandNotFound, notFound, t0), false, prober.ReasonCommandNotFound,
			v1alpha1.ProbeUnknown, "probe error (CommandNotFound): " + notFound},
		{"again, started late", probeErr("m#idle", prober.ReasonCommandNotFound, notFound+" (started 2s late: the node's exec pool was full)", t0), true, "-",
			v1alpha1.ProbeUnknown, "probe error (CommandNotFound): " + notFound + " (started 2s late: the node's exec pool was full)"},
		{"another reason", probeErr("m#idle", prober.ReasonPermissionDenied, "permission denied", t0), false, prober.ReasonPermissionDenied,
			v1alpha1.ProbeUnknown, "probe error (PermissionDenied): permission denied"},
		{"a result", update("m#idle", prober.Success, "ok", t0), false, "", v1alpha1.ProbeSucceeded, "ok"},
		{"a refused target", probeErr("m#idle", prober.ReasonTargetRefused, "probe refused: port 10250 is not declared", t0), false,
			prober.ReasonTargetRefused, v1alpha1.ProbeUnknown, "probe error (TargetRefused): probe refused: port 10250 is not declared"},
		{"the container restarted", update("m#idle", prober.Unknown, "container restarted", t0), true, "-", v1alpha1.ProbeUnknown, "container restarted"},
	}
	for _, st := range steps {
		changed, msgOnly, tr := b.apply(web, st.u)
		got := "-"
		if tr != nil {
			got = tr.reason
		}
		if !changed || msgOnly != st.msgOnly || got != st.reason {
			t.Errorf("%s: changed %t, messageOnly %t, transition %q; want a change, messageOnly %t, transition %q",
				st.name, changed, msgOnly, got, st.msgOnly, st.reason)
		}
		if tr != nil && tr.reason != "" && (tr.message != st.u.Message || tr.state != v1alpha1.ProbeUnknown) {
			t.Errorf("%s: transition %+v, want the error's text", st.name, tr)
		}
		if s := b.status()[0].ProbeStates[0]; s.State != st.state || s.Message != st.statusMessage {
			t.Errorf("%s: status %s %q, want %s %q", st.name, s.State, s.Message, st.state, st.statusMessage)
		}
	}
}

// The reason a status written earlier gives is no news after a restart: no second event.
func TestBookSeededProbeErrorIsNoNews(t *testing.T) {
	b := newBook()
	b.seed(&v1alpha1.NodePodProbeStatus{PodProbeStatuses: []v1alpha1.PodProbeStatus{{
		Name: web.name, Namespace: web.namespace, UID: web.uid,
		ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeUnknown,
			Message: v1alpha1.ProbeErrorMessage(prober.ReasonCommandNotFound, "old text")}},
	}}})
	if changed, _, tr := b.apply(web, probeErr("m#idle", prober.ReasonCommandNotFound, "new text", t0)); !changed || tr != nil {
		t.Errorf("the seeded reason again: changed %t, transition %+v; want the new text, no event", changed, tr)
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
			// h2c runs; h2c over HTTPS is refused, as by the kubelet.
			{Name: "m#h2", ContainerName: "c", Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
				Protocol: ptr.To(corev1.HTTPProtocolHTTP2)}})},
			{Name: "m#h2s", ContainerName: "c", Probe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
				Scheme: corev1.URISchemeHTTPS, Protocol: ptr.To(corev1.HTTPProtocolHTTP2)}})},
			{Name: v1alpha1.LivenessProbeName("c"), ContainerName: "c", Probe: probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}})},
		},
	}}}
	run, refused := desiredFromSpec(spec)
	if len(run) != 4 || run[0].Key.Probe != "m#ok" || run[0].ProbeType != probeTypeCustom || run[1].Key.Probe != "m#hdr" ||
		run[2].Key.Probe != "m#h2" || run[3].ProbeType != probeTypeLiveness {
		t.Fatalf("run = %+v", run)
	}
	if len(refused) != 2 {
		t.Fatalf("refused = %+v, want the host field and HTTP/2 over HTTPS (h2c only, as the kubelet)", refused)
	}
	for _, r := range refused {
		if !strings.Contains(r.reason, "refused") || !strings.Contains(r.reason, "spec.podProbes[0].probes[") {
			t.Errorf("refusal reason %q should say it was refused and name the field", r.reason)
		}
	}
}
