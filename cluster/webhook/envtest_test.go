// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

// The integration tests of this package run against a real kube-apiserver and etcd (envtest),
// with the handlers served over TLS and registered from the webhook configurations in
// cluster/deploy/webhooks.yaml, the ValidatingAdmissionPolicies from
// cluster/deploy/admission-policies.yaml and the RBAC from cluster/deploy/rbac*.yaml: what is
// tested is what is deployed.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1beta1"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

const (
	deployDir = "../deploy"
	// systemNamespace is the deployment's namespace in the manifests.
	systemNamespace = "probeshim-system"
	// nodeLeaseNamespace holds the node services' heartbeat Leases.
	nodeLeaseNamespace = "probeshim-node-lease"
	// clusterUser is the deployment's service account, as the manifests name it.
	clusterUser = "system:serviceaccount:probeshim-system:probeshim-cluster"
)

var (
	testEnv struct {
		skip   string // why the integration tests are skipped, "" when they run
		cfg    *rest.Config
		admin  client.Client
		scheme *runtime.Scheme
		calls  *callCounter
		// clientPKI signs the client certificate the API server presents to the webhooks;
		// webhookURL is where the webhook server listens ("https://host:port").
		clientPKI  *testPKI
		webhookURL string
	}
)

func needEnv(t *testing.T) {
	t.Helper()
	if testEnv.skip != "" {
		t.Skip("integration test skipped: " + testEnv.skip)
	}
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	assets, err := kubebin.Dir()
	if err != nil {
		testEnv.skip = err.Error()
		return m.Run()
	}
	stop, err := startEnv(assets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		if stop != nil {
			stop()
		}
		return 1
	}
	defer stop()
	return m.Run()
}

func startEnv(assets string) (func(), error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	testEnv.scheme = scheme

	objs, err := loadManifests(scheme, "webhooks.yaml", "admission-policies.yaml", "rbac.yaml", "rbac-nodes.yaml")
	if err != nil {
		return nil, err
	}
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	var others []client.Object
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				trimPath(o.Webhooks[i].ClientConfig.Service)
			}
			mutating = append(mutating, o)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				trimPath(o.Webhooks[i].ClientConfig.Service)
			}
			validating = append(validating, o)
		default:
			others = append(others, o)
		}
	}

	// The API server presents a client certificate to the webhooks, which answer only it
	// (ClientAuth, --webhook-client-ca-file).
	pki, err := newTestPKI()
	if err != nil {
		return nil, err
	}
	testEnv.clientPKI = pki
	pkiDir, err := os.MkdirTemp("", "probeshim-webhook-client-")
	if err != nil {
		return nil, err
	}
	admissionConfig, err := apiServerAdmissionConfig(pkiDir, pki)
	if err != nil {
		return nil, err
	}
	env := kubebin.Environment(assets, kubebin.CRDs())
	env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admissionConfig)
	// With the scheme, envtest points the conversion webhook of every CRD whose kinds convert
	// (ContainerRecreateRequest) at the local server, as cluster/deploy points it at the Service.
	env.Scheme = scheme
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{
		LocalServingHost:   "127.0.0.1",
		MutatingWebhooks:   mutating,
		ValidatingWebhooks: validating,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	stop := func() { _ = env.Stop(); _ = os.RemoveAll(pkiDir) }
	testEnv.cfg = cfg

	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return stop, err
	}
	testEnv.admin = admin

	ctx, cancel := context.WithCancel(context.Background())
	wo := env.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }}})
	testEnv.webhookURL = "https://" + net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	testEnv.calls = &callCounter{counts: map[string]int{}}
	Register(testEnv.calls.wrap(srv), admin, admin, Options{Namespaces: admin, Scheme: scheme,
		ClientAuth: &ClientAuth{CAs: poolOf(pki.ca), Names: []string{apiServerClientName}}})
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(ctx) }()
	stop = func() {
		cancel()
		if err := <-errc; err != nil {
			fmt.Fprintln(os.Stderr, "the webhook server stopped with:", err)
		}
		_ = env.Stop()
		_ = os.RemoveAll(pkiDir)
	}
	if err := waitTLS(net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort)), errc); err != nil {
		return stop, err
	}

	for _, ns := range []string{systemNamespace, nodeLeaseNamespace, "games"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return stop, err
		}
	}
	for _, o := range others {
		if err := admin.Create(ctx, o); err != nil {
			return stop, fmt.Errorf("creating %T %s from the manifests: %w", o, o.GetName(), err)
		}
	}
	return stop, nil
}

// trimPath drops the path's leading slash: envtest joins "https://host:port/" and the path.
func trimPath(s *admissionregistrationv1.ServiceReference) {
	if s != nil && s.Path != nil {
		p := strings.TrimPrefix(*s.Path, "/")
		s.Path = &p
	}
}

// loadManifests decodes the named files of cluster/deploy into typed objects.
func loadManifests(scheme *runtime.Scheme, files ...string) ([]client.Object, error) {
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	var out []client.Object
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, obj.(client.Object))
		}
	}
	return out, nil
}

func waitTLS(addr string, errc <-chan error) error {
	return poll.Until(context.Background(), 20*time.Second, "the webhook server", func(context.Context) (bool, string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only "is it up"
		if err == nil {
			return true, "", conn.Close()
		}
		select {
		case err := <-errc:
			return false, "", fmt.Errorf("webhook server stopped: %w", err)
		default:
		}
		return false, err.Error(), nil
	})
}

// callCounter counts the admission requests per path, to show which requests the webhook
// configurations send at all.
type callCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *callCounter) wrap(srv Server) Server { return counted{srv, c} }

func (c *callCounter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[path]
}

type counted struct {
	Server
	c *callCounter
}

func (s counted) Register(path string, h http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.c.mu.Lock()
		s.c.counts[path]++
		s.c.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
}

// as returns a client that impersonates user in groups (system:authenticated is added by the API
// server).
func as(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: testEnv.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant binds a ClusterRole of rules to user (in namespace ns, or cluster-wide when ns is "").
func grant(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("test-%s-%d", strings.NewReplacer(":", "-", "@", "-").Replace(user), time.Now().UnixNano())
	if err := testEnv.admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if strings.HasPrefix(user, "group:") {
		subj = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: strings.TrimPrefix(user, "group:")}}
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	var err error
	if ns == "" {
		err = testEnv.admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subj})
	} else {
		err = testEnv.admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subj})
	}
	if err != nil {
		t.Fatal(err)
	}
}
