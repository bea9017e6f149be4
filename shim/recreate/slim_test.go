// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The pod cache keeps every field the executor reads and drops the rest (env, mounts,
// resources, probes, labels, annotations, volumes, managed fields).
func TestPodCacheKeepsWhatIsRead(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	now := metav1.Now()
	hook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/quit", Port: intstr.FromString("http")}}}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	big := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "example.com/app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}
	}
	app, side, init := big("app"), big("side"), big("init")
	app.Ports, app.Lifecycle = ports, hook
	side.RestartPolicy = &always
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "uid-1", ResourceVersion: "42", DeletionTimestamp: &now,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"example.com/a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "node-a", HostNetwork: true, RestartPolicy: corev1.RestartPolicyOnFailure,
			TerminationGracePeriodSeconds: ptr.To[int64](7),
			Containers:                    []corev1.Container{app}, InitContainers: []corev1.Container{side, init},
			Volumes: []corev1.Volume{{Name: "data"}}, Tolerations: []corev1.Toleration{{Key: "example.com/t"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://a", RestartCount: 2}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "side", ContainerID: "containerd://s"}},
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	orig := pod.DeepCopy()
	obj, err := transformPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Pod)

	want := orig.DeepCopy()
	want.Labels, want.Annotations, want.ManagedFields = nil, nil, nil
	want.Spec.Volumes, want.Spec.Tolerations, want.Status.Conditions = nil, nil, nil
	for _, cs := range [][]corev1.Container{want.Spec.Containers, want.Spec.InitContainers} {
		for i := range cs {
			cs[i] = corev1.Container{Name: cs[i].Name, Ports: cs[i].Ports, Lifecycle: cs[i].Lifecycle, RestartPolicy: cs[i].RestartPolicy}
		}
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("cached pod\n%s\nwant\n%s", g, w)
	}
	// What the executor's checks read gives the same answers on the cached pod.
	if h, p := hookOf(got, "app"); h == nil || !reflect.DeepEqual(p, ports) {
		t.Errorf("hookOf the cached pod: %v, %v; want the preStop hook and ports", h, p)
	}
	if !restarts(got, "side", 0) || restarts(got, "init", 0) {
		t.Error("restarts on the cached pod: want the sidecar restarted and the init container not")
	}
	if other, _ := transformPod("not a pod"); other != "not a pod" {
		t.Errorf("transform changed a non-pod: %v", other)
	}
}
