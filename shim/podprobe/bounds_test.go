// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/prober"
)

// worstMessage is the longest message the engine publishes, in the characters that cost the most
// once JSON-encoded ('<' is written as \u003c).
var worstMessage = strings.Repeat("<", prober.MaxMessage)

// failingBook is a book of n failing probes, over pods of 50 probes each, every one with the
// worst message.
func failingBook(n int) *book {
	b := newBook()
	for i := range n {
		pod := podMeta{uid: fmt.Sprintf("00000000-0000-0000-0000-%012d", i/50), namespace: "tenant-a", name: fmt.Sprintf("web-%d", i/50)}
		u := prober.Update{Key: prober.Key{PodUID: pod.uid, Container: "app", Probe: fmt.Sprintf("marker#probe-%04d", i%50)},
			Result: prober.Failure, Message: worstMessage, Time: t0}
		b.apply(pod, u)
	}
	return b
}

// The status body the node writes for 5,000 failing probes, each with the longest message, stays
// far under etcd's 1.5 MiB request limit. Before the messages shared a node budget, it was 31 MB.
func TestStatusOf5000FailingProbesIsBounded(t *testing.T) {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"podProbeStatuses": failingBook(5000).status()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status patch for 5,000 failing probes: %d bytes", len(body))
	if len(body) > 1<<20 {
		t.Errorf("status patch is %d bytes, want at most 1 MiB", len(body))
	}
	// A node with few probes keeps whole messages: up to MaxProbeMessageBytes once encoded.
	st := failingBook(10).status()[0].ProbeStates[0]
	if b, _ := json.Marshal(st.Message); len(b)-2 > validation.MaxProbeMessageBytes || len(b)-2 < validation.MaxProbeMessageBytes-6 {
		t.Errorf("a node with 10 probes kept %d encoded bytes of a message", len(b)-2)
	}
}

// A refusal repeats no huge value and fits one message.
func TestRefusalIsBounded(t *testing.T) {
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "web-0", Namespace: "ns", UID: "u1", IP: "10.0.0.1",
		Probes: []v1alpha1.ContainerProbe{{Name: "m#p", ContainerName: "app", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "\x00" + strings.Repeat("x", 1<<20)}}}}}}}}}}
	run, refused := desiredFromSpec(spec)
	if len(run) != 0 || len(refused) != 1 {
		t.Fatalf("run %d, refused %d", len(run), len(refused))
	}
	b, _ := json.Marshal(refused[0].reason)
	if len(b)-2 > validation.MaxProbeMessageBytes || !strings.Contains(refused[0].reason, "may not be more than 4096 bytes") {
		t.Errorf("refusal of %d encoded bytes: %.300s", len(b)-2, refused[0].reason)
	}
}
