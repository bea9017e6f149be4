// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/plugin"
)

const dryRunMarker = `apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: %SELECT%
  probes:
  - name: %PROBE%
    containerName: app
    probe:
      tcpSocket:
        port: 80
`

// dry-run sends a marker through the API server and probeshim's webhooks without storing it: a
// create while it does not exist, an update once it does; it lists the pods its selector matches
// and what it would place on each node within the node budget (read from the cluster part's
// Deployment), and a refusal is the webhook's message and exit 1.
func TestDryRun(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	c := testEnv.c
	ns := namespace(t, "dryrun-shop")
	dir := t.TempDir()
	marker := func(selects, probe string) string {
		f := filepath.Join(dir, selects+"-"+strings.ReplaceAll(probe, "#", "_")+".yaml")
		doc := strings.NewReplacer("%SELECT%", selects, "%PROBE%", probe).Replace(dryRunMarker)
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}

	for _, p := range []struct{ name, app, node string }{
		{"web-1", "web", "dr-n1"}, {"web-2", "web", "dr-n1"}, {"web-3", "web", "dr-n2"}, {"web-4", "web", ""}, {"db-1", "db", "dr-n1"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if p.node == "" {
			continue
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.1.1", Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, err := kubectl(t, "", "dry-run", "-f", marker("web", "tcp"), "-n", ns)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	contains(t, out,
		"PodProbeMarker dryrun-shop/web: admitted (server-side dry run, create; nothing stored)",
		"Selects 4 pod(s): web-1 (dr-n1), web-2 (dr-n1), web-3 (dr-n2), web-4 (not scheduled)",
		"NodePodProbe budget: 524288 bytes per node (the default of probeshim-cluster --node-probe-budget)",
		"NODE   PODS  PROBES  MARKER BYTES  NODE BYTES  FITS",
	)
	var ppm v1alpha1.PodProbeMarker
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &ppm); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run stored the marker: %v", err)
	}

	// The cluster part's budget, from its Deployment; standard input; -o json.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: plugin.DefaultClusterNamespace, Name: "probeshim-cluster"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probeshim"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probeshim"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "probeshim-cluster",
					Args: []string{"--leader-elect", "--node-probe-budget=1500"}}}}}}}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, dep) })
	doc, err := os.ReadFile(marker("web", "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err = kubectl(t, string(doc), "dry-run", "-f", "-", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var dr plugin.DryRun
	if err := json.Unmarshal([]byte(out), &dr); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !dr.Admitted || dr.Operation != "create" || len(dr.Pods) != 4 || dr.BudgetBytes != 1500 ||
		dr.BudgetSource != "--node-probe-budget of Deployment probeshim-system/probeshim-cluster" || len(dr.Nodes) != 2 {
		t.Fatalf("dry run: %+v", dr)
	}
	n1, n2 := dr.Nodes[0], dr.Nodes[1]
	if n1.Node != "dr-n1" || n1.Pods != 2 || n1.Probes != 2 || !strings.Contains(n1.LeftOut, "node dr-n1 has no room for its probes") ||
		n2.Node != "dr-n2" || n2.Pods != 1 || n2.Probes != 1 || n2.LeftOut != "" || n2.Bytes == 0 || n2.NodeBytes != n2.Bytes {
		t.Errorf("nodes: %+v", dr.Nodes)
	}
	out, _, _ = kubectl(t, "", "dry-run", "-f", marker("web", "tcp"), "-n", ns)
	contains(t, out, "NodePodProbe budget: 1500 bytes per node (--node-probe-budget of Deployment probeshim-system/probeshim-cluster)",
		"NO, left out", "dr-n1: node dr-n1 has no room for its probes")

	// The schema's refusal, and the webhook's.
	out, _, err = kubectl(t, "", "dry-run", "-f", marker("web", "a#b"), "-n", ns)
	if err == nil || err.Error() != "refused" {
		t.Errorf("a refused marker: %v", err)
	}
	contains(t, out, `PodProbeMarker dryrun-shop/web: REFUSED (server-side dry run, create): PodProbeMarker.apps.kruise.io "web" is invalid: spec.probes[0].name`)
	silent := strings.Replace(string(doc), "  name: web\n", "  name: web\n  annotations:\n    "+v1alpha1.AnnotationOnNodeServiceSilent+": Forget\n", 1)
	out, _, err = kubectl(t, silent, "dry-run", "-f", "-", "-n", ns)
	if err == nil {
		t.Error("a marker the webhook refuses was admitted")
	}
	contains(t, out, `REFUSED (server-side dry run, create): admission webhook "podprobemarkers.probeshim.io" denied the request`, `"Forget"`)
	unknown := strings.Replace(string(doc), "    containerName: app\n", "    containerName: app\n    containerNmae: app\n", 1)
	out, _, _ = kubectl(t, unknown, "dry-run", "-f", "-", "-n", ns)
	contains(t, out, "REFUSED", `unknown field "spec.probes[0].containerNmae"`)

	// An update of a marker that exists: its selector may not change.
	if err := c.Create(ctx, &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.PodProbeMarkerSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Probes: []v1alpha1.PodContainerProbe{{Name: "tcp", ContainerName: "app", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}}}}}); err != nil {
		t.Fatal(err)
	}
	out, _, _ = kubectl(t, "", "dry-run", "-f", marker("web", "tcp"), "-n", ns)
	contains(t, out, "admitted (server-side dry run, update; nothing stored)")
	out, _, err = kubectl(t, "", "dry-run", "-f", marker("db", "tcp"), "-n", ns)
	if err == nil {
		t.Error("a changed selector was admitted")
	}
	contains(t, out, "REFUSED (server-side dry run, update)", "field is immutable", "Selects 1 pod(s): db-1 (dr-n1)")

	if _, _, err := kubectl(t, "", "dry-run", "-n", ns); err == nil || !strings.Contains(err.Error(), "-f is required") {
		t.Errorf("no file: %v", err)
	}
	if _, _, err := kubectl(t, "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: x\n", "dry-run", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), "kind PodProbeMarker") {
		t.Errorf("not a marker: %v", err)
	}
}
