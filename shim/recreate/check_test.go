// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func checkedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "db", UID: "uid-db"},
		Spec: corev1.PodSpec{NodeName: "node-a",
			InitContainers: []corev1.Container{
				{Name: "init"},
				{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{Name: "main", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"/bin/drain"}}}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{PodIP: "10.244.0.7"},
	}
}

func checkedRequest() *v1alpha1.ContainerRecreateRequest {
	return &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "r", Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: "uid-db", v1alpha1.LabelCRRNodeName: "node-a", v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "db",
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
	}
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		crr  func(*v1alpha1.ContainerRecreateRequest)
		pod  func(*corev1.Pod)
		want string // substring; "" for accepted
	}{
		{"the pod it names", nil, nil, ""},
		{"a sidecar", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Containers[0].Name = "proxy" }, nil, ""},
		{"another namespace's pod by UID", func(r *v1alpha1.ContainerRecreateRequest) { r.Namespace = "team-a" }, nil,
			"label crr.apps.kruise.io/pod-uid=uid-db does not name pod team-a/db on node node-a"},
		{"another pod's UID, same namespace", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.PodName = "web" }, nil,
			"does not name pod team-b/web"},
		{"UID label of an older pod of the same name", nil, func(p *corev1.Pod) { p.UID = "uid-new" },
			"label crr.apps.kruise.io/pod-uid=uid-db does not name pod team-b/db"},
		{"pod of another node", nil, func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }, "pod team-b/db is not bound to node node-a"},
		{"node label of another node", func(r *v1alpha1.ContainerRecreateRequest) { r.Labels[v1alpha1.LabelCRRNodeName] = "node-b" }, nil,
			"is not bound to node node-a"},
		{"container the pod does not have", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Containers[0].Name = "nginx" }, nil,
			`spec.containers[0].name: pod db has no container "nginx" that the kubelet restarts`},
		{"an init container (not restarted)", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Containers[0].Name = "init" }, nil,
			`has no container "init"`},
		{"shared validation", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.ActiveDeadlineSeconds = ptr.To[int64](1) }, nil,
			"spec.activeDeadlineSeconds: Invalid value: 1"},
		{"request's preStop to another host", func(r *v1alpha1.ContainerRecreateRequest) {
			r.Spec.Containers[0].PreStop = &v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}}
		}, nil, "spec.containers[0].preStop.httpGet.host"},
		{"pod's preStop to another host", nil, func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle.PreStop = &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(80)}}
		}, "pod.spec.containers[main].lifecycle.preStop.tcpSocket.host"},
		// The API server bounds the pod's spec; the 4 KiB bound is for a request's copy.
		{"pod's preStop larger than a request may carry", nil, func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
				Command: []string{"sh", "-c", strings.Repeat("sleep 0; ", 600)}}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crr, pod := checkedRequest(), checkedPod()
			if tc.crr != nil {
				tc.crr(crr)
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			got := refusal(crr, pod, "node-a")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("refusal = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "team-b") && crr.Namespace != "team-b" {
				t.Errorf("refusal %q names the other pod's namespace", got)
			}
		})
	}
}

// The hook run is the pod's, whatever the request carries.
func TestHookOfIsThePods(t *testing.T) {
	pod := checkedPod()
	h, ports := hookOf(pod, "main")
	if h == nil || h.Exec == nil || h.Exec.Command[0] != "/bin/drain" || len(ports) != 1 {
		t.Errorf("hook %+v ports %v, want the pod's /bin/drain and its port", h, ports)
	}
	if h, _ := hookOf(pod, "proxy"); h != nil {
		t.Errorf("proxy has no preStop, got %+v", h)
	}
	pod.Spec.Containers[0].Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}
	if h, _ := hookOf(pod, "main"); h != nil {
		t.Errorf("a sleep hook is not run, got %+v", h)
	}
}

// A request whose own preStop names a command the pod never declared: the stop is planned with
// the pod's hook (container a has one), and none for b, whose request copy is forged.
func TestPlanPreStopFromPod(t *testing.T) {
	w := newWorld(nil)
	w.crr.Spec.Containers[0].PreStop = nil
	w.crr.Spec.Containers[1].PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"touch", "/pwned"}}}
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1+preStop stop b:b1")
}
