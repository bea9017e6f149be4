// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package certs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

const (
	namespace = "probeshim-system"
	hooks     = "probeshim" // the configurations' name in cluster/deploy/webhooks.yaml
	// crrCRD converts through the deployment's Service (cluster/deploy's patch); foreignCRD
	// through another (as OpenKruise's next release converts through kruise-manager's).
	crrCRD     = "containerrecreaterequests.apps.kruise.io"
	foreignCRD = "widgets.example.com"
)

var testEnv struct {
	skip string
	c    client.Client
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	assets, err := kubebin.Dir()
	if err != nil {
		testEnv.skip = err.Error()
		return m.Run()
	}
	env := kubebin.Environment(assets)
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer env.Stop() //nolint:errcheck // the test is over: a stop that fails leaves processes that die with it
	if testEnv.c, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if err := testEnv.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The deployed webhook configurations, as they are before the deployment first runs (no
	// caBundle). Nothing in this test is admitted through them: no webhook server runs here, and
	// they only match pods that opted in, markers and NodePodProbes.
	if err := createManifest(ctx, "../deploy/webhooks.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{conversionCRD(crrCRD, "probeshim-webhook"), conversionCRD(foreignCRD, "kruise-webhook-service")} {
		if err := testEnv.c.Create(ctx, crd); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// conversionCRD is a CRD of two versions named name, converted by the webhook of service (in
// namespace, or kruise-system for another).
func conversionCRD(name, service string) *apiextensionsv1.CustomResourceDefinition {
	plural, group, _ := strings.Cut(name, ".")
	ns := namespace
	if service != "probeshim-webhook" {
		ns = "kruise-system"
	}
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "K" + plural},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true, Storage: true, Schema: schema},
				{Name: "v1beta1", Served: true, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: service, Path: ptr.To("/convert")}}}},
		},
	}
}

// conversionBundle is the caBundle of the CRD's conversion webhook.
func conversionBundle(t *testing.T, name string) []byte {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := testEnv.c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Conversion.Webhook.ClientConfig.CABundle
}

func createManifest(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := serializer.NewCodecFactory(clientgoscheme.Scheme).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := testEnv.c.Create(ctx, obj.(client.Object)); err != nil {
			return err
		}
	}
}

func needEnv(t *testing.T) {
	t.Helper()
	if testEnv.skip != "" {
		t.Skip("integration test skipped: " + testEnv.skip)
	}
}

// newManager returns a Manager for the deployed names, writing into its own directory.
func newManager(t *testing.T, secret string, now func() time.Time) *Manager {
	t.Helper()
	m, err := New(testEnv.c, testEnv.c, Options{
		Namespace: namespace, SecretName: secret, ServiceName: "probeshim-webhook",
		CertDir:                         t.TempDir(),
		MutatingWebhookConfigurations:   []string{hooks},
		ValidatingWebhookConfigurations: []string{hooks},
		ConversionCRDs:                  []string{crrCRD, foreignCRD},
		Now:                             now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func getSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := testEnv.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// caBundles returns the caBundle of every webhook in the deployed configurations and of the
// conversion webhook the deployment serves; the foreign CRD's must stay empty.
func caBundles(t *testing.T) [][]byte {
	t.Helper()
	ctx := context.Background()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := testEnv.c.Get(ctx, client.ObjectKey{Name: hooks}, mwc); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.c.Get(ctx, client.ObjectKey{Name: hooks}, vwc); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range mwc.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range vwc.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	if b := conversionBundle(t, foreignCRD); len(b) != 0 {
		t.Errorf("the CA bundle was set on %s, whose conversion webhook is another service's", foreignCRD)
	}
	return append(out, conversionBundle(t, crrCRD))
}

// checkServing verifies that m's directory holds the Secret's pair and that the certificate is
// trusted by every webhook's caBundle for the Service's name.
func checkServing(t *testing.T, m *Manager, s *corev1.Secret) {
	t.Helper()
	for _, f := range []string{KeyCert, KeyKey} {
		b, err := os.ReadFile(filepath.Join(m.opts.CertDir, f))
		if err != nil || !bytes.Equal(b, s.Data[f]) {
			t.Fatalf("%s in %s differs from the Secret (err %v)", f, m.opts.CertDir, err)
		}
	}
	certs, err := parseCerts(s.Data[KeyCert])
	if err != nil {
		t.Fatal(err)
	}
	bundles := caBundles(t)
	if len(bundles) == 0 {
		t.Fatal("no webhooks: ../deploy/webhooks.yaml was not loaded")
	}
	for i, b := range bundles {
		if !bytes.Equal(b, s.Data[KeyCABundle]) {
			t.Errorf("webhook %d: caBundle is not the Secret's ca.crt", i)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b)
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "probeshim-webhook.probeshim-system.svc",
			CurrentTime: m.opts.Now()}); err != nil {
			t.Errorf("webhook %d: the serving certificate does not verify: %v", i, err)
		}
	}
}

func TestBootstrapAndReuse(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	first := newManager(t, "probeshim-webhook-certs", nil)
	if first.ReadyCheck(nil) == nil {
		t.Fatal("ready before the first pass")
	}
	if err := first.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready after the first pass: %v", err)
	}
	s := getSecret(t, "probeshim-webhook-certs")
	if s.Type != corev1.SecretTypeTLS || len(s.Data) != 4 {
		t.Fatalf("secret type %s with %d keys", s.Type, len(s.Data))
	}
	checkServing(t, first, s)

	// A second start (a restart, the other replica) reuses what is there.
	second := newManager(t, "probeshim-webhook-certs", nil)
	if err := second.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if again := getSecret(t, "probeshim-webhook-certs"); again.ResourceVersion != s.ResourceVersion {
		t.Error("the second start rewrote the Secret")
	}
	checkServing(t, second, s)

	// Someone resets a caBundle (e.g. re-applies the manifests with a replace): the next pass puts it back.
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := testEnv.c.Get(ctx, client.ObjectKey{Name: hooks}, mwc); err != nil {
		t.Fatal(err)
	}
	mwc.Webhooks[0].ClientConfig.CABundle = nil
	if err := testEnv.c.Update(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	if err := first.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing(t, first, s)
}

// Two replicas starting at once on an empty namespace agree on one certificate.
func TestTwoReplicasRace(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	for round := range 3 {
		name := fmt.Sprintf("race-%d-%d", round, time.Now().UnixNano())
		a, b := newManager(t, name, nil), newManager(t, name, nil)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, m := range []*Manager{a, b} {
			wg.Go(func() { errs[i] = m.Ensure(ctx) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		s := getSecret(t, name)
		checkServing(t, a, s)
		checkServing(t, b, s)
	}
}

func TestRotation(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	name := fmt.Sprintf("rotating-%d", time.Now().UnixNano()) // fresh under -count
	start := time.Now()
	now := start
	clock := func() time.Time { return now }
	a, b := newManager(t, name, clock), newManager(t, name, clock)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	s0 := getSecret(t, name)
	ca0, _ := parseCerts(s0.Data[KeyCABundle])

	// Half a year on, nothing is due.
	now = start.Add(180 * 24 * time.Hour)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if getSecret(t, name).ResourceVersion != s0.ResourceVersion {
		t.Fatal("renewed too early")
	}

	// Past two thirds of the serving certificate's year: a renews it under the same CA; b picks the
	// new one up from the Secret on its next pass.
	now = start.Add(250 * 24 * time.Hour)
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	s1 := getSecret(t, name)
	if bytes.Equal(s1.Data[KeyCert], s0.Data[KeyCert]) {
		t.Fatal("serving certificate not renewed")
	}
	if !bytes.Equal(s1.Data[KeyCABundle], s0.Data[KeyCABundle]) {
		t.Error("the CA changed with a serving certificate renewal")
	}
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing(t, a, s1)
	checkServing(t, b, s1)

	// Past two thirds of the CA's ten years: a new CA, the old one stays trusted next to it, so
	// a replica still serving a certificate of the old CA keeps working until it catches up.
	now = start.Add(7 * 365 * 24 * time.Hour)
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := getSecret(t, name)
	cas, _ := parseCerts(s2.Data[KeyCABundle])
	if len(cas) != 2 || cas[0].Equal(ca0[0]) || !cas[1].Equal(ca0[0]) {
		t.Fatalf("bundle after CA rotation: %d CAs, want the new one then the old one", len(cas))
	}
	checkServing(t, b, s2)
	old, _ := parseCerts(s1.Data[KeyCert]) // what a still serves
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundles(t)[0])
	if _, err := old[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "probeshim-webhook.probeshim-system.svc",
		CurrentTime: start.Add(300 * 24 * time.Hour)}); err != nil {
		t.Errorf("the previous certificate is no longer trusted: %v", err)
	}
	if err := a.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	checkServing(t, a, s2)
}

// With cert-manager's cainjector annotation on a configuration, the deployment leaves the Secret
// and the bundles alone and only waits for the files.
func TestCertManagerPresent(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := testEnv.c.Get(ctx, client.ObjectKey{Name: hooks}, vwc); err != nil {
		t.Fatal(err)
	}
	vwc.Annotations = map[string]string{"cert-manager.io/inject-ca-from": namespace + "/probeshim-webhook"}
	if err := testEnv.c.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testEnv.c.Get(ctx, client.ObjectKey{Name: hooks}, vwc); err == nil {
			vwc.Annotations = nil
			_ = testEnv.c.Update(ctx, vwc)
		}
	}()

	m := newManager(t, "cert-manager-owned", nil)
	if err := m.Ensure(ctx); err == nil || m.ReadyCheck(nil) == nil {
		t.Fatal("ready without certificate files")
	}
	s := &corev1.Secret{}
	if err := testEnv.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "cert-manager-owned"}, s); err == nil {
		t.Fatal("created a Secret although cert-manager manages the certificate")
	}
	for _, f := range []string{KeyCert, KeyKey} {
		if err := os.WriteFile(filepath.Join(m.opts.CertDir, f), []byte("mounted by cert-manager"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ReadyCheck(nil); err != nil {
		t.Fatal(err)
	}
}

// A CRD's conversion bundle that cannot be set (an image upgraded before its RBAC) is logged and
// retried, but does not hold the webhook server: admission does not wait on the v1beta1 API.
func TestConversionBundleDoesNotHoldReadiness(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	forbidCRDs := forbidCRDPatch{testEnv.c}
	m, err := New(testEnv.c, forbidCRDs, Options{
		Namespace: namespace, SecretName: "probeshim-webhook-certs-rbac", ServiceName: "probeshim-webhook",
		CertDir: t.TempDir(), MutatingWebhookConfigurations: []string{hooks}, ValidatingWebhookConfigurations: []string{hooks},
		ConversionCRDs: []string{crrCRD},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(ctx); err != nil {
		t.Fatalf("a forbidden CRD patch failed the pass: %v", err)
	}
	if err := m.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready: %v", err)
	}
	s := getSecret(t, "probeshim-webhook-certs-rbac")
	for i, b := range caBundles(t)[:len(caBundles(t))-1] { // the webhook configurations'
		if !bytes.Equal(b, s.Data[KeyCABundle]) {
			t.Errorf("webhook %d: caBundle is not the Secret's ca.crt", i)
		}
	}
}

// forbidCRDPatch answers every CRD patch Forbidden, as the API server does without the RBAC rule.
type forbidCRDPatch struct{ client.Client }

func (f forbidCRDPatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return apierrors.NewForbidden(apiextensionsv1.Resource("customresourcedefinitions"), obj.GetName(), errors.New("no patch"))
	}
	return f.Client.Patch(ctx, obj, patch, opts...)
}
