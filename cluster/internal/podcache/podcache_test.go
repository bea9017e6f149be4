// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestSlimKeepsWhatIsRead checks every field the package comment promises, one by one, on
// realistic pods with and without the enhanced liveness probe.
func TestSlimKeepsWhatIsRead(t *testing.T) {
	for _, o := range []podcachetest.Options{{}, {Liveness: true}, {Applied: true}} {
		pod := podcachetest.Pod("shop", 7, o)
		pod.DeletionTimestamp = &pod.CreationTimestamp
		pod.Finalizers = []string{"example.com/hold"}
		pod.Spec.HostNetwork = true
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
		pod.Spec.InitContainers = []corev1.Container{{Name: "log-shipper", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports: []corev1.ContainerPort{{Name: "ship", ContainerPort: 24224}}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(24224)}}}}}
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "log-shipper", ContainerID: "containerd://1", RestartCount: 2, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: pod.CreationTimestamp}}}}
		pod.Status.ContainerStatuses[1].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: "KruisePodReady", Status: corev1.ConditionFalse, Message: "recreating"},
			corev1.PodCondition{Type: "example.com/idle", Status: corev1.ConditionTrue, Message: "idle for 3 s"})
		orig := pod.DeepCopy()
		slim := podcache.Slim(pod)

		if !equality.Semantic.DeepEqual(pod, orig) {
			t.Fatal("Slim changed its input")
		}
		wantAnn := maps(orig.Annotations)
		delete(wantAnn, "kubectl.kubernetes.io/last-applied-configuration")
		sameAs := func(what string, got, want any) {
			t.Helper()
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("%+v: %s = %v, want %v", o, what, got, want)
			}
		}
		sameAs("name", slim.Name, orig.Name)
		sameAs("namespace", slim.Namespace, orig.Namespace)
		sameAs("uid", slim.UID, orig.UID)
		sameAs("resourceVersion", slim.ResourceVersion, orig.ResourceVersion)
		sameAs("creationTimestamp", slim.CreationTimestamp, orig.CreationTimestamp)
		sameAs("deletionTimestamp", slim.DeletionTimestamp, orig.DeletionTimestamp)
		sameAs("labels", slim.Labels, orig.Labels)
		sameAs("annotations", slim.Annotations, wantAnn)
		sameAs("ownerReferences", slim.OwnerReferences, orig.OwnerReferences)
		sameAs("finalizers", slim.Finalizers, orig.Finalizers)
		sameAs("spec.nodeName", slim.Spec.NodeName, orig.Spec.NodeName)
		sameAs("spec.hostNetwork", slim.Spec.HostNetwork, orig.Spec.HostNetwork)
		sameAs("spec.terminationGracePeriodSeconds", slim.Spec.TerminationGracePeriodSeconds, orig.Spec.TerminationGracePeriodSeconds)
		sameAs("spec.readinessGates", slim.Spec.ReadinessGates, orig.Spec.ReadinessGates)
		sameAs("status.phase", slim.Status.Phase, orig.Status.Phase)
		sameAs("status.podIP", slim.Status.PodIP, orig.Status.PodIP)
		var read []corev1.PodCondition
		for _, c := range orig.Status.Conditions {
			if c.Type != corev1.ContainersReady && c.Type != corev1.PodScheduled && c.Type != corev1.PodReadyToStartContainers {
				read = append(read, c)
			}
		}
		if len(read) != 4 {
			t.Fatalf("%+v: the fixture has %d conditions read here, want Initialized, Ready, KruisePodReady and a marker's", o, len(read))
		}
		sameAs("status.conditions", slim.Status.Conditions, read)
		for _, l := range []struct {
			what        string
			got, want   []corev1.Container
			gotS, wantS []corev1.ContainerStatus
		}{
			{"containers", slim.Spec.Containers, orig.Spec.Containers, slim.Status.ContainerStatuses, orig.Status.ContainerStatuses},
			{"initContainers", slim.Spec.InitContainers, orig.Spec.InitContainers, slim.Status.InitContainerStatuses, orig.Status.InitContainerStatuses},
		} {
			if len(l.got) != len(l.want) || len(l.gotS) != len(l.wantS) {
				t.Fatalf("%+v: %d %s and %d statuses, want %d and %d", o, len(l.got), l.what, len(l.gotS), len(l.want), len(l.wantS))
			}
			for i, c := range l.want {
				g := l.got[i]
				sameAs(l.what+".name", g.Name, c.Name)
				sameAs(l.what+".ports", g.Ports, c.Ports)
				sameAs(l.what+".restartPolicy", g.RestartPolicy, c.RestartPolicy)
				sameAs(l.what+".startupProbe", g.StartupProbe, c.StartupProbe)
				if o.Liveness {
					for j, e := range c.Env {
						sameAs(l.what+".env", g.Env[j], corev1.EnvVar{Name: e.Name, Value: e.Value})
					}
					sameAs(l.what+".env count", len(g.Env), len(c.Env))
				} else {
					sameAs(l.what+".env", g.Env, []corev1.EnvVar(nil))
				}
				sameAs(l.what+".image (dropped)", g.Image, "")
				sameAs(l.what+".volumeMounts (dropped)", g.VolumeMounts, []corev1.VolumeMount(nil))
			}
			for i, s := range l.wantS {
				g := l.gotS[i]
				sameAs(l.what+" status.name", g.Name, s.Name)
				sameAs(l.what+" status.containerID", g.ContainerID, s.ContainerID)
				sameAs(l.what+" status.restartCount", g.RestartCount, s.RestartCount)
				sameAs(l.what+" status.started", g.Started, s.Started)
				sameAs(l.what+" status.state.running", g.State.Running, s.State.Running)
				sameAs(l.what+" status.image (dropped)", g.Image, "")
			}
		}
		if slim.ManagedFields != nil || slim.Spec.Volumes != nil || slim.Spec.Tolerations != nil || slim.Spec.Affinity != nil ||
			slim.Status.PodIPs != nil || slim.Status.HostIP != "" || slim.Status.StartTime != nil {
			t.Errorf("%+v: dropped fields kept: %+v", o, slim)
		}
		if again := podcache.Slim(slim); !equality.Semantic.DeepEqual(again, slim) {
			t.Errorf("%+v: Slim is not idempotent", o)
		}
	}
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestTransformPassesOtherObjects(t *testing.T) {
	for _, o := range []any{&corev1.Node{}, toolscache.DeletedFinalStateUnknown{Key: "a/b", Obj: &corev1.Pod{}}} {
		got, err := podcache.Transform(o)
		if err != nil || !equality.Semantic.DeepEqual(got, o) {
			t.Errorf("Transform(%T) = %v, %v; want it unchanged", o, got, err)
		}
	}
	pod := podcachetest.Pod("shop", 1, podcachetest.Options{})
	got, err := podcache.Transform(pod)
	if err != nil || got.(*corev1.Pod).Spec.Volumes != nil {
		t.Errorf("Transform(pod) = %v, %v; want it slimmed", got, err)
	}
}
