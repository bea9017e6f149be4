// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestCompactUnpacksToSlim: what the informer hands out equals what Slim returns, on the
// realistic pods and on random ones (every field of a Pod filled, decoded as an informer does).
func TestCompactUnpacksToSlim(t *testing.T) {
	var pods []*corev1.Pod
	for _, o := range []podcachetest.Options{{}, {Liveness: true}, {Applied: true}} {
		pod := podcachetest.Pod("shop", 7, o)
		pod.DeletionTimestamp = &pod.CreationTimestamp
		pod.DeletionGracePeriodSeconds = ptr.To(int64(30))
		pod.Finalizers = []string{"example.com/hold"}
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
		pod.Spec.InitContainers = []corev1.Container{{Name: "log-shipper", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(24224)}}}}}
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "log-shipper", RestartCount: 2, Started: ptr.To(false)}}
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "example.com/idle", Status: corev1.ConditionFalse,
			Reason: "Busy", Message: "busy for 3 s", ObservedGeneration: 4, LastProbeTime: pod.CreationTimestamp})
		pods = append(pods, pod, &corev1.Pod{})
	}
	f := randfill.New().NilChance(0.2).NumElements(0, 3).Funcs(func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
	}, func(*metav1.FieldsV1, randfill.Continue) {}) // random bytes are no FieldsV1
	for range 100 {
		var pod corev1.Pod
		f.Fill(&pod)
		raw, err := json.Marshal(&pod)
		if err != nil {
			t.Fatalf("encoding a random pod: %v", err)
		}
		decoded := &corev1.Pod{}
		if err := json.Unmarshal(raw, decoded); err != nil {
			t.Fatalf("decoding a random pod: %v", err)
		}
		decoded.SetSelfLink("") // not kept: always empty since Kubernetes 1.20
		pods = append(pods, decoded)
	}
	for i, pod := range pods {
		want := Slim(pod)
		if got := Packed(pod); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("pod %d unpacked differs from Slim's:\n%s", i, diff(got, want))
		}
		if got := compact(Packed(pod)).pod(); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("pod %d packed twice differs from Slim's", i)
		}
	}
}

func diff(got, want *corev1.Pod) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return "got:  " + string(g) + "\nwant: " + string(w)
}

// TestCompactSharesWorkloadParts: the pods of one workload hold their labels, annotations and
// spec part once.
func TestCompactSharesWorkloadParts(t *testing.T) {
	a := compact(Slim(podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true})))
	b := compact(Slim(podcachetest.Pod("shop", 2, podcachetest.Options{Liveness: true})))
	if a.spec != b.spec {
		t.Error("two pods of a workload hold two podSpecs")
	}
	if a.labels != b.labels || a.annotations != b.annotations {
		t.Error("two pods of a workload hold their labels or annotations twice")
	}
	c := compact(Slim(podcachetest.Pod("shop", 3, podcachetest.Options{})))
	if c.spec == a.spec {
		t.Error("a pod without the enhanced liveness probe (no env kept) shares a spec with one using it")
	}
}

// BenchmarkUnpack: what a read of the pod cache costs to unpack a realistic pod (before packing,
// a read cost a deep copy of the slim pod, which BenchmarkDeepCopySlim shows).
//
//	go test -run '^$' -bench 'Unpack|DeepCopySlim|Pack|Slim' -benchmem ./cluster/internal/podcache/
func BenchmarkUnpack(b *testing.B) {
	c := compact(Slim(podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true})))
	b.ReportAllocs()
	for b.Loop() {
		_ = c.pod()
	}
}

func BenchmarkDeepCopySlim(b *testing.B) {
	s := Slim(podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true}))
	b.ReportAllocs()
	for b.Loop() {
		_ = s.DeepCopy()
	}
}

// BenchmarkPack: what the informer's transform costs per pod event, packing included (Slim alone
// in BenchmarkSlim).
func BenchmarkPack(b *testing.B) {
	p := podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true})
	b.ReportAllocs()
	for b.Loop() {
		_ = compact(Slim(p))
	}
}

func BenchmarkSlim(b *testing.B) {
	p := podcachetest.Pod("shop", 1, podcachetest.Options{Liveness: true})
	b.ReportAllocs()
	for b.Loop() {
		_ = Slim(p)
	}
}
