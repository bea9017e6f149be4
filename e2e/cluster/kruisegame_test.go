// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// kruise-game's contract, with the PodProbeMarker exactly as kruise-game generates it for a
// GameServerSet "minecraft" with an exec and an HTTP serviceQuality (KRUISE.md): the marker named
// like the GameServerSet, selecting its pods by game.kruise.io/owner-gss, one probe per
// serviceQuality named like it, podConditionType game.kruise.io/<name>, no markerPolicy, the
// timing kruise-game fills in. It is written by kruise-game's ServiceAccount, which has no
// pods/exec and is bound to the opt-in ClusterRole probeshim-exec-markers. kruise-game waits for
// status.observedGeneration before it syncs, reads matchedPods, and matches its actions on the
// condition's message, so all three are checked. (game.kruise.io is used here because it is what
// kruise-game writes; the rule against reserved keys in tests is about keys probeshim refuses.)
func (s *suite) testKruiseGame(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 4*time.Minute)
	const gss = "minecraft"
	selector := map[string]string{"game.kruise.io/owner-gss": gss}

	// kruise-game's ServiceAccount: markers yes, pods/exec no, plus the opt-in role.
	const saNS, saName = "kruise-game-system", "kruise-game-controller-manager"
	user := fmt.Sprintf("system:serviceaccount:%s:%s", saNS, saName)
	role := readExecMarkersRole(t)
	role.Name += "-" + ns // each run of the suite its own, so parallel scenarios never share it
	writeMarkers := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kruise-game"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"podprobemarkers"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: saName}}
	for _, o := range []client.Object{role, writeMarkers,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kruise-game"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: writeMarkers.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kruise-game-exec-markers"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}},
	} {
		if err := s.c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = s.c.Client.Delete(context.Background(), role) })
	cfg := rest.CopyConfig(s.c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS}}
	game, err := client.New(cfg, client.Options{Scheme: s.c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// Two game servers: healthy.sh prints its state; httpd serves / on 8080.
	server := framework.Shell(gss, "printf 'echo Ready; exit 0\\n' > /tmp/healthy.sh; mkdir -p /tmp/www; echo ok > /tmp/www/index.html; "+
		"httpd -p 8080 -h /tmp/www; exec sleep 1000000")
	server.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	pods := []*corev1.Pod{s.runPod(t, ns, gss+"-0", selector, server), s.runPod(t, ns, gss+"-1", selector, server)}

	timing := func(h corev1.ProbeHandler) v1alpha1.ContainerProbeSpec {
		return v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h,
			InitialDelaySeconds: 10, TimeoutSeconds: 5, PeriodSeconds: 3, SuccessThreshold: 1, FailureThreshold: 3}}
	}
	m := newMarker(ns, gss, selector,
		v1alpha1.PodContainerProbe{Name: "healthy", ContainerName: gss, PodConditionType: "game.kruise.io/healthy",
			Probe: timing(execHandler("sh", "/tmp/healthy.sh"))},
		v1alpha1.PodContainerProbe{Name: "http-ok", ContainerName: gss, PodConditionType: "game.kruise.io/http-ok",
			Probe: timing(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}})},
	)
	t0 := time.Now()
	if err := game.Create(ctx, m); err != nil {
		t.Fatalf("kruise-game's marker refused: %v", err)
	}
	s.waitMarkerStatus(t, m, 2)
	t.Logf("status.observedGeneration and matchedPods=2 after %s", time.Since(t0).Round(time.Millisecond))

	for _, p := range pods {
		s.waitPod(t, p, "serviceQuality conditions", 2*waitMarks, all(
			condIs("game.kruise.io/healthy", corev1.ConditionTrue, "Ready"),
			condIs("game.kruise.io/http-ok", corev1.ConditionTrue, "")))
	}
	t.Logf("both conditions on both pods after %s", time.Since(t0).Round(time.Millisecond))

	// The script's output on failure is what kruise-game's serviceQualityAction matches on.
	s.exec(t, ns, pods[0].Name, gss, "sh", "-c", "printf 'echo WaitToBeDeleted; exit 1\\n' > /tmp/healthy.sh")
	s.waitPod(t, pods[0], "healthy=False with the output", 2*waitMarks, condIs("game.kruise.io/healthy", corev1.ConditionFalse, "WaitToBeDeleted"))

	// kruise-game updates its marker when the GameServerSet changes; the status catches up.
	// It retries on a conflict, as a controller's reconcile does: probeshim writes the marker's
	// result-count annotations, which moves its resourceVersion between a Get and an Update.
	editAs := func(edit func(*v1alpha1.PodProbeMarker)) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &v1alpha1.PodProbeMarker{}
			if err := game.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
				return err
			}
			edit(cur)
			return game.Update(ctx, cur)
		})
		if err != nil {
			t.Fatalf("kruise-game's update refused: %v", err)
		}
	}
	t1 := time.Now()
	editAs(func(m *v1alpha1.PodProbeMarker) {
		m.Spec.Probes[0].Probe.Exec.Command = []string{"sh", "-c", "sh /tmp/healthy.sh"}
	})
	s.waitMarkerStatus(t, m, 2)
	t.Logf("status caught up with an update after %s", time.Since(t1).Round(time.Millisecond))
}

// readExecMarkersRole is the opt-in ClusterRole of cluster/deploy/rbac-exec-markers.yaml.
func readExecMarkersRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "cluster", "deploy", "rbac-exec-markers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	if role.Name != "probeshim-exec-markers" || len(role.Rules) != 1 {
		t.Fatalf("unexpected role %+v", role)
	}
	return role
}
