// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// A marker opted in with probeshim.io/exec-free reads its `cat /tmp/idle` inside the container
// without starting a process: the file's content is the condition's message, a missing file
// makes it False with cat's message, and after the container restarts the new container's file
// is read. The container's PATH finds no `cat`, so the same probe run as an exec (a second
// marker without the annotation) never succeeds: the results can only come from the read.
func (s *suite) testExecFree(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	main := framework.Command("main", "/bin/sh", "-c", "echo 'no players' > /tmp/idle; exec /bin/sleep 1000000")
	main.Env = []corev1.EnvVar{{Name: "PATH", Value: "/nowhere"}}
	pod := s.runPod(t, ns, "gs-0", map[string]string{"app": "gs"}, main)

	m := idleMarker(ns, "idle", map[string]string{"app": "gs"}, "cat", "/tmp/idle")
	m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: "true"}
	s.createMarker(t, m)
	control := newMarker(ns, "exec", map[string]string{"app": "gs"}, v1alpha1.PodContainerProbe{
		Name: "idle", ContainerName: "main", PodConditionType: "game.example.com/exec-idle",
		Probe: probe(execHandler("cat", "/tmp/idle")),
	})
	s.createMarker(t, control)

	if p := s.waitNPPProbe(t, pod, "idle#idle"); !p.ExecFree {
		t.Fatalf("NodePodProbe probe idle#idle = %+v, want execFree", p)
	}
	if p := s.waitNPPProbe(t, pod, "exec#idle"); p.ExecFree {
		t.Fatalf("NodePodProbe probe exec#idle = %+v, want an exec", p)
	}
	p := s.waitPod(t, pod, "idle marks", waitMarks, idleMarks(corev1.ConditionTrue, "no players"))
	if msg := podCondition(p, conditionIdle).Message; msg != "no players\n" {
		t.Errorf("condition message %q, want the file's content as cat prints it", msg)
	}

	// The content changes: the message follows.
	s.exec(t, ns, pod.Name, "main", "/bin/sh", "-c", "echo 'players: 5' > /tmp/idle")
	s.waitPod(t, pod, "message follows the file", waitMarks, idleMarks(corev1.ConditionTrue, "players: 5"))

	// The file goes: False with what cat would say.
	s.exec(t, ns, pod.Name, "main", "/bin/rm", "/tmp/idle")
	s.waitPod(t, pod, "busy marks after rm", waitMarks, idleMarks(corev1.ConditionFalse, "cat: /tmp/idle: No such file or directory"))
	s.exec(t, ns, pod.Name, "main", "/bin/sh", "-c", "echo 'players: 5' > /tmp/idle")
	s.waitPod(t, pod, "idle again", waitMarks, idleMarks(corev1.ConditionTrue, "players: 5"))

	// The container restarts: its new root, with the file its command wrote afresh, is read.
	before := framework.ContainerStatus(p, "main")
	s.stopContainer(t, pod, "main")
	p = s.waitPod(t, pod, "idle marks of the restarted container", 2*waitMarks, all(
		idleMarks(corev1.ConditionTrue, "no players"),
		func(p *corev1.Pod) (bool, string) {
			st := framework.ContainerStatus(p, "main")
			return st != nil && st.RestartCount > before.RestartCount, fmt.Sprintf("main restarted %d times", st.RestartCount)
		}))

	// The exec of the same command never succeeded: there is no cat on the container's PATH.
	states, err := s.c.ProbeStates(framework.Context(t, time.Minute), s.c.Rig.NodeName(), pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if st := states["exec#idle"]; st.State == v1alpha1.ProbeSucceeded {
		t.Errorf("the exec control succeeded (%q): the container's PATH has a cat, the test proves nothing", st.Message)
	}
	if c := podCondition(p, "game.example.com/exec-idle"); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("the exec control's condition is True: %+v", c)
	}
}

// stopContainer stops a container of pod through CRI; the kubelet starts it again.
func (s *suite) stopContainer(t *testing.T, pod *corev1.Pod, name string) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	p, err := s.c.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := framework.ContainerStatus(p, name)
	if st == nil || st.ContainerID == "" {
		t.Fatalf("no container %s in pod %s", name, pod.Name)
	}
	_, id, _ := strings.Cut(st.ContainerID, "://")
	cri, conn, err := s.c.CRI()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
}

// An exec-free probe reads as the container's user: a file of its own is read, one whose mode
// shuts its owner out is not, as cat run by that user could not (the node service itself, root,
// could read both).
func (s *suite) testExecFreeUser(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	main := framework.Command("main", "/bin/sh", "-c",
		"echo mine > /tmp/mine; echo locked > /tmp/locked; chmod 000 /tmp/locked; exec /bin/sleep 1000000")
	uid := int64(1000)
	main.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &uid}
	pod := s.runPod(t, ns, "gs-user", map[string]string{"app": "gs-user"}, main)
	m := newMarker(ns, "files", map[string]string{"app": "gs-user"},
		v1alpha1.PodContainerProbe{Name: "mine", ContainerName: "main", PodConditionType: "game.example.com/mine",
			Probe: probe(execHandler("cat", "/tmp/mine"))},
		v1alpha1.PodContainerProbe{Name: "locked", ContainerName: "main", PodConditionType: "game.example.com/locked",
			Probe: probe(execHandler("cat", "/tmp/locked"))})
	m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: "true"}
	s.createMarker(t, m)
	if p := s.waitNPPProbe(t, pod, "files#locked"); !p.ExecFree {
		t.Fatalf("NodePodProbe probe files#locked = %+v, want execFree", p)
	}
	s.waitPod(t, pod, "the user's file read, the locked one refused", waitMarks, all(
		condIs("game.example.com/mine", corev1.ConditionTrue, "mine"),
		condIs("game.example.com/locked", corev1.ConditionFalse, "cat: /tmp/locked: Permission denied")))
}

// An exec-free read has the capabilities an exec of cat in the container would have, no more:
// a privileged container reads a file whose mode shuts everyone out (CAP_DAC_OVERRIDE), a root
// container that dropped every capability does not (the node service's own are not lent). Kernel
// file systems are never read, whoever asks: a privileged pod that shares the host's PID namespace
// and mounts the host's /proc is refused its files (what they show depends on the reader).
func (s *suite) testExecFreePrivileges(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	const setup = "echo locked > /tmp/locked; chown 2000:2000 /tmp/locked; chmod 000 /tmp/locked; exec /bin/sleep 1000000"
	yes := true
	priv := framework.Command("main", "/bin/sh", "-c", setup)
	priv.SecurityContext = &corev1.SecurityContext{Privileged: &yes}
	priv.VolumeMounts = []corev1.VolumeMount{{Name: "hostproc", MountPath: "/host/proc", ReadOnly: true}}
	privPod := framework.NewPod(ns, "privileged", priv)
	privPod.Labels = map[string]string{"app": "exec-free-caps", "kind": "privileged"}
	privPod.Spec.HostPID = true
	privPod.Spec.Volumes = []corev1.Volume{{Name: "hostproc",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/proc"}}}}

	// chown needs CAP_CHOWN, so the file is made by a root init container with the defaults.
	dropped := framework.Command("main", "/bin/sleep", "1000000")
	dropped.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	dropped.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	droppedPod := framework.NewPod(ns, "no-capabilities", dropped)
	droppedPod.Labels = map[string]string{"app": "exec-free-caps", "kind": "dropped"}
	init := framework.Command("init", "/bin/sh", "-c", strings.TrimSuffix(setup, "; exec /bin/sleep 1000000"))
	init.VolumeMounts = dropped.VolumeMounts
	droppedPod.Spec.InitContainers = []corev1.Container{init}
	droppedPod.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}

	pods := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{privPod, droppedPod} {
		pods[p.Labels["kind"]] = s.c.WaitForPodReady(t, s.c.CreatePod(t, p), waitPodReady)
	}
	m := newMarker(ns, "files", map[string]string{"app": "exec-free-caps"},
		v1alpha1.PodContainerProbe{Name: "locked", ContainerName: "main", PodConditionType: "example.com/locked",
			Probe: probe(execHandler("cat", "/tmp/locked"))},
		v1alpha1.PodContainerProbe{Name: "kernel", ContainerName: "main", PodConditionType: "example.com/kernel",
			Probe: probe(execHandler("cat", "/host/proc/1/status"))})
	m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: "true"}
	s.createMarker(t, m)
	// Not read, and no result: the probe cannot run exec-free (a cat would have read it).
	kernelRefused := "probe error (ExecFreeReadRefused): cat: /host/proc/1/status: On a kernel file system (/proc, /sys), not read without exec"
	s.waitPod(t, pods["privileged"], "the privileged pod reads the locked file, not the host's /proc", waitMarks, all(
		condIs("example.com/locked", corev1.ConditionTrue, "locked"),
		condIs("example.com/kernel", corev1.ConditionUnknown, kernelRefused),
		condReason("example.com/kernel", "ExecFreeReadRefused")))
	s.waitPod(t, pods["dropped"], "the pod without capabilities may not read the locked file", waitMarks,
		condIs("example.com/locked", corev1.ConditionFalse, "cat: /tmp/locked: Permission denied"))
}
