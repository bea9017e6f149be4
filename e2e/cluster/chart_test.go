// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/build/cosign"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// release is the Helm release TestChart installs.
const release = "probeshim"

// TestChart installs the cluster part from the Helm chart (charts/probeshim, with the Helm SDK as
// `helm install --create-namespace` does), runs the demo flow against it — markers marking pods,
// a ContainerRecreateRequest restarting a container, an enhanced-liveness pod — and uninstalls it:
// everything but the CRDs (kept on purpose) goes.
//
// It runs before TestCluster (Go runs this file's tests first) and leaves the rig as it found it,
// so TestCluster's `kubectl apply -k` meets no objects Helm owns.
func TestChart(t *testing.T) {
	c := framework.Get(t)
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Built once per machine (make e2e starts the build as the lanes start): minutes the first
	// time, outside the install's own deadline.
	cosignBin, err := cosign.Binary(framework.Context(t, 30*time.Minute), root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := framework.Context(t, 6*time.Minute)
	cfg := helmConfig(t, c)
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = release, Namespace, true
	// As a user installs a release: `helm install probeshim oci://<registry>/charts/probeshim
	// --version X`, the chart packaged as make release packages it and pushed to the rig's registry.
	ch, chartRef := chartFromRegistry(t, c, inst, filepath.Join(root, "charts", "probeshim"))
	inst.Timeout = 2 * time.Minute
	// The image the rig pushed to its registry (Image()), pulled by digest as a user pins a release.
	repo, digest, err := pushedImage(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// Both signed as make release PUBLISH=1 signs them, and verified with cosign before the install.
	signAndVerify(ctx, t, c, cosignBin, repo+"@"+digest, chartRef)
	t0 := time.Now()
	rel, err := inst.RunWithContext(ctx, ch, map[string]any{
		"image": map[string]any{"repository": repo, "tag": "e2e", "digest": digest, "pullPolicy": "IfNotPresent"},
	})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("helm install: release %s revision %d, %s (%s)", rel.Name, rel.Version, rel.Info.Status, time.Since(t0).Round(time.Millisecond))
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled { // a failure midway: leave the rig to TestCluster anyway
			_ = ForceUninstall(cfg, release)
		}
	})
	if err := WaitReady(ctx, c, t0, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("chart installed and ready in %s", time.Since(t0).Round(time.Millisecond))

	// `helm test`: the chart's selftest Pod (CRDs served, the webhook refuses a bad marker with its
	// message) passes against the installed release.
	t.Run("helm test", func(t *testing.T) {
		tst := action.NewReleaseTesting(cfg)
		tst.Namespace, tst.Timeout = Namespace, 2*time.Minute
		rel, err := tst.Run(release)
		if err != nil {
			t.Fatalf("helm test: %v", err)
		}
		ran := 0
		for _, h := range rel.Hooks {
			for _, e := range h.Events {
				if e != helmrelease.HookTest || h.Kind != "Pod" {
					continue
				}
				ran++
				if h.LastRun.Phase != helmrelease.HookPhaseSucceeded {
					t.Errorf("helm test %s: %s", h.Name, h.LastRun.Phase)
				}
			}
		}
		if ran == 0 {
			t.Error("helm test ran no test Pod")
		}
	})

	s := &suite{c: c, svc: c.StartNodeService(t)}
	t.Run("demo flow", func(t *testing.T) {
		t.Run("exec probe marks the pod", s.testExecMarks)
		t.Run("enhanced liveness", s.testEnhancedLiveness)
		t.Run("container recreate request", s.testRecreate)
	})
	if t.Failed() {
		t.Logf("cluster deployment:\n%s", Diagnose(c))
		t.Logf("node service log (end):\n%s", logtail.Last(s.svc.Logs(), 40))
	}
	s.svc.Stop()

	testUninstallGuard(t, c, cfg)
	t1 := time.Now()
	un := action.NewUninstall(cfg)
	un.Timeout = 2 * time.Minute
	if _, err := un.Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	uninstalled = true
	err = framework.WaitFor(ctx, 2*time.Minute, "the release's objects gone", func(ctx context.Context) (bool, string, error) {
		var left []string
		if _, err := c.Kube.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment "+Deployment)
		}
		if _, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, Webhooks, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ValidatingWebhookConfiguration "+Webhooks)
		}
		if _, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, Webhooks, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "MutatingWebhookConfiguration "+Webhooks)
		}
		if _, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "probeshim-pod-records", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ValidatingAdmissionPolicy probeshim-pod-records")
		}
		if _, err := c.Kube.RbacV1().ClusterRoles().Get(ctx, "probeshim-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "ClusterRole probeshim-node")
		}
		// TestCluster's apply would fail on a namespace still terminating.
		if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, "probeshim-node-lease", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "Namespace probeshim-node-lease")
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm uninstall: done in %s", time.Since(t1).Round(time.Millisecond))
	// The CRDs stay (helm.sh/resource-policy: keep): deleting them would delete every marker.
	for _, crd := range []string{"nodepodprobes", "podprobemarkers", "containerrecreaterequests"} {
		if _, err := c.Kubectl(ctx, "get", "crd", crd+".apps.kruise.io"); err != nil {
			t.Errorf("CRD %s deleted by helm uninstall: %v", crd, err)
		}
	}
}

// testUninstallGuard: while a pod whose liveness probe was moved off the kubelet exists, helm
// uninstall refuses (the chart's pre-delete hook), and the hook's log names the pod; once it is
// gone, the guard lets the uninstall through (TestChart's own uninstall).
func testUninstallGuard(t *testing.T, c *framework.Cluster, cfg *action.Configuration) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := c.Namespace(t)
	pod := framework.NewPod(ns, "guarded", framework.Shell("main", "exec sleep 1000000"))
	pod.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating an enhanced-liveness pod: %v", err)
	}
	if pod.Spec.Containers[0].LivenessProbe != nil {
		t.Fatalf("the webhook left the liveness probe with the kubelet: %+v", pod.Annotations)
	}
	un := action.NewUninstall(cfg)
	un.Timeout = 2 * time.Minute
	t0 := time.Now()
	_, err := un.Run(release)
	// Helm says only that the hook's Job failed; its log says why.
	if err == nil || !strings.Contains(err.Error(), "probeshim-uninstall-guard") {
		t.Fatalf("helm uninstall with %s/%s depending on probeshim: %v, want the pre-delete hook probeshim-uninstall-guard to refuse", ns, pod.Name, err)
	}
	t.Logf("helm uninstall refused in %s: %v", time.Since(t0).Round(time.Millisecond), err)
	pods, err := c.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=probeshim-uninstall-guard"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the guard's pod: %v (%d found)", err, len(pods.Items))
	}
	logs, err := c.Kube.CoreV1().Pods(Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the guard's log: %v", err)
	}
	if want := "refusing: 1 pods that opted in to enhanced liveness"; !strings.Contains(string(logs), want) || !strings.Contains(string(logs), ns+"/guarded") {
		t.Errorf("the guard's log %q, want %q naming %s/guarded", logs, want, ns)
	}
	if _, err := c.Kube.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{}); err != nil {
		t.Errorf("the refused uninstall deleted the deployment: %v", err)
	}
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, time.Minute, "the guarded pod gone", func(ctx context.Context) (bool, string, error) {
		_, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testRecreate: a ContainerRecreateRequest restarts the container it names, through the
// webhooks (node-name label, statusContext) and the node service.
func (s *suite) testRecreate(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.c.CreatePod(t, framework.NewPod(ns, "crr-0", framework.Shell("main", "exec sleep 1000000")))
	pod = s.c.WaitForPodReady(t, pod, waitPodReady)
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart-main"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
	}
	if err := s.c.Client.Create(framework.Context(t, 30*time.Second), crr); err != nil {
		t.Fatalf("creating the ContainerRecreateRequest: %v", err)
	}
	if crr.Labels[v1alpha1.LabelCRRNodeName] != pod.Spec.NodeName {
		t.Errorf("the mutating webhook did not label the request with its node: %v", crr.Labels)
	}
	cur := &v1alpha1.ContainerRecreateRequest{}
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), 90*time.Second, "request completed", func(ctx context.Context) (bool, string, error) {
		if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
			return false, err.Error(), nil
		}
		return cur.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted, fmt.Sprintf("phase %q %+v", cur.Status.Phase, cur.Status.ContainerRecreateStates), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := cur.Status.ContainerRecreateStates; len(st) != 1 || st[0].Phase != v1alpha1.ContainerRecreateRequestSucceeded {
		t.Errorf("container states %+v, want main Succeeded", st)
	}
	err = framework.WaitFor(framework.Context(t, time.Minute), 45*time.Second, "container main restarted once", func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false, err.Error(), nil
		}
		st := framework.ContainerStatus(p, "main")
		return st != nil && st.RestartCount == 1 && st.Ready, fmt.Sprintf("%+v", st), nil
	})
	if err != nil {
		t.Error(err)
	}
}

// chartVersion is the version TestChart packages the chart with (a package version; see
// charts.ChartVersion).
const chartVersion = "1.0.0~e2e.1"

// chartFromRegistry packages the chart in dir, pushes it to the rig's registry and has inst
// locate it there by its oci:// address and version, as `helm install oci://… --version` does. It
// returns the chart and the pushed artifact's <repo>@<digest>.
func chartFromRegistry(t *testing.T, c *framework.Cluster, inst *action.Install, dir string) (*chart.Chart, string) {
	t.Helper()
	tgz, err := charts.Package(dir, t.TempDir(), chartVersion, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	opts := []registry.ClientOption{registry.ClientOptPlainHTTP(), registry.ClientOptHTTPClient(&http.Client{Transport: c.Rig.RegistryTransport()})}
	ref, digest, err := charts.PushOCI(tgz, rig.Registry, time.Unix(0, 0), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chart pushed: %s@%s", ref, digest)
	rc, err := registry.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	settings := cli.New()
	settings.RepositoryCache, settings.RegistryConfig = t.TempDir(), filepath.Join(t.TempDir(), "config.json")
	inst.SetRegistryClient(rc)
	inst.Version = charts.ChartVersion(chartVersion)
	path, err := inst.LocateChart("oci://"+charts.OCIRepository(rig.Registry)+"/probeshim", settings)
	if err != nil {
		t.Fatalf("helm install oci://…: locating the chart: %v", err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != inst.Version {
		t.Fatalf("the registry's chart has version %s, want %s", ch.Metadata.Version, inst.Version)
	}
	return ch, charts.OCIRepository(rig.Registry) + "/probeshim@" + digest
}

// signAndVerify signs refs (<repo>@<digest> in the rig's registry) with a throwaway cosign key, as
// the release signs its image and chart, and verifies them with cosign as a user does before an
// install; a key that did not sign them is refused.
func signAndVerify(ctx context.Context, t *testing.T, c *framework.Cluster, bin string, refs ...string) {
	t.Helper()
	// cosign runs in the rig's netns, where the registry listens.
	tool := cosign.Tool{Bin: bin, Wrap: []string{"nsenter", "--net=" + c.NetNSPath()}, PlainHTTP: true}
	key, pub, err := tool.GenerateKeyPair(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, otherPub, err := tool.GenerateKeyPair(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if err := tool.Sign(ctx, key, ref); err != nil {
			t.Fatal(err)
		}
		if _, err := tool.Verify(ctx, pub, ref); err != nil {
			t.Fatalf("cosign verify: %v", err)
		}
		if out, err := tool.Verify(ctx, otherPub, ref); err == nil {
			t.Errorf("cosign verify with a key that did not sign %s passed:\n%s", ref, out)
		}
		t.Logf("cosign: %s signed and verified", ref)
	}
}

func helmConfig(t *testing.T, c *framework.Cluster) *action.Configuration {
	t.Helper()
	cfg, err := charts.ActionConfig(c.Config, Namespace, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
