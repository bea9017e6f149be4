// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package crr

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// withoutAdmission runs before the cluster deployment exists, so no webhook completes or checks
// the requests below: they reach the node exactly as written, as they would on a cluster that
// installs the CRDs first or moves over from OpenKruise. (Creating them before the webhooks exist
// is the one bypass that leaves the rest of the suite untouched: no webhook configuration is
// edited and no cluster controller can complete them first.)
func (s *suite) withoutAdmission(t *testing.T) {
	ctx := framework.Context(t, 4*time.Minute)
	node := s.c.Rig.NodeName()
	tenantA, tenantB := s.c.Namespace(t), s.c.Namespace(t)

	// A request in namespace A whose pod-uid label names a pod of namespace B.
	victim := s.runPod(t, tenantB, "victim", 1, nil, trap("main"))
	before := status(victim, "main")
	cross := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "cross", Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: string(victim.UID), v1alpha1.LabelCRRNodeName: node, v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: victim.Name, Containers: []v1alpha1.ContainerRecreateRequestContainer{{
			Name:          "main",
			PreStop:       &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo pwned > /tmp/pwned"}}},
			StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: before.ContainerID}}}},
	}
	if err := s.c.Client.Create(ctx, cross); err != nil {
		t.Fatal(err)
	}
	done := s.waitCompleted(t, cross, time.Minute)
	expectStates(t, done, "main=Failed")
	if want := "refused by node " + node + ": label crr.apps.kruise.io/pod-uid=" + string(victim.UID) +
		" does not name pod " + tenantA + "/victim"; !strings.HasPrefix(done.Status.Message, want) {
		t.Errorf("message %q, want it to start with %q", done.Status.Message, want)
	}
	if strings.Contains(done.Status.Message, tenantB) {
		t.Errorf("message %q names the other tenant's namespace", done.Status.Message)
	}
	// Give a kill that would have started every chance to show.
	err := framework.Never(ctx, 3*time.Second, "the other namespace's container restarted", func(context.Context) (bool, string, error) {
		m := status(s.pod(t, victim), "main")
		return m.ContainerID != before.ContainerID || m.RestartCount != 0,
			fmt.Sprintf("%s restartCount %d, was %s", m.ContainerID, m.RestartCount, before.ContainerID), nil
	})
	if err != nil {
		t.Error(err)
	}
	if out, _, err := s.c.Exec(ctx, tenantB, victim.Name, "main", "cat", "/tmp/pwned"); err == nil {
		t.Errorf("the request's preStop ran in the other namespace's container: /tmp/pwned = %q", out)
	}

	// A request for the right pod with a preStop the pod never declared: the pod's own hook runs.
	shared := corev1.Volume{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	main := withPreStop(trap("main"), "sh", "-c", "touch /shared/pod-prestop")
	main.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	pod := s.runPod(t, tenantA, "hooked", 5, func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{shared} }, main)
	before = status(pod, "main")
	forged := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "forged", Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: string(pod.UID), v1alpha1.LabelCRRNodeName: node, v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name, Containers: []v1alpha1.ContainerRecreateRequestContainer{{
			Name:          "main",
			PreStop:       &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "touch /shared/forged"}}},
			StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: before.ContainerID}}}},
	}
	if err := s.c.Client.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	expectStates(t, s.waitCompleted(t, forged, time.Minute), "main=Succeeded(killed)")
	pod = s.restarted(t, pod, "main", 1, time.Minute)
	out, stderr, err := s.c.Exec(ctx, tenantA, pod.Name, "main", "ls", "/shared")
	if err != nil {
		t.Fatalf("ls /shared: %v %s", err, stderr)
	}
	if files := strings.Fields(out); strings.Join(files, " ") != "pod-prestop" {
		t.Errorf("/shared holds %q, want only pod-prestop (the pod's own hook ran, the request's did not)", files)
	}
}
