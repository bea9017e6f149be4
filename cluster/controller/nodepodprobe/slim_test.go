// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestDesiredEntriesOnSlimPods: marker entries (selection, containers and sidecars, named ports,
// host-network checks, probeability) and skips are the same from the deployment's pod cache
// (podcache.Packed) as from whole pods.
func TestDesiredEntriesOnSlimPods(t *testing.T) {
	var whole, slim []corev1.Pod
	for i := range 8 {
		p := podcachetest.Pod("ns", i, podcachetest.Options{Liveness: i%2 == 0})
		p.Labels["tier"] = []string{"web", "db"}[i%2]
		p.Spec.InitContainers = []corev1.Container{{Name: "log-shipper", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports: []corev1.ContainerPort{{Name: "ship", ContainerPort: 24224}}}}
		switch i {
		case 2:
			p.Spec.HostNetwork = true
		case 3:
			p.Status.PodIP = ""
		case 4:
			p.Status.Conditions[1].Status = corev1.ConditionFalse // not initialised
		case 5:
			p.Status.Phase = corev1.PodSucceeded
		}
		whole = append(whole, *p)
		slim = append(slim, *podcache.Packed(p))
	}
	port := func(name string, port intstr.IntOrString, ctr string) v1alpha1.PodContainerProbe {
		p := httpProbe(name, "")
		p.ContainerName = ctr
		p.Probe.HTTPGet.Port = port
		return p
	}
	markers := []v1alpha1.PodProbeMarker{
		testMarker("web", map[string]string{"tier": "web"}, execProbe("idle", "app"), port("http", intstr.FromString("http"), "app"),
			port("metrics", intstr.FromInt32(9999), "app"), port("ship", intstr.FromString("ship"), "log-shipper")),
		testMarker("db", map[string]string{"tier": "db"}, execProbe("gone", "no-such"), port("admin", intstr.FromString("proxy-admin"), "proxy"),
			port("bad", intstr.FromString("nope"), "app")),
	}
	gotW, skipW := desiredEntries(whole, markers)
	gotS, skipS := desiredEntries(slim, markers)
	if !reflect.DeepEqual(gotW, gotS) {
		t.Errorf("entries from whole pods:\n%s\nfrom slim pods:\n%s", render(gotW), render(gotS))
	}
	keys := func(s []skip) (out []string) {
		for _, k := range s {
			out = append(out, k.key()+": "+k.reason)
		}
		return out
	}
	if !reflect.DeepEqual(keys(skipW), keys(skipS)) {
		t.Errorf("skips from whole pods %q, from slim pods %q", keys(skipW), keys(skipS))
	}
	if len(gotW) < 3 || len(skipW) < 3 {
		t.Fatalf("the fixture gives %d entries and %d skips: it proves less than it should", len(gotW), len(skipW))
	}
}
