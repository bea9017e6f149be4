// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/cluster/kruise"
	testpoll "github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env  *testenv.Env
	skip string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctrl.Manager) error { return nil }, &env, &skip)
}

const probeshimNS = "probeshim-system"

// kruiseClient talks to the API server with the types the detector reads (CRDs too).
func kruiseClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Kruise's webhook entries as its chart and kruise-manager write them: failurePolicy Fail, served
// by kruise-manager (here an address nothing listens on, so a live entry denies what it matches,
// as Kruise's handlers do with the gates off). The pod entries match no test object.
func kruiseHook(name, group, resource string, ops ...admissionregistrationv1.OperationType) (admissionregistrationv1.RuleWithOperations, admissionregistrationv1.WebhookClientConfig) {
	return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{group},
			APIVersions: []string{"*"}, Resources: []string{resource}}},
		admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + strings.TrimSuffix(name, ".kb.io"))}
}

var never = &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/never": "true"}}

func kruiseMutating() *admissionregistrationv1.MutatingWebhookConfiguration {
	var hooks []admissionregistrationv1.MutatingWebhook
	for _, h := range []struct {
		name, group, res string
		sel              *metav1.LabelSelector
	}{{"mpod.kb.io", "", "pods", never}, {kruise.WebhookCRR, "apps.kruise.io", "containerrecreaterequests", nil}} {
		rule, cc := kruiseHook(h.name, h.group, h.res, admissionregistrationv1.Create, admissionregistrationv1.Update)
		hooks = append(hooks, admissionregistrationv1.MutatingWebhook{Name: h.name, ClientConfig: cc, Rules: []admissionregistrationv1.RuleWithOperations{rule},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1", "v1beta1"}, ObjectSelector: h.sel})
	}
	tmpl, _ := json.Marshal(hooks)
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.MutatingConfigName,
		Annotations: map[string]string{kruise.TemplateAnnotation: string(tmpl)}}, Webhooks: hooks}
}

func kruiseValidating() *admissionregistrationv1.ValidatingWebhookConfiguration {
	var hooks []admissionregistrationv1.ValidatingWebhook
	for _, h := range []struct {
		name, group, res string
		sel              *metav1.LabelSelector
	}{{"vpod.kb.io", "", "pods", never}, {"vpodeviction.kb.io", "", "pods/eviction", never},
		{kruise.WebhookPPM, "apps.kruise.io", "podprobemarkers", nil}} {
		rule, cc := kruiseHook(h.name, h.group, h.res, admissionregistrationv1.Create, admissionregistrationv1.Update)
		hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{Name: h.name, ClientConfig: cc, Rules: []admissionregistrationv1.RuleWithOperations{rule},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1", "v1beta1"}, ObjectSelector: h.sel})
	}
	tmpl, _ := json.Marshal(hooks)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.ValidatingConfigName,
		Annotations: map[string]string{kruise.TemplateAnnotation: string(tmpl)}}, Webhooks: hooks}
}

// reapply does what kruise-manager does every minute (here every period): rebuild each
// configuration's .webhooks from its template annotation. It counts the rebuilds that changed
// something.
func reapply(ctx context.Context, c client.Client, period time.Duration, restored *atomic.Int32) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if c.Get(ctx, client.ObjectKey{Name: kruise.MutatingConfigName}, m) == nil {
			var hooks []admissionregistrationv1.MutatingWebhook
			if json.Unmarshal([]byte(m.Annotations[kruise.TemplateAnnotation]), &hooks) == nil && len(hooks) != len(m.Webhooks) {
				m.Webhooks = hooks
				if c.Update(ctx, m) == nil {
					restored.Add(1)
				}
			}
		}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if c.Get(ctx, client.ObjectKey{Name: kruise.ValidatingConfigName}, v) == nil {
			var hooks []admissionregistrationv1.ValidatingWebhook
			if json.Unmarshal([]byte(v.Annotations[kruise.TemplateAnnotation]), &hooks) == nil && len(hooks) != len(v.Webhooks) {
				v.Webhooks = hooks
				if c.Update(ctx, v) == nil {
					restored.Add(1)
				}
			}
		}
	}
}

// hooksOf lists a configuration's entries in .webhooks and in its template.
func hooksOf(t *testing.T, c client.Client, name string) (live, tmpl []string) {
	t.Helper()
	var obj client.Object = &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if name == kruise.MutatingConfigName {
		obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, h := range o.Webhooks {
			live = append(live, h.Name)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, h := range o.Webhooks {
			live = append(live, h.Name)
		}
	}
	tmpl, ok := kruise.TemplateNames(obj.GetAnnotations())
	if !ok {
		t.Fatalf("%s: template does not parse", name)
	}
	return live, tmpl
}

// keeperRole is the ClusterRole probeshim-kruise-keeper as cluster/deploy/rbac.yaml ships it.
func keeperRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile("../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err == nil && role.Kind == "ClusterRole" && role.Name == kruise.KeeperRole {
			return &role
		}
	}
	t.Fatalf("no ClusterRole %s in cluster/deploy/rbac.yaml", kruise.KeeperRole)
	return nil
}

// keeperMay asks the API server's authorizer whether the deployment's service account may update
// Kruise's validating webhook configuration.
func keeperMay(t *testing.T, c client.Client) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + probeshimNS + ":probeshim-cluster",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + probeshimNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations",
			Name: kruise.ValidatingConfigName, Verb: "update"}}}
	if err := c.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func kruiseManager(gates string) *appsv1.Deployment {
	labels := map[string]string{"control-plane": "controller-manager"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kruise.DefaultNamespace, Name: kruise.ManagerName},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "manager", Image: "example.com/kruise-manager:v1.9.0",
				Args: []string{"--enable-leader-election", "--metrics-addr=:8080", "--feature-gates=" + gates}}}}}}}
}

func kruiseDaemon() *appsv1.DaemonSet {
	labels := map[string]string{"control-plane": "daemon"}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: kruise.DefaultNamespace, Name: kruise.DaemonName},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "daemon", Image: "example.com/kruise-daemon:v1.9.0"}}}}}}
}

// TestHandover runs the whole story against Kruise-shaped state: detection with Kruise live,
// the handover refused while its gates are on, done (and done again) once they are off, the
// entries kept removed while a kruise-manager stand-in re-applies its template and a Kruise
// upgrade puts them back, and the rollback.
func TestHandover(t *testing.T) {
	testenv.Require(t, env, skip)
	ctx := context.Background()
	c := kruiseClient(t)
	mustCreate(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kruise.DefaultNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeshimNS}})
	ns := env.Namespace(t)

	// Objects as Kruise left them, written before its webhooks exist (they would deny them).
	ppm := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "game", Finalizers: []string{kruise.FinalizerPPM}},
		Spec: v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "healthy", ContainerName: "main", PodConditionType: "game.example.com/healthy",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}}}}}}}}
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("node")}, // Kruise's: no owner reference
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "game-0", Namespace: ns, UID: "uid-game-0",
			Probes: []v1alpha1.ContainerProbe{{Name: "game#healthy", ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}}}}}}}}}}
	crrInFlight := &v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart-main",
		Labels: map[string]string{v1alpha1.LabelCRRNodeName: npp.Name, v1alpha1.LabelCRRPodUID: "uid-game-0", v1alpha1.LabelCRRActive: "true",
			v1alpha1.LabelCRRExecutor: v1alpha1.CRRExecutorKruise},
		Finalizers: []string{kruise.FinalizerCRRUnready}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "game-0", Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}},
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail, UnreadyGracePeriodSeconds: ptr.To[int64](5)}}}
	mustCreate(t, c, ppm, npp, crrInFlight)
	crrInFlight.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "main", Phase: v1alpha1.ContainerRecreateRequestRecreating}}}
	if err := c.Status().Update(ctx, crrInFlight); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, kruiseMutating(), kruiseValidating(), kruiseManager("PodProbeMarkerGate=true"), kruiseDaemon())
	t.Cleanup(func() {
		for _, o := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.MutatingConfigName}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kruise.ValidatingConfigName}}} {
			_ = c.Delete(context.Background(), o)
		}
	})
	// Kruise's live webhook denies PodProbeMarker writes: the state the handover starts from.
	cur := &v1alpha1.PodProbeMarker{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ppm), cur); err != nil {
		t.Fatal(err)
	}
	cur.Labels = map[string]string{"example.com/touched": "yes"}
	if err := c.Update(ctx, cur); err == nil {
		t.Fatal("a PodProbeMarker update passed Kruise's live webhook entry: the stand-in does not reproduce Kruise")
	}

	// A replica that does not lead looks (its webhooks ask it) but publishes nothing: the status
	// says what the leader saw, whose controllers are the ones that hold.
	follower := &kruise.Detector{Reader: c, Writer: c, Recorder: events.NewFakeRecorder(100), Namespace: probeshimNS,
		Period: time.Hour, Elected: make(chan struct{})}
	follower.Look(ctx)
	if follower.Holds(kruise.WorkProbes) == "" {
		t.Error("a replica that does not lead does not hold probes with Kruise live")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: probeshimNS, Name: kruise.StatusConfigMap}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a replica that does not lead published the status ConfigMap (get: %v)", err)
	}

	// Detection: every Kruise part that acts on probes and requests is reported and holds.
	reg := prometheus.NewRegistry()
	told := events.NewFakeRecorder(100)
	det := &kruise.Detector{Reader: c, Writer: c, Recorder: told, Namespace: probeshimNS, Period: time.Hour}
	if err := det.NewGauge(reg); err != nil {
		t.Fatal(err)
	}
	if why := det.Holds(kruise.WorkProbes); why == "" {
		t.Error("probes not held before the first look")
	}
	obs := det.Look(ctx)
	var parts []string
	for _, cf := range obs.Conflicts() {
		parts = append(parts, string(cf.Work)+":"+cf.Kruise)
	}
	want := []string{
		"probes:webhook vpodprobemarker.kb.io",
		"probes:kruise-manager PodProbeMarker and NodePodProbe controllers",
		"probes:kruise-daemon prober",
		"crr:webhook mcontainerrecreaterequest.kb.io",
		"crr:kruise-manager ContainerRecreateRequest controller",
		"crr:kruise-daemon ContainerRecreateRequest executor",
	}
	if !slices.Equal(parts, want) {
		t.Errorf("conflicts\n got %q\nwant %q", parts, want)
	}
	if det.Holds(kruise.WorkProbes) == "" || det.Holds(kruise.WorkCRR) == "" {
		t.Errorf("Kruise live, but holds are probes=%q crr=%q", det.Holds(kruise.WorkProbes), det.Holds(kruise.WorkCRR))
	}
	if n := testutil.CollectAndCount(reg, "probeshim_kruise_conflict"); n != len(want) {
		t.Errorf("%d conflict gauges, want %d", n, len(want))
	}
	status := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: probeshimNS, Name: kruise.StatusConfigMap}, status); err != nil {
		t.Fatalf("status ConfigMap: %v", err)
	}
	if !strings.Contains(status.Data["conflicts"], "kruise-daemon prober") || !strings.Contains(status.Data["holds"], "probes: held") {
		t.Errorf("status ConfigMap does not say what conflicts: %v", status.Data)
	}
	// A second replica sees the same: the change is told once, by the replica that wrote it.
	told2 := events.NewFakeRecorder(100)
	det2 := &kruise.Detector{Reader: c, Writer: c, Recorder: told2, Namespace: probeshimNS, Period: time.Hour}
	det2.Look(ctx)
	if n, n2 := len(told.Events), len(told2.Events); n != len(want) || n2 != 0 {
		t.Errorf("conflict events: %d from the replica that wrote the status, %d from the other; want %d and 0", n, n2, len(want))
	}

	// The handover is refused while Kruise's gates are on, and changes nothing.
	var out bytes.Buffer
	opts := kruise.HandoverOptions{Probes: true, CRR: true, Namespace: probeshimNS, Secrets: secretsOf(t), Out: &out}
	err := kruise.Handover(ctx, c, opts)
	if err == nil || !strings.Contains(err.Error(), "PodProbeMarkerGate") || !strings.Contains(err.Error(), "KruiseDaemon") {
		t.Fatalf("handover with the gates on: %v", err)
	}
	if live, _ := hooksOf(t, c, kruise.ValidatingConfigName); !slices.Contains(live, kruise.WebhookPPM) {
		t.Fatal("a refused handover removed a webhook entry")
	}

	// The deployment's right to edit Kruise's configurations is the keeper role's, bound by the
	// handover only: none yet.
	mustCreate(t, c, keeperRole(t))
	if keeperMay(t, c) {
		t.Fatal("the deployment may edit Kruise's webhook configurations before any handover")
	}

	// Kruise's admin turns the gates off: the chart drops kruise-daemon, the manager restarts.
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kruise.DefaultNamespace, Name: kruise.ManagerName}, dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Args[2] = "--feature-gates=KruiseDaemon=false"
	if err := c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kruiseDaemon()); err != nil {
		t.Fatal(err)
	}

	// kruise-manager keeps re-applying its template meanwhile.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var restored atomic.Int32
	go reapply(rctx, c, 300*time.Millisecond, &restored)

	// Dry run: says what it would do, does nothing.
	out.Reset()
	dry := opts
	dry.DryRun = true
	if err := kruise.Handover(ctx, c, dry); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if !strings.Contains(out.String(), "(dry run) removed webhook vpodprobemarker.kb.io") {
		t.Errorf("dry run output:\n%s", out.String())
	}
	if live, _ := hooksOf(t, c, kruise.ValidatingConfigName); !slices.Contains(live, kruise.WebhookPPM) {
		t.Fatal("the dry run removed a webhook entry")
	}

	out.Reset()
	if err := kruise.Handover(ctx, c, opts); err != nil {
		t.Fatalf("handover: %v\n%s", err, out.String())
	}
	t.Logf("handover:\n%s", out.String())
	if !keeperMay(t, c) || !strings.Contains(out.String(), "bound ClusterRole probeshim-kruise-keeper to probeshim-system/probeshim-cluster") {
		t.Error("after the handover the deployment may not edit Kruise's webhook configurations, or the output does not say it may")
	}
	for _, cfg := range []struct{ name, gone, kept string }{
		{kruise.ValidatingConfigName, kruise.WebhookPPM, "vpodeviction.kb.io"},
		{kruise.MutatingConfigName, kruise.WebhookCRR, "mpod.kb.io"},
	} {
		live, tmpl := hooksOf(t, c, cfg.name)
		if slices.Contains(live, cfg.gone) || slices.Contains(tmpl, cfg.gone) {
			t.Errorf("%s still has %s: webhooks %v, template %v", cfg.name, cfg.gone, live, tmpl)
		}
		if !slices.Contains(live, cfg.kept) || !slices.Contains(tmpl, cfg.kept) {
			t.Errorf("%s lost %s, which other Kruise features need: webhooks %v, template %v", cfg.name, cfg.kept, live, tmpl)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ppm), cur); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(cur.Finalizers, kruise.FinalizerPPM) {
		t.Errorf("PodProbeMarker keeps Kruise's finalizer: %v", cur.Finalizers)
	}
	gotCRR := &v1alpha1.ContainerRecreateRequest{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crrInFlight), gotCRR); err != nil {
		t.Fatal(err)
	}
	if _, ok := gotCRR.Labels[v1alpha1.LabelCRRExecutor]; ok || slices.Contains(gotCRR.Finalizers, kruise.FinalizerCRRUnready) {
		t.Errorf("in-flight request not adopted: labels %v finalizers %v", gotCRR.Labels, gotCRR.Finalizers)
	}
	if gotCRR.Labels[v1alpha1.LabelCRRActive] != "true" || gotCRR.Status.Phase != v1alpha1.ContainerRecreateRequestRecreating {
		t.Errorf("adoption changed the request's state: labels %v phase %s", gotCRR.Labels, gotCRR.Status.Phase)
	}
	for _, line := range []string{"NodePodProbe " + npp.Name + ": Kruise's", "ContainerRecreateRequest " + ns + "/restart-main, in flight",
		"CRD podprobemarkers.apps.kruise.io: "} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}
	// With the entry gone, PodProbeMarker writes pass again.
	testpoll.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ppm), cur); err != nil {
			return err
		}
		cur.Labels = map[string]string{"example.com/touched": "yes"}
		return c.Update(ctx, cur)
	})

	// Again: idempotent, and the record still holds what the first run removed.
	out.Reset()
	if err := kruise.Handover(ctx, c, opts); err != nil {
		t.Fatalf("second handover: %v", err)
	}
	if !strings.Contains(out.String(), "webhook vpodprobemarker.kb.io: already absent") || strings.Contains(out.String(), "adopted") {
		t.Errorf("second run did something:\n%s", out.String())
	}
	rec, _, err := kruise.ReadRecord(ctx, c, probeshimNS)
	if err != nil || len(rec[kruise.WorkProbes].Entry) == 0 || len(rec[kruise.WorkCRR].Template) == 0 {
		t.Fatalf("handover record after two runs: %v %v", rec, err)
	}

	// The detector now sees nothing that conflicts, and says so.
	det.Look(ctx)
	if p, r := det.Holds(kruise.WorkProbes), det.Holds(kruise.WorkCRR); p != "" || r != "" {
		t.Errorf("after the handover still held: probes=%q crr=%q", p, r)
	}
	if v := testutil.ToFloat64(det.GaugeFor("kruise-daemon prober", "node service prober", kruise.WorkProbes)); v != 0 {
		t.Errorf("gauge of a gone conflict = %v", v)
	}

	// Removing from .webhooks alone does not stick: kruise-manager rebuilds from the template.
	before := restored.Load()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: kruise.ValidatingConfigName}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks = v.Webhooks[:1]
	if err := c.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	testpoll.Eventually(t, 5*time.Second, func() error {
		if restored.Load() == before {
			return fmt.Errorf("the kruise-manager stand-in has not rebuilt .webhooks")
		}
		return nil
	})
	if live, _ := hooksOf(t, c, kruise.ValidatingConfigName); slices.Contains(live, kruise.WebhookPPM) {
		t.Fatal("the template rebuilt the removed entry")
	}

	// A Kruise upgrade writes both back: the keeper removes them again.
	up := kruiseValidating()
	if err := c.Get(ctx, client.ObjectKey{Name: kruise.ValidatingConfigName}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks, v.Annotations = up.Webhooks, up.Annotations
	if err := c.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	kctx, kstop := context.WithCancel(ctx)
	keeper := &kruise.Keeper{Client: c, Namespace: probeshimNS, Period: 100 * time.Millisecond}
	kdone := make(chan error, 1)
	go func() { kdone <- keeper.Start(kctx) }()
	testpoll.Eventually(t, 10*time.Second, func() error {
		live, tmpl := hooksOf(t, c, kruise.ValidatingConfigName)
		if slices.Contains(live, kruise.WebhookPPM) || slices.Contains(tmpl, kruise.WebhookPPM) {
			return fmt.Errorf("still there: webhooks %v template %v", live, tmpl)
		}
		return nil
	})
	kstop()
	if err := <-kdone; err != nil {
		t.Error(err)
	}

	// Rollback waits for the requests probeshim carries out.
	out.Reset()
	back := opts
	back.Rollback = true
	if err := kruise.Handover(ctx, c, back); err == nil || !strings.Contains(err.Error(), "restart-main") {
		t.Fatalf("rollback with a request in flight: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crrInFlight), gotCRR); err != nil {
		t.Fatal(err)
	}
	delete(gotCRR.Labels, v1alpha1.LabelCRRActive) // completed
	if err := c.Update(ctx, gotCRR); err != nil {
		t.Fatal(err)
	}
	if err := kruise.Handover(ctx, c, back); err != nil {
		t.Fatalf("rollback: %v\n%s", err, out.String())
	}
	t.Logf("rollback:\n%s", out.String())
	for _, cfg := range []struct{ name, hook string }{{kruise.ValidatingConfigName, kruise.WebhookPPM}, {kruise.MutatingConfigName, kruise.WebhookCRR}} {
		live, tmpl := hooksOf(t, c, cfg.name)
		if !slices.Contains(live, cfg.hook) || !slices.Contains(tmpl, cfg.hook) {
			t.Errorf("rollback did not restore %s in %s: webhooks %v template %v", cfg.hook, cfg.name, live, tmpl)
		}
	}
	if rec, cm, err := kruise.ReadRecord(ctx, c, probeshimNS); err != nil || cm != nil || len(rec) != 0 {
		t.Errorf("handover record after the rollback: %v %v %v", rec, cm, err)
	}
	if keeperMay(t, c) || !strings.Contains(out.String(), "removed ClusterRoleBinding probeshim-kruise-keeper") {
		t.Errorf("after the rollback the deployment may still edit Kruise's webhook configurations:\n%s", out.String())
	}
	// Again: nothing more to do.
	out.Reset()
	if err := kruise.Handover(ctx, c, back); err != nil || !strings.Contains(out.String(), "probes: not handed over") {
		t.Errorf("second rollback: %v\n%s", err, out.String())
	}
	// And the detector holds again once Kruise's gates are back on.
	dep.Spec.Template.Spec.Containers[0].Args[2] = "--feature-gates=KruiseDaemon=true"
	if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Args[2] = "--feature-gates=KruiseDaemon=true"
	if err := c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	det.Look(ctx)
	if det.Holds(kruise.WorkProbes) == "" || det.Holds(kruise.WorkCRR) == "" {
		t.Errorf("after the rollback and the gates on, not held: probes=%q crr=%q", det.Holds(kruise.WorkProbes), det.Holds(kruise.WorkCRR))
	}
}
