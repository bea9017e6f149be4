// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// TestKruiseUninstallKeepsCRDs: Kruise's chart owns the three CRDs as templates (here a chart
// "kruise" that takes the installed CRDs over, as Kruise's install would have created them).
// The handover's last step marks them kept in Kruise's release; `helm uninstall kruise` then
// keeps the CRDs and every object of them, and says so.
func TestKruiseUninstallKeepsCRDs(t *testing.T) {
	testenv.Require(t, env, skip)
	ctx := context.Background()
	c := kruiseClient(t)
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kruise-helm"}})
	cfg, err := charts.ActionConfig(env.Config, "kruise-helm", t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.TakeOwnership = "kruise", "kruise-helm", true
	ch, err := charts.KruiseStandIn(kubebin.CRDs())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Run(ch, nil); err != nil {
		t.Fatalf("installing the stand-in of Kruise's chart: %v", err)
	}
	ns := env.Namespace(t)
	ppm := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "game"},
		Spec: v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "idle", ContainerName: "main", PodConditionType: "game.example.com/idle",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}}}}}}}}
	mustCreate(t, c, ppm)

	var out bytes.Buffer
	opts := kruise.HandoverOptions{Out: &out, Secrets: secretsOf(t)}
	dry := opts
	dry.DryRun = true
	if err := kruise.KeepCRDs(ctx, c, dry); err != nil {
		t.Fatalf("dry run: %v\n%s", err, out.String())
	}
	if h, _ := cfg.Releases.History("kruise"); len(h) != 1 || !strings.Contains(out.String(), "would record revision 2") {
		t.Fatalf("the dry run recorded a revision or did not say it would (%d revisions):\n%s", len(h), out.String())
	}
	out.Reset()
	if err := kruise.KeepCRDs(ctx, c, opts); err != nil {
		t.Fatalf("keeping the CRDs: %v\n%s", err, out.String())
	}
	t.Logf("keeping the CRDs:\n%s", out.String())
	last, err := cfg.Releases.Last("kruise")
	if err != nil {
		t.Fatal(err)
	}
	if last.Version != 2 || !strings.Contains(last.Info.Description, "kept on uninstall") {
		t.Errorf("Kruise's release: revision %d (%q), want revision 2 saying the CRDs are kept", last.Version, last.Info.Description)
	}
	out.Reset()
	if err := kruise.KeepCRDs(ctx, c, opts); err != nil || !strings.Contains(out.String(), "already keeps") {
		t.Errorf("a second run: %v\n%s", err, out.String())
	}

	resp, err := action.NewUninstall(cfg).Run("kruise")
	if err != nil {
		t.Fatalf("helm uninstall kruise: %v", err)
	}
	t.Logf("helm uninstall kruise: %s", resp.Info)
	for _, name := range kruise.CRDs {
		if !strings.Contains(resp.Info, name) {
			t.Errorf("helm uninstall does not list %s among the resources it kept: %q", name, resp.Info)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("CRD %s after Kruise's uninstall: %v", name, err)
		} else if crd.DeletionTimestamp != nil {
			t.Errorf("CRD %s is being deleted after Kruise's uninstall", name)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kruise-helm", Name: "kruise-config"}, &corev1.ConfigMap{}); err == nil {
		t.Error("the uninstall left the release's ConfigMap: it did not run")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ppm), &v1alpha1.PodProbeMarker{}); err != nil {
		t.Errorf("the PodProbeMarker after Kruise's uninstall: %v", err)
	}
}

// secretsOf reaches Secrets, where Helm keeps its releases, as the handover command does.
func secretsOf(t *testing.T) func(string) typedcorev1.SecretInterface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return func(ns string) typedcorev1.SecretInterface { return cs.CoreV1().Secrets(ns) }
}
