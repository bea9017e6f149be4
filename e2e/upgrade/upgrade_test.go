// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package upgrade

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/packaging/nspawn"
	"github.com/probeshim/probeshim/packaging/rigtest"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme, apiextensionsv1.AddToScheme),
		framework.WithImages(cluster.Image(), ImageN()))
}

const (
	release       = "probeshim"
	conditionIdle = "game.example.com/idle"
	markerProbe   = "idle#idle"         // NodePodProbe's name of the marker's probe
	livenessProbe = "app-livenessProbe" // and of the enhanced-liveness pod's
	waitMarks     = 45 * time.Second
	waitPodReady  = 90 * time.Second
	pollEvery     = 200 * time.Millisecond
)

// TestUpgrade installs release N (ReleaseNCommit: its chart, its image from the rig's registry,
// its .deb under systemd on the node with apt-get, from a signed repository of it as a release
// publishes one), puts work on it — a marker marking a pod, an enhanced-liveness pod, a completed
// ContainerRecreateRequest — and upgrades in place to this tree: `helm upgrade` with this chart
// and image, then this tree's .deb published into the node's repository and `apt-get upgrade`
// (the postinst restarts the service). Throughout, it polls the marker's pod condition, the
// NodePodProbe states and admission (a dry-run PodProbeMarker and a dry-run enhanced-liveness
// pod), and then requires: the condition never left True, the NodePodProbe status never lost an
// entry or a Succeeded, no container restarted, the CRDs are this tree's, the completed request
// was not replayed, no admission was refused, and the upgraded parts still work (the probe flips
// the condition, a new request restarts).
func TestUpgrade(t *testing.T) {
	c := framework.Get(t) // skips without root or the Kubernetes binaries
	ctx := framework.Context(t, 20*time.Minute)
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	var relN ReleaseN
	var debNext string
	step(t, "release N (cached by commit) and this tree's .deb", func() {
		if relN, err = BuildReleaseN(ctx, t.Logf); err != nil {
			t.Fatal(err)
		}
		pkgs, err := rigtest.Build(ctx, root, "PROBESHIM_VERSION="+VersionNext, "PROBESHIM_FORMATS=deb", "PROBESHIM_DIST="+filepath.Join(work, "next"))
		if err != nil {
			t.Fatal(err)
		}
		debNext = pkgs.Deb
	})

	// Release N of the cluster part, from its chart, image pulled by digest from the rig's registry.
	cfg, err := charts.ActionConfig(c.Config, cluster.Namespace, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	step(t, "helm install release N", func() {
		ch, err := loader.Load(relN.Chart)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Rig.RegistryDigest(ctx, ImageNRef)
		if err != nil {
			t.Fatal(err)
		}
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace, inst.CreateNamespace, inst.Timeout = release, cluster.Namespace, true, 2*time.Minute
		vals := imageValues(ImageNRepo, "release-n", d.String())
		// Release N's chart lagged its own image: it grants no access to the ConfigMaps the
		// image's Kruise detector and heartbeat relay use, so the detector holds every probe off
		// ("Kruise is live") and enhanced liveness is not applied. The flags a user of release N
		// had to add on a cluster without Kruise and with dedicated node identities turn both
		// off; the upgrade (this chart's defaults) turns them on again.
		vals["extraArgs"] = []any{"--kruise-detect-period=0s", "--heartbeat-relay=false"}
		if _, err := inst.RunWithContext(ctx, ch, vals); err != nil {
			t.Fatalf("helm install (release N): %v", err)
		}
		t.Cleanup(func() { _ = cluster.ForceUninstall(cfg, release) })
		if err := cluster.WaitReady(ctx, c, time.Now(), t.Logf); err != nil {
			t.Fatal(err)
		}
	})

	// Release N of the node service: the .deb under systemd in a container in the rig's netns,
	// on the dedicated node identity both charts grant.
	node := c.Rig.NodeName()
	user, groups := framework.DedicatedNodeUser(node)
	kubeconfig, err := c.Rig.Kubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	r := rigtest.Rig{Dir: c.Rig.Dir(), NetNS: c.NetNSPath(), Containerd: c.ContainerdSocket(), Kubeconfig: kubeconfig, Node: node}
	var ctr *nspawn.Container
	var repo *aptRepo
	step(t, "node package N installed under systemd with apt-get, from release N's repository", func() {
		rootfs := filepath.Join(work, "rootfs")
		if err := rigtest.Base(ctx, t.Logf, rigtest.CacheDir(), rootfs); err != nil {
			t.Fatal(err)
		}
		repo = newAptRepo(ctx, t, root, work)
		repo.publish(t, relN.Deb)
		ctr = boot(t, r, rootfs, work, repo.binds())
		repo.serve(ctx, t, ctr)
		if err := installFromApt(ctx, ctr, r); err != nil {
			t.Fatal(err)
		}
		if v := pkgVersion(t, ctr); v != VersionN {
			t.Fatalf("installed package version %q, want %s", v, VersionN)
		}
	})

	// The work release N carries.
	ns := c.Namespace(t)
	w := &workload{c: c, ns: ns}
	step(t, "marker, enhanced-liveness pod, completed recreate request on release N", func() {
		w.start(t)
	})
	before := w.restarts(t)
	t.Logf("containers before the upgrade: %v", before)

	watch := newWatcher(c, w)
	watch.start(ctx)

	var rollout time.Duration
	step(t, "helm upgrade to this tree's chart and image", func() {
		ch, err := loader.Load(filepath.Join(root, "charts", "probeshim"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Rig.RegistryDigest(ctx, cluster.ImageRef)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Timeout = cluster.Namespace, 2*time.Minute
		rel, err := up.RunWithContext(ctx, release, ch, imageValues(strings.TrimSuffix(cluster.ImageRef, ":e2e"), "e2e", d.String()))
		if err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		if err := cluster.WaitReady(ctx, c, t0, t.Logf); err != nil {
			t.Fatal(err)
		}
		rollout = time.Since(t0)
		t.Logf("helm upgrade: revision %d, %s; rollout (upgrade call to new pods ready and webhooks answering): %s",
			rel.Version, rel.Info.Status, rollout.Round(time.Millisecond))
	})

	var nodeUpgraded time.Time
	step(t, "apt-get upgrade to this tree's .deb, published into the repository", func() {
		// The postinst restarts the service on an upgrade; --force-confold keeps the edited config.yaml.
		repo.publish(t, debNext)
		out, err := apt(ctx, ctr, "upgrade -y")
		if err == nil {
			out, err = ctr.Sh(ctx, "systemctl is-active "+rigtest.Unit)
		}
		if err != nil {
			t.Fatalf("apt-get upgrade: %v\n%s", err, out)
		}
		nodeUpgraded = time.Now()
		if v := pkgVersion(t, ctr); v != VersionNext {
			t.Fatalf("installed package version %q after the upgrade, want %s", v, VersionNext)
		}
	})

	// A probe result from the new node service reaches the NodePodProbe status before the
	// watch ends, so that it covers the restart: a changed result or the refresh of
	// lastProbeTime (every minute).
	err = framework.WaitFor(ctx, 2*time.Minute, "a probe result after the node package upgrade", func(ctx context.Context) (bool, string, error) {
		st, err := c.ProbeStates(ctx, node, w.live.UID)
		if err != nil {
			return false, err.Error(), nil
		}
		s := st[livenessProbe]
		return s.LastProbeTime.After(nodeUpgraded), fmt.Sprintf("%+v", s), nil
	})
	if err != nil {
		t.Error(err)
	}
	rep := watch.stop()
	t.Logf("during the upgrade: %d polls of the marker condition and the NodePodProbe status, %d admission polls; "+
		"longest admission gap %s (%d failed polls; last error: %s), rollout %s",
		rep.statePolls, rep.admissionPolls, rep.longestGap.Round(time.Millisecond), rep.admissionFailures, orNone(rep.lastAdmissionErr), rollout.Round(time.Millisecond))

	t.Run("probes kept reporting", func(t *testing.T) {
		if rep.statePolls == 0 {
			t.Fatal("no poll of the pods' state during the upgrade")
		}
		for _, v := range rep.violations {
			t.Error(v)
		}
	})
	// The chart renders the deployment's CA bundle into every webhook, those this upgrade adds too
	// (release N had no podprobemarkers.mutate.probeshim.io), and the replicas roll one by one:
	// nothing is refused, not even for a moment.
	t.Run("no admission refused", func(t *testing.T) {
		if rep.admissionPolls == 0 {
			t.Fatal("no admission poll during the upgrade")
		}
		if rep.admissionFailures > 0 {
			t.Errorf("%d of %d admission polls refused, for up to %s (rollout %s); last error: %s",
				rep.admissionFailures, rep.admissionPolls, rep.longestGap.Round(time.Millisecond), rollout.Round(time.Millisecond), rep.lastAdmissionErr)
		}
	})
	t.Run("no container restarted", func(t *testing.T) {
		after := w.restarts(t)
		if !maps.Equal(before, after) {
			t.Errorf("containers (restartCount@containerID) before %v, after %v", before, after)
		}
	})
	t.Run("CRDs upgraded", func(t *testing.T) {
		// This tree's PodProbeMarker lets probe names be 253 bytes (release N: 63).
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(framework.Context(t, time.Minute), client.ObjectKey{Name: "podprobemarkers.apps.kruise.io"}, crd); err != nil {
			t.Fatal(err)
		}
		want := wantProbeNameMax(t, root)
		if got := probeNameMax(crd); got != want {
			t.Errorf("the PodProbeMarker CRD's probe name maxLength is %d, want %d (this tree's)", got, want)
		}
	})
	t.Run("recreate request not replayed, a new one served", func(t *testing.T) {
		w.checkRecreate(t)
	})
	t.Run("upgraded parts still mark", func(t *testing.T) {
		w.exec(t, w.marked.Name, "main", "rm", "/tmp/idle")
		w.waitCondition(t, corev1.ConditionFalse)
		w.exec(t, w.marked.Name, "main", "sh", "-c", "echo 'no players' > /tmp/idle")
		w.waitCondition(t, corev1.ConditionTrue)
	})

	if t.Failed() {
		t.Logf("cluster deployment:\n%s", cluster.Diagnose(c))
		out, _ := ctr.Run(context.Background(), "journalctl", "--no-pager", "-n", "60", "-u", rigtest.Unit)
		t.Logf("node service journal (end):\n%s", logtail.Last(out, 60))
	}
}

func imageValues(repo, tag, digest string) map[string]any {
	return map[string]any{"image": map[string]any{"repository": repo, "tag": tag, "digest": digest, "pullPolicy": "IfNotPresent"}}
}

// workload is what the upgrade must not disturb.
type workload struct {
	c      *framework.Cluster
	ns     string
	marked *corev1.Pod // marked by the marker "idle"
	live   *corev1.Pod // enhanced liveness
	crr    *corev1.Pod // its container main restarted once by a request before the upgrade
}

func (w *workload) start(t *testing.T) {
	t.Helper()
	ctx := framework.Context(t, 5*time.Minute)
	marked := framework.NewPod(w.ns, "gs-0", framework.Shell("main", "echo 'no players' > /tmp/idle; exec sleep 1000000"))
	marked.Labels = map[string]string{"app": "gs"}
	w.marked = w.c.WaitForPodReady(t, w.c.CreatePod(t, marked), waitPodReady)
	m := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "idle"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gs"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "idle", ContainerName: "main", PodConditionType: conditionIdle,
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/idle"}}},
					PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				}},
			}},
		},
	}
	if err := w.c.Client.Create(ctx, m); err != nil {
		t.Fatalf("creating the PodProbeMarker: %v", err)
	}
	w.waitCondition(t, corev1.ConditionTrue)

	app := framework.Shell("app", "touch /tmp/alive; exec sleep 1000000")
	app.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/alive"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	live := framework.NewPod(w.ns, "svc-0", app)
	// Opted out of the decider's restarts: a restart below could only be the kubelet's.
	live.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", decider.AnnotationRestartDisabled: "true"}
	w.live = w.c.CreatePod(t, live)
	if w.live.Spec.Containers[0].LivenessProbe != nil {
		t.Fatal("release N's webhook left the enhanced-liveness pod its livenessProbe")
	}
	w.live = w.c.WaitForPodReady(t, w.live, waitPodReady)
	if err := w.c.WaitForProbeState(ctx, w.c.Rig.NodeName(), w.live.UID, livenessProbe, v1alpha1.ProbeSucceeded, time.Minute); err != nil {
		t.Fatal(err)
	}

	w.crr = w.c.WaitForPodReady(t, w.c.CreatePod(t, framework.NewPod(w.ns, "crr-0", framework.Shell("main", "exec sleep 1000000"))), waitPodReady)
	w.recreate(t, "restart-main", 1)
}

// recreate asks for container main of w.crr to be recreated and waits for the request to
// complete and the container to have restarted restarts times in all.
func (w *workload) recreate(t *testing.T, name string, restarts int32) {
	t.Helper()
	ctx := framework.Context(t, 3*time.Minute)
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: w.crr.Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
	}
	if err := w.c.Client.Create(ctx, crr); err != nil {
		t.Fatalf("creating the ContainerRecreateRequest %s: %v", name, err)
	}
	err := framework.WaitFor(ctx, 90*time.Second, "request "+name+" completed, main restarted", func(ctx context.Context) (bool, string, error) {
		cur := &v1alpha1.ContainerRecreateRequest{}
		if err := w.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
			return false, err.Error(), nil
		}
		p := &corev1.Pod{}
		if err := w.c.Client.Get(ctx, client.ObjectKeyFromObject(w.crr), p); err != nil {
			return false, err.Error(), nil
		}
		st := framework.ContainerStatus(p, "main")
		done := cur.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted && st != nil && st.RestartCount == restarts && st.Ready
		return done, fmt.Sprintf("phase %q, main %+v", cur.Status.Phase, st), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkRecreate: the request completed on release N is still Completed, its container was not
// restarted again, and this tree's parts serve a new request.
func (w *workload) checkRecreate(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	cur := &v1alpha1.ContainerRecreateRequest{}
	if err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "restart-main"}, cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Phase != v1alpha1.ContainerRecreateRequestCompleted {
		t.Errorf("release N's completed request is now %q", cur.Status.Phase)
	}
	w.recreate(t, "restart-main-again", 2)
}

// restarts maps pod/container to restartCount@containerID for the workload's pods.
func (w *workload) restarts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pod := range []*corev1.Pod{w.marked, w.live, w.crr} {
		p, err := w.c.Kube.CoreV1().Pods(pod.Namespace).Get(framework.Context(t, time.Minute), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Status.ContainerStatuses {
			out[p.Name+"/"+s.Name] = fmt.Sprintf("%d@%s", s.RestartCount, strings.TrimPrefix(s.ContainerID, "containerd://")[:12])
		}
	}
	return out
}

func (w *workload) waitCondition(t *testing.T, want corev1.ConditionStatus) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, time.Minute+waitMarks), waitMarks, "condition "+conditionIdle+" "+string(want), func(ctx context.Context) (bool, string, error) {
		got, err := w.condition(ctx)
		return err == nil && got == want, fmt.Sprintf("%q %v", got, err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (w *workload) condition(ctx context.Context) (corev1.ConditionStatus, error) {
	p, err := w.c.Kube.CoreV1().Pods(w.ns).Get(ctx, w.marked.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, cond := range p.Status.Conditions {
		if string(cond.Type) == conditionIdle {
			return cond.Status, nil
		}
	}
	return "", nil
}

func (w *workload) exec(t *testing.T, pod, container string, cmd ...string) {
	t.Helper()
	if _, stderr, err := w.c.Exec(framework.Context(t, time.Minute), w.ns, pod, container, cmd...); err != nil {
		t.Fatalf("%v in %s/%s: %v %s", cmd, pod, container, err, stderr)
	}
}

// watcher polls, while the upgrade runs, what must not change (the marker's condition, the
// NodePodProbe states) and admission.
type watcher struct {
	c    *framework.Cluster
	w    *workload
	stop func() report
}

type report struct {
	statePolls, admissionPolls, admissionFailures int
	longestGap                                    time.Duration
	lastAdmissionErr                              string
	violations                                    []string
}

func newWatcher(c *framework.Cluster, w *workload) *watcher { return &watcher{c: c, w: w} }

func (x *watcher) start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var rep report
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(rep.violations) < 20 {
			rep.violations = append(rep.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
		}
	}
	wg.Add(2)
	go func() { // the pod's condition and the NodePodProbe status
		defer wg.Done()
		tick := time.NewTicker(pollEvery) // the pace of the look, all through the upgrade
		defer tick.Stop()
		for ctx.Err() == nil {
			if got, err := x.w.condition(ctx); err == nil && got != corev1.ConditionTrue {
				violate("condition %s of %s is %q", conditionIdle, x.w.marked.Name, got)
			}
			for _, pc := range []struct {
				pod   *corev1.Pod
				probe string
			}{{x.w.marked, markerProbe}, {x.w.live, livenessProbe}} {
				st, err := x.c.ProbeStates(ctx, x.c.Rig.NodeName(), pc.pod.UID)
				if err != nil {
					continue // an API error is not the status' fault
				}
				if s, ok := st[pc.probe]; !ok || s.State != v1alpha1.ProbeSucceeded {
					violate("NodePodProbe status of %s probe %s: %+v (present %v)", pc.pod.Name, pc.probe, s, ok)
				}
			}
			mu.Lock()
			rep.statePolls++
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	go func() { // admission: both webhooks answering
		defer wg.Done()
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		var downSince time.Time
		for ctx.Err() == nil {
			err := admits(ctx, x.c)
			now := time.Now()
			mu.Lock()
			rep.admissionPolls++
			switch {
			case err != nil && ctx.Err() == nil:
				rep.admissionFailures++
				rep.lastAdmissionErr = err.Error()
				if downSince.IsZero() {
					downSince = now
				}
			case err == nil && !downSince.IsZero():
				rep.longestGap = max(rep.longestGap, now.Sub(downSince))
				downSince = time.Time{}
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if !downSince.IsZero() { // down until the end
			mu.Lock()
			rep.longestGap = max(rep.longestGap, time.Since(downSince))
			mu.Unlock()
		}
	}()
	x.stop = func() report {
		cancel()
		wg.Wait()
		return rep
	}
}

// admits returns nil when the validating webhook admits a dry-run PodProbeMarker and the mutating
// webhook moves a dry-run enhanced-liveness pod's livenessProbe away.
func admits(ctx context.Context, c *framework.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dryRun := []string{metav1.DryRunAll}
	m := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "upgrade-admission"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "upgrade-admission"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "check", ContainerName: "main", PodConditionType: "example.com/upgrade-admission",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
			}},
		},
	}
	if err := c.Client.Create(ctx, m, &client.CreateOptions{DryRun: dryRun}); err != nil {
		return fmt.Errorf("PodProbeMarker: %w", err)
	}
	pod := framework.NewPod("default", "upgrade-admission", framework.Command("main", "sleep", "1"))
	pod.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	got, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: dryRun})
	if err != nil {
		return fmt.Errorf("enhanced-liveness pod: %w", err)
	}
	if got.Spec.Containers[0].LivenessProbe != nil {
		return fmt.Errorf("enhanced-liveness pod: not mutated (livenessProbe kept)")
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// probeNameMax is the maxLength of spec.probes[].name in the PodProbeMarker CRD's served version.
func probeNameMax(crd *apiextensionsv1.CustomResourceDefinition) int64 {
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1alpha1" || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		name := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["probes"].Items.Schema.Properties["name"]
		if name.MaxLength != nil {
			return *name.MaxLength
		}
	}
	return -1
}

// wantProbeNameMax reads the same from this tree's CRD manifest.
func wantProbeNameMax(t *testing.T, root string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "apis", "crds", "apps.kruise.io_podprobemarkers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	return probeNameMax(crd)
}

// boot boots the container on the rig's node with release N's and this tree's package folders
// at /pkgs-n and /pkgs-next; it is powered off when the test ends.
func boot(t *testing.T, r rigtest.Rig, root, work string, binds []string) *nspawn.Container {
	t.Helper()
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	console, err := os.Create(filepath.Join(work, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	o.Root, o.Name, o.Console = root, "e2e-upgrade", console
	o.BindRO = append(o.BindRO, binds...)
	ctr, err := nspawn.Boot(context.Background(), o)
	if err != nil {
		console.Close()
		b, _ := os.ReadFile(console.Name())
		t.Fatalf("boot: %v\nconsole:\n%s", err, logtail.Last(string(b), 30))
	}
	t.Cleanup(func() {
		if err := ctr.Close(); err != nil {
			t.Errorf("teardown of the container: %v", err)
		}
		console.Close()
	})
	return ctr
}

func pkgVersion(t *testing.T, ctr *nspawn.Container) string {
	t.Helper()
	out, err := ctr.Run(framework.Context(t, time.Minute), "dpkg-query", "-W", "-f", "${Version}", "probeshim")
	if err != nil {
		t.Fatalf("dpkg-query: %v %s", err, out)
	}
	// Without the Debian revision (1.0.0~e2e.1-1).
	v := strings.TrimSpace(out)
	if i := strings.LastIndex(v, "-"); i > 0 {
		v = v[:i]
	}
	return v
}

func step(t *testing.T, name string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	t.Logf("timing: %s: %s", name, time.Since(start).Round(time.Millisecond))
}
