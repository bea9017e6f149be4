// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package cluster is the end-to-end suite of the cluster deployment (probeshim-cluster) on the
// rig, with the real node service on the node. Its non-test part deploys the cluster part onto
// a rig from its own manifests (cluster/deploy); `make demo` (e2e/cmd/demo) uses it too.
package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/action"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// The cluster deployment as cluster/deploy names it.
const (
	// ImageName is the Deployment's image name in cluster/deploy, which an install replaces
	// (kustomize's images: transformer) with where it pushed the image.
	ImageName = "probeshim-cluster"
	// ImageRef is where the rig pushes the image `make image` builds: its registry.
	ImageRef   = rig.Registry + "/probeshim/probeshim-cluster:e2e"
	Namespace  = "probeshim-system"
	Deployment = "probeshim-cluster"
	// Webhooks is the name of both webhook configurations.
	Webhooks = "probeshim"
	// podSelector selects the Deployment's pods.
	podSelector = "app.kubernetes.io/name=probeshim,app.kubernetes.io/component=cluster"
)

// Image is the probeshim-cluster image as `make image` builds it (internal/build/ociimage, version
// and labels from git), for this machine's platform only. Pass it to framework.WithImages or
// rig.Config.Images: the rig pushes it to its registry as ImageRef.
func Image() rig.Image {
	return rig.Image{Ref: ImageRef, Index: func(ctx context.Context, dir string) (v1.ImageIndex, error) {
		root, err := framework.ModuleRoot()
		if err != nil {
			return nil, err
		}
		g, err := ociimage.FromGit(ctx, root)
		if err != nil {
			return nil, err
		}
		bins, err := os.MkdirTemp(dir, "probeshim-cluster-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(bins)
		spec, err := ociimage.ClusterSpec(ctx, root, bins, g, []ociimage.Platform{{OS: runtime.GOOS, Arch: runtime.GOARCH}})
		if err != nil {
			return nil, err
		}
		return ociimage.Build(spec)
	}}
}

// overlay writes a kustomization in a new folder under dir that installs cluster/deploy with the
// image pinned by digest, as a user installs a pushed release (kustomize edit set image
// probeshim-cluster=REGISTRY/probeshim/probeshim-cluster@sha256:...).
func overlay(dir, deploy, image string) (string, error) {
	d, err := os.MkdirTemp(dir, "probeshim-deploy-")
	if err != nil {
		return "", err
	}
	// kustomize takes no absolute path to a base: the relative one.
	rel, err := filepath.Rel(d, deploy)
	if err != nil {
		return "", err
	}
	repo, digest, _ := strings.Cut(image, "@")
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n- name: %s\n  newName: %s\n  digest: %s\n",
		rel, ImageName, repo, digest)
	return d, os.WriteFile(filepath.Join(d, "kustomization.yaml"), []byte(k), 0o644)
}

// Deploy applies the cluster deployment's manifests (`kubectl apply -k cluster/deploy`, server
// side) and returns once the Deployment is available, both webhook configurations carry a CA
// bundle and their webhooks answer (a dry-run PodProbeMarker is validated, a dry-run
// enhanced-liveness pod is mutated, a dry-run ContainerRecreateRequest for a missing pod is
// rejected by its webhook), and the node's NodePodProbe exists. The image (Image) must have been
// pushed by the rig: the Deployment pulls it from the rig's registry by digest. logf gets
// progress lines.
func Deploy(ctx context.Context, c *framework.Cluster, logf func(string, ...any)) error {
	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	t0 := time.Now()
	since := func() string { return time.Since(t0).Round(time.Millisecond).String() }
	repo, digest, err := pushedImage(ctx, c)
	if err != nil {
		return err
	}
	pinned := repo + "@" + digest
	dir, err := os.MkdirTemp("", "probeshim-deploy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kdir, err := overlay(dir, filepath.Join(root, "cluster", "deploy"), pinned)
	if err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-k", kdir); err != nil {
		return err
	}
	logf("cluster: manifests applied, image %s (%s)", pinned, since())

	dep := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Deployment}, dep); err != nil {
		return err
	}
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		if ctr.Image != pinned || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
			return fmt.Errorf("the Deployment runs image %q (pull policy %s), want %q, IfNotPresent: keep cluster/deploy's image name %q", ctr.Image, ctr.ImagePullPolicy, pinned, ImageName)
		}
	}
	return WaitReady(ctx, c, t0, logf)
}

// pushedImage is the repository and digest of the image the rig pushed as ImageRef.
func pushedImage(ctx context.Context, c *framework.Cluster) (repo, digest string, err error) {
	d, err := c.Rig.RegistryDigest(ctx, ImageRef)
	if err != nil {
		return "", "", fmt.Errorf("the rig's registry has no %s (was Image() in the rig's images?): %w", ImageRef, err)
	}
	return strings.TrimSuffix(ImageRef, ":e2e"), d.String(), nil
}

// WaitReady returns once the deployed cluster part (from the manifests or the Helm chart) is
// ready, as Deploy describes; t0 is when the deployment began, for the progress lines.
func WaitReady(ctx context.Context, c *framework.Cluster, t0 time.Time, logf func(string, ...any)) error {
	since := func() string { return time.Since(t0).Round(time.Millisecond).String() }
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/nodepodprobes.apps.kruise.io", "crd/podprobemarkers.apps.kruise.io", "crd/containerrecreaterequests.apps.kruise.io"); err != nil {
		return err
	}

	err := framework.WaitFor(ctx, 2*time.Minute, "Deployment "+Namespace+"/"+Deployment+" available", func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Deployment}, d); err != nil {
			return false, err.Error(), nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		obs := fmt.Sprintf("replicas=%d updated=%d ready=%d available=%d", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.AvailableReplicas == want, obs, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, Diagnose(c))
	}
	logf("cluster: Deployment available (%s)", since())

	err = framework.WaitFor(ctx, time.Minute, "webhooks answering", func(ctx context.Context) (bool, string, error) {
		if msg := webhooksAnswer(ctx, c); msg != "" {
			return false, msg, nil
		}
		return true, "", nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, Diagnose(c))
	}
	logf("cluster: webhooks answer (%s)", since())

	err = framework.WaitFor(ctx, time.Minute, "NodePodProbe "+c.Rig.NodeName(), func(ctx context.Context) (bool, string, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: c.Rig.NodeName()}, &v1alpha1.NodePodProbe{})
		return err == nil, errText(err), nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, Diagnose(c))
	}
	logf("cluster: NodePodProbe %s created (%s)", c.Rig.NodeName(), since())
	return nil
}

// webhooksAnswer returns "" once the CA bundles are in place and the validating and the
// mutating webhook both serve a dry-run request, else what is still missing.
func webhooksAnswer(ctx context.Context, c *framework.Cluster) string {
	mwc, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, Webhooks, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	vwc, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, Webhooks, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return "no caBundle yet in mutating webhook " + w.Name
		}
	}
	for _, w := range vwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return "no caBundle yet in validating webhook " + w.Name
		}
	}
	dryRun := []string{metav1.DryRunAll}
	m := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-check"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "webhook-check"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "check", ContainerName: "main", PodConditionType: "example.com/webhook-check",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
			}},
		},
	}
	if err := c.Client.Create(ctx, m, &client.CreateOptions{DryRun: dryRun}); err != nil {
		return "PodProbeMarker webhook: " + err.Error()
	}
	pod := framework.NewPod("default", "webhook-check", framework.Command("main", "sleep", "1"))
	pod.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	got, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: dryRun})
	if err != nil {
		return "enhanced-liveness webhook: " + err.Error()
	}
	if got.Spec.Containers[0].LivenessProbe != nil {
		return "enhanced-liveness webhook: the dry-run pod kept its livenessProbe"
	}
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-check"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "no-such-pod",
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
	}
	err = c.Client.Create(ctx, crr, &client.CreateOptions{DryRun: dryRun})
	if err == nil || !strings.Contains(err.Error(), "pod no-such-pod does not exist") {
		return fmt.Sprintf("ContainerRecreateRequest webhook: want the missing pod rejected, got %v", err)
	}
	return ""
}

// Diagnose describes the cluster deployment for a failure message: its pods and the end of
// each one's log.
func Diagnose(c *framework.Cluster) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := c.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		return "listing the cluster deployment's pods: " + err.Error()
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		fmt.Fprintf(&b, "--- pod %s/%s: %s\n", p.Namespace, p.Name, framework.DescribePod(p))
		out, _ := c.Kubectl(ctx, "logs", "-n", p.Namespace, p.Name, "--tail=40")
		b.WriteString(out)
	}
	if evs, err := c.Kube.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{}); err == nil && len(evs.Items) > 0 {
		b.WriteString("--- events in " + Namespace + ":\n")
		b.WriteString(framework.FormatEvents(evs.Items))
	}
	return b.String()
}

// Logs returns the logs of every pod of the cluster deployment.
func Logs(ctx context.Context, c *framework.Cluster) (map[string]string, error) {
	pods, err := c.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		b, err := c.Kube.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		out[p.Name] = string(b)
	}
	return out, nil
}

// CheckNoPanics fails t when the log of the node service svc or of a pod of the cluster
// deployment shows a panic.
func CheckNoPanics(t *testing.T, c *framework.Cluster, svc *framework.NodeService) {
	t.Helper()
	if strings.Contains(svc.Logs(), "panic") {
		t.Errorf("the node service log shows a panic:\n%s", svc.Logs())
	}
	logs, err := Logs(framework.Context(t, time.Minute), c)
	if err != nil {
		t.Fatal(err)
	}
	for pod, l := range logs {
		if strings.Contains(l, "panic") {
			t.Errorf("the log of %s shows a panic:\n%s", pod, l)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ForceUninstall uninstalls a Helm release without its hooks (the uninstall guard among them), as
// `helm uninstall --no-hooks` does: for cleaning up after a test, whatever pods are left.
func ForceUninstall(cfg *action.Configuration, name string) error {
	un := action.NewUninstall(cfg)
	un.DisableHooks = true
	_, err := un.Run(name)
	return err
}
