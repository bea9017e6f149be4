// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/certs"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/kruise"
	clustermetrics "github.com/probeshim/probeshim/cluster/metrics"
	probeshimwebhook "github.com/probeshim/probeshim/cluster/webhook"
	"github.com/probeshim/probeshim/internal/build/metricsref"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

const namespace = "probeshim-system"

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// deployed reads cluster/deploy/<file> as the API server would get it, with every webhook
// pointed at url+path instead of the Service (there is no Service routing in envtest).
func deployed(t *testing.T, scheme *runtime.Scheme, file, url string) []client.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifest(t, scheme, b, url)
}

// decodeManifest decodes the objects of a manifest, every webhook pointed at url+path.
func decodeManifest(t *testing.T, scheme *runtime.Scheme, b []byte, url string) []client.Object {
	t.Helper()
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []client.Object
	redirect := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u := url + *cc.Service.Path
		cc.URL, cc.Service = &u, nil
	}
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch o := obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				redirect(&o.Webhooks[i].ClientConfig)
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				redirect(&o.Webhooks[i].ClientConfig)
			}
		}
		out = append(out, obj.(client.Object))
	}
}

// startAPIServer starts etcd and kube-apiserver with the CRDs, stopped when the test ends; it
// skips the test without the binaries.
func startAPIServer(t *testing.T) (*rest.Config, *kubebin.Env) {
	t.Helper()
	assets, err := kubebin.Dir()
	if err != nil {
		t.Skip("integration test skipped: " + err.Error())
	}
	logf.SetLogger(logr.Discard())
	env := kubebin.Environment(assets, kubebin.CRDs())
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() }) // a stop that fails leaves processes that die with the test
	return cfg, env
}

// The command as deployed, against a real API server, as its service account with the RBAC of
// the manifests: it bootstraps its certificate and CA bundles, writes the policy parameters,
// becomes ready, serves admission over TLS the API server verifies with that bundle, wins the
// leader election and runs the controllers, whose NodePodProbe writes the policy lets through.
func TestRun(t *testing.T) {
	cfg, env := startAPIServer(t)

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{namespace, heartbeat.LeaseNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	webhookPort, probePort := freePort(t), freePort(t)
	for _, f := range []string{"rbac.yaml", "webhooks.yaml", "admission-policies.yaml"} {
		for _, o := range deployed(t, scheme, f, fmt.Sprintf("https://127.0.0.1:%d", webhookPort)) {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	var o options
	o.bind(flagSet())
	o.namespace = namespace
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	o.metricsAddr = metricsAddr // secure by default
	o.probeAddr = fmt.Sprintf("127.0.0.1:%d", probePort)
	o.webhookHost, o.webhookPort = "127.0.0.1", webhookPort
	o.certDir = t.TempDir()
	o.certExtraNames = "127.0.0.1"
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	self := o.serviceAccountUsername
	// The command runs as its service account with exactly the RBAC of cluster/deploy/rbac.yaml.
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: self, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace}}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, sa, o) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("run did not stop")
		}
	}()

	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	waitFor(t, 30*time.Second, done, func() error {
		resp, err := http.Get(readyz)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", resp.StatusCode, body)
		}
		return nil
	})

	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.secretName}, secret); err != nil {
		t.Fatal(err)
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: o.webhookConfigName}, mwc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, secret.Data[certs.KeyCABundle]) {
		t.Error("the mutating webhook's caBundle is not the Secret's CA")
	}
	params := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: probeshimwebhook.PolicyParamsName}, params); err != nil {
		t.Fatal(err)
	}
	if params.Data[probeshimwebhook.ParamClusterUsername] != self || params.Data[probeshimwebhook.ParamNodeUserPrefix] != "probeshim:node:" {
		t.Errorf("policy parameters %v", params.Data)
	}

	// OpenKruise detection ran as the service account (its RBAC reads every Kruise object it
	// looks for: a forbidden read would hold all work off) and found nothing to hold off. The
	// leader publishes it, once elected.
	kst := &corev1.ConfigMap{}
	waitFor(t, 30*time.Second, done, func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: kruise.StatusConfigMap}, kst)
	})
	if kst.Data["holds"] != "probes: probeshim acts; crr: probeshim acts" {
		t.Errorf("OpenKruise status %v", kst.Data)
	}

	// /metrics answers only callers the API server authenticates and authorizes for it.
	checkMetrics(t, ctx, c, "https://"+metricsAddr+"/metrics")
	checkMetricsReference(t)

	// Admission through the command's own server and certificate.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0",
			Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "main", Image: "busybox",
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].LivenessProbe != nil || pod.Annotations[v1alpha1.AnnotationContainerProbeContext] == "" {
		t.Fatalf("liveness probe not moved: %+v", pod.Annotations)
	}

	// The controllers run on the leader: a Ready node gets its NodePodProbe (written as the
	// identity the policy trusts), and the opted-in pod's liveness probe lands in it.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.9", PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, done, func() error {
		npp := &v1alpha1.NodePodProbe{}
		if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, npp); err != nil {
			return err
		}
		for _, pp := range npp.Spec.PodProbes {
			for _, p := range pp.Probes {
				if pp.UID == string(pod.UID) && p.Name == v1alpha1.LivenessProbeName("main") {
					return nil
				}
			}
		}
		return fmt.Errorf("no liveness probe in %+v", npp.Spec)
	})

	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.leaderElectionID}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Error("no leader")
	}

	checkHeartbeatRelay(t, ctx, c, env.Environment, webhookPort, o)
	checkSelftest(t, ctx, c, cfg)
}

// checkMetrics scrapes url anonymously (401), as a service account RBAC does not allow (403) and
// as one bound to the shipped ClusterRole probeshim-metrics-reader (200, with the deployment's
// own metrics: every admission policy installed).
func checkMetrics(t *testing.T, ctx context.Context, c client.Client, url string) {
	t.Helper()
	token := func(sa string) string {
		t.Helper()
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}}); err != nil {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{}
		if err := c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}}, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, other := token("scraper"), token("other")
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "probeshim-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "scraper"}}}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed; the caller is what is checked
	get := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, 20*time.Second, nil, func() error { // the metrics server starts beside the others
		if code, body := get(""); code == 0 {
			return errors.New(body)
		}
		return nil
	})
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape: %d %.200s, want 401", code, body)
	}
	if code, body := get(other); code != http.StatusForbidden {
		t.Errorf("scrape by a service account without probeshim-metrics-reader: %d %.200s, want 403", code, body)
	}
	poll.Eventually(t, 20*time.Second, func() error { // RBAC is seen a moment after it is written
		code, body := get(scraper)
		// The command registers the policy check's and the decider's metrics on the registry
		// the manager serves.
		if code == http.StatusOK && strings.Contains(body, "\nprobeshim_admission_policies_missing 0\n") &&
			strings.Contains(body, "\nprobeshim_decider_config_valid ") && strings.Contains(body, "\nprobeshim_decider_rate_limit_tokens ") {
			return nil
		}
		return fmt.Errorf("scrape by probeshim-metrics-reader: %d %.300s", code, body)
	})
}

// checkMetricsReference checks that every metric of probeshim's own the command registered on the
// registry it serves is in the reference (cluster/metrics, docs/metrics.md).
func checkMetricsReference(t *testing.T) {
	t.Helper()
	ref := metricsref.NewRegistry()
	if err := clustermetrics.Describe(ref); err != nil {
		t.Fatal(err)
	}
	fams, err := ref.Families()
	if err != nil {
		t.Fatal(err)
	}
	names, err := metricsref.Names(ctrlmetrics.Registry.(prometheus.Collector))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "probeshim_") && !slices.ContainsFunc(fams, func(f metricsref.Family) bool { return f.Name == n }) {
			t.Errorf("%s is registered on /metrics but not in cluster/metrics.Describe", n)
		}
	}
}

// waitFor is poll.Eventually that gives up at once when Run returned.
func waitFor(t *testing.T, timeout time.Duration, done <-chan error, f func() error) {
	t.Helper()
	poll.Eventually(t, timeout, func() error {
		select {
		case rerr := <-done:
			t.Fatalf("run stopped: %v", rerr)
		default:
		}
		return f()
	})
}

func TestOptions(t *testing.T) {
	var o options
	fs := flagSet()
	o.bind(fs)
	if err := fs.Parse([]string{"--namespace=ops", "--cert-mode=external"}); err != nil {
		t.Fatal(err)
	}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if o.serviceAccountUsername != "system:serviceaccount:ops:probeshim-cluster" {
		t.Errorf("default username %q", o.serviceAccountUsername)
	}
	if o.nodeServiceGrace != heartbeat.DefaultGrace {
		t.Errorf("default --node-service-grace %s", o.nodeServiceGrace)
	}
	o.nodeServiceGrace = 10 * time.Second
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "--node-service-grace 10s: want at least 20s") {
		t.Errorf("grace shorter than two renew periods: %v", err)
	}
	o.nodeServiceGrace = heartbeat.DefaultGrace
	o.certMode = "sometimes"
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "--cert-mode") {
		t.Errorf("bad cert mode: %v", err)
	}
}

func flagSet() *flag.FlagSet { return flag.NewFlagSet("probeshim-cluster", flag.ContinueOnError) }

// The Deployment in cluster/deploy passes flags this command has, and agrees with the other
// manifests on names.
func TestDeploymentArgs(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	var dep *appsv1.Deployment
	for _, o := range deployed(t, scheme, "deployment.yaml", "") {
		if d, ok := o.(*appsv1.Deployment); ok {
			dep = d
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in deployment.yaml")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	var o options
	fs := flagSet()
	o.bind(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the Deployment's args do not parse: %v", err)
	}
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + dep.Namespace + ":" + dep.Spec.Template.Spec.ServiceAccountName; o.serviceAccountUsername != want {
		t.Errorf("--service-account-username %s, want the pod's own %s", o.serviceAccountUsername, want)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == o.certDir
	}
	if !mounted {
		t.Errorf("--webhook-cert-dir %s is not a mounted volume (the root filesystem is read-only)", o.certDir)
	}
	if *dep.Spec.Replicas != 2 || !o.leaderElect {
		t.Errorf("replicas %d, leader election %v", *dep.Spec.Replicas, o.leaderElect)
	}
}
