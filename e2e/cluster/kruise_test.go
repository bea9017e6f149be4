// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// TestKruiseHandover: a marker reports; Kruise-shaped parts appear (no Kruise build runs here:
// its webhook configurations, kruise-manager's Deployment and kruise-daemon's DaemonSet as its
// chart writes them, nothing serving them) and the deployed cluster part holds its probe work off
// (a changed result no longer reaches the pod); Kruise's gates go off, the handover runs, and
// the results reach the pod again.
func TestKruiseHandover(t *testing.T) {
	c := framework.Get(t)
	ctx := framework.Context(t, 8*time.Minute)
	if err := Deploy(ctx, c, t.Logf); err != nil {
		t.Fatal(err)
	}
	s := &suite{c: c, svc: c.StartNodeService(t)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", Diagnose(c))
			t.Logf("node service log (end):\n%s", logtail.Last(s.svc.Logs(), 40))
		}
	})
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(sch); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := client.New(c.Config, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}

	ns := c.Namespace(t)
	pod := s.runPod(t, ns, "gs-0", map[string]string{"app": "gs"}, framework.Shell("main", "echo 'no players' > /tmp/idle; exec sleep 1000000"))
	s.createMarker(t, idleMarker(ns, "idle", map[string]string{"app": "gs"}, "cat", "/tmp/idle"))
	s.waitPod(t, pod, "idle marks", waitMarks, idleMarks(corev1.ConditionTrue, "no players"))

	// Kruise appears.
	objs := kruiseObjects()
	t.Cleanup(func() {
		for _, o := range objs {
			_ = kc.Delete(context.Background(), o)
		}
		_ = kc.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "probeshim-system", Name: kruise.HandoverConfigMap}})
	})
	for _, o := range objs {
		if err := kc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	// Its chart owns the three CRDs, as templates (so that its uninstall deletes them).
	helmCfg, err := charts.ActionConfig(c.Config, kruise.DefaultNamespace, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	kruiseChart, err := charts.KruiseStandIn(kubebin.CRDs())
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(helmCfg)
	inst.ReleaseName, inst.Namespace, inst.TakeOwnership = "kruise", kruise.DefaultNamespace, true
	if _, err := inst.Run(kruiseChart, nil); err != nil {
		t.Fatalf("helm install kruise (its CRDs): %v", err)
	}
	waitHolds := func(want string) {
		t.Helper()
		err := framework.WaitFor(ctx, 2*time.Minute, "probeshim-kruise-status holds "+want, func(ctx context.Context) (bool, string, error) {
			cm := &corev1.ConfigMap{}
			if err := kc.Get(ctx, client.ObjectKey{Namespace: "probeshim-system", Name: kruise.StatusConfigMap}, cm); err != nil {
				return false, err.Error(), nil
			}
			return strings.HasPrefix(cm.Data["holds"], want), cm.Data["holds"], nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitHolds("probes: held")

	// Held: the node service still probes, but the result no longer reaches the pod.
	s.exec(t, ns, pod.Name, "main", "rm", "/tmp/idle")
	// A bounded look for something that must not happen (unheld: ~2 s).
	err = framework.Never(ctx, 15*time.Second, "the held pod to change", func(ctx context.Context) (bool, string, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ok, why := idleMarks(corev1.ConditionTrue, "no players")(p)
		return !ok, why, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Kruise's admin turns its gates off (its chart then drops kruise-daemon); the handover.
	dep := &appsv1.Deployment{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: kruise.DefaultNamespace, Name: kruise.ManagerName}, dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Args = []string{"--feature-gates=KruiseDaemon=false"}
	if err := kc.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := kc.Delete(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: kruise.DefaultNamespace, Name: kruise.DaemonName}}); err != nil {
		t.Fatal(err)
	}
	// The deployment reads Kruise's webhook configurations, and may edit them only once the handover
	// bound it the keeper's role.
	mayEdit := func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:probeshim-system:probeshim-cluster",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:probeshim-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io",
				Resource: "validatingwebhookconfigurations", Name: kruise.ValidatingConfigName, Verb: "update"}}}
		if err := kc.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	if mayEdit() {
		t.Error("the deployment may edit Kruise's webhook configurations before any handover")
	}
	var out strings.Builder
	secrets := func(ns string) typedcorev1.SecretInterface { return c.Kube.CoreV1().Secrets(ns) }
	if err := kruise.Handover(ctx, kc, kruise.HandoverOptions{Probes: true, CRR: true, Namespace: "probeshim-system", Secrets: secrets, Out: &out}); err != nil {
		t.Fatalf("handover: %v\n%s", err, out.String())
	}
	t.Logf("handover:\n%s", out.String())
	t0 := time.Now()
	waitHolds("probes: probeshim acts")
	s.waitPod(t, pod, "busy marks after the handover", 2*time.Minute, idleMarks(corev1.ConditionFalse, "/tmp/idle"))
	t.Logf("results reach the pod again %s after the handover", time.Since(t0).Round(time.Second))
	if !mayEdit() {
		t.Error("after the handover the deployment may not edit Kruise's webhook configurations: its keeper cannot keep the entries removed")
	}

	// A Kruise upgrade puts the entries back: the deployment's keeper, with the role the handover
	// bound, removes them again.
	var original *admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range kruiseObjects() {
		if v, ok := o.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			original = v
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := kc.Get(ctx, client.ObjectKey{Name: kruise.ValidatingConfigName}, vwc); err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks, vwc.Annotations = original.Webhooks, original.Annotations
	if err := kc.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	putBack := time.Now()
	err = framework.WaitFor(ctx, time.Minute, "the deployment's keeper to remove the put-back entry", func(ctx context.Context) (bool, string, error) {
		if err := kc.Get(ctx, client.ObjectKey{Name: kruise.ValidatingConfigName}, vwc); err != nil {
			return false, err.Error(), nil
		}
		names, _ := kruise.TemplateNames(vwc.Annotations)
		for _, w := range vwc.Webhooks {
			names = append(names, w.Name)
		}
		return !slices.Contains(names, kruise.WebhookPPM), fmt.Sprint(names), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the keeper removed the put-back entry %s after the upgrade", time.Since(putBack).Round(100*time.Millisecond))

	// Kruise leaves: its uninstall keeps the CRDs (the handover marked them kept in its release),
	// so the marker and its results stay.
	resp, err := action.NewUninstall(helmCfg).Run("kruise")
	if err != nil {
		t.Fatalf("helm uninstall kruise: %v", err)
	}
	t.Logf("helm uninstall kruise: %s", resp.Info)
	for _, name := range kruise.CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := kc.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil || crd.DeletionTimestamp != nil {
			t.Fatalf("CRD %s after Kruise's uninstall: %v (deleting: %t)", name, err, err == nil && crd.DeletionTimestamp != nil)
		}
	}
	s.exec(t, ns, pod.Name, "main", "sh", "-c", "echo 'no players' > /tmp/idle")
	s.waitPod(t, pod, "idle marks after Kruise's uninstall", 2*time.Minute, idleMarks(corev1.ConditionTrue, "no players"))
	CheckNoPanics(t, c, s.svc)
}

// kruiseObjects are Kruise's parts as its chart installs them, with the gates at their defaults.
// Nothing serves the webhooks; the pod entries match no pod.
func kruiseObjects() []client.Object {
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/never": "true"}}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + path)}
	}
	rule := func(group, res string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{res}}}}
	}
	fail, none := ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.SideEffectClassNone)
	mut := []admissionregistrationv1.MutatingWebhook{
		{Name: "mpod.kb.io", ClientConfig: cc("mutate-pod"), Rules: rule("", "pods"), ObjectSelector: never, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		{Name: kruise.WebhookCRR, ClientConfig: cc("mutate-crr"), Rules: rule("apps.kruise.io", "containerrecreaterequests"), FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}
	val := []admissionregistrationv1.ValidatingWebhook{
		{Name: "vpod.kb.io", ClientConfig: cc("validate-pod"), Rules: rule("", "pods"), ObjectSelector: never, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
		{Name: kruise.WebhookPPM, ClientConfig: cc("validate-ppm"), Rules: rule("apps.kruise.io", "podprobemarkers"), FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}},
	}
	mt, _ := json.Marshal(mut)
	vt, _ := json.Marshal(val)
	labels := func(v string) map[string]string { return map[string]string{"control-plane": v} }
	podSpec := func(name string) corev1.PodSpec {
		return corev1.PodSpec{NodeSelector: map[string]string{"example.com/never": "true"},
			Containers: []corev1.Container{{Name: name, Image: "example.com/kruise:v1.9.0"}}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kruise.DefaultNamespace, Name: kruise.ManagerName},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels("controller-manager")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels("controller-manager")}, Spec: podSpec("manager")}}}
	dep.Spec.Template.Spec.Containers[0].Args = []string{"--enable-leader-election"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: kruise.DefaultNamespace, Name: kruise.DaemonName},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels("daemon")},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels("daemon")}, Spec: podSpec("daemon")}}}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kruise.DefaultNamespace}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.MutatingConfigName,
			Annotations: map[string]string{kruise.TemplateAnnotation: string(mt)}}, Webhooks: mut},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.ValidatingConfigName,
			Annotations: map[string]string{kruise.TemplateAnnotation: string(vt)}}, Webhooks: val},
		dep, ds,
	}
}
