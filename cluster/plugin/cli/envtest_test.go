// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cli_test

// The plugin's tests run each subcommand as kubectl would, with --kubeconfig, against a real
// kube-apiserver and etcd (envtest) with the apps.kruise.io CRDs and probeshim's PodProbeMarker
// webhooks (their entries of cluster/deploy/webhooks.yaml, served by cluster/webhook's handlers).
// Neither the cluster part's controllers nor a node service run: the tests write what those would
// (labels, Leases, NodePodProbe status, conditions, events, ConfigMaps, request status).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/cluster/plugin"
	"github.com/probeshim/probeshim/cluster/plugin/cli"
	probeshimwebhook "github.com/probeshim/probeshim/cluster/webhook"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var testEnv struct {
	// now is the plugin's clock: ages are measured from it, so the tests write times before it.
	now        time.Time
	skip       string
	cfg        *rest.Config
	c          client.Client
	kubeconfig string
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	testEnv.now = time.Now().Truncate(time.Second)
	logf.SetLogger(logr.Discard())
	dir, err := kubebin.Dir()
	if err != nil {
		testEnv.skip = err.Error()
		return m.Run()
	}
	stop, err := start(dir)
	if stop != nil {
		defer stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	return m.Run()
}

func start(dir string) (func(), error) {
	mutating, validating, err := markerWebhooks(filepath.Join("..", "..", "deploy", "webhooks.yaml"))
	if err != nil {
		return nil, err
	}
	env := kubebin.Environment(dir, kubebin.CRDs())
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1",
		MutatingWebhooks: mutating, ValidatingWebhooks: validating}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	stop := func() {
		cancel()
		if err := <-errc; err != nil {
			fmt.Fprintln(os.Stderr, "the webhook server stopped with:", err)
		}
		_ = env.Stop()
	}
	if testEnv.c, err = client.New(cfg, client.Options{Scheme: plugin.Scheme()}); err != nil {
		errc <- nil
		return stop, err
	}
	testEnv.cfg = cfg
	wo := env.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	srv.Register(probeshimwebhook.PathPodProbeMarker, &admission.Webhook{Handler: &probeshimwebhook.PodProbeMarkerValidator{Reviewer: testEnv.c}})
	srv.Register(probeshimwebhook.PathPodProbeMarkerDefaults, &admission.Webhook{Handler: probeshimwebhook.PodProbeMarkerDefaulter{}})
	go func() { errc <- srv.Start(ctx) }()
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	if err := poll.Until(ctx, 20*time.Second, "the webhook server", func(context.Context) (bool, string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only "is it up"
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", conn.Close()
	}); err != nil {
		return stop, err
	}
	if err := testEnv.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plugin.DefaultClusterNamespace}}); err != nil {
		return stop, err
	}
	kc, err := os.MkdirTemp("", "kubectl-probeshim-")
	if err != nil {
		return stop, err
	}
	testEnv.kubeconfig = filepath.Join(kc, "kubeconfig")
	prev := stop
	stop = func() { prev(); _ = os.RemoveAll(kc) }
	return stop, writeKubeconfig(testEnv.kubeconfig, cfg)
}

// markerWebhooks are the PodProbeMarker entries of the deployed webhook configurations; the
// others would call handlers these tests do not serve.
func markerWebhooks(file string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	notForMarkers := func(rules []admissionregistrationv1.RuleWithOperations) bool {
		return !slices.ContainsFunc(rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return slices.Contains(r.Resources, "podprobemarkers")
		})
	}
	trimPath := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.Service != nil && cc.Service.Path != nil {
			p := strings.TrimPrefix(*cc.Service.Path, "/") // envtest joins "https://host:port/" and the path
			cc.Service.Path = &p
		}
	}
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, c); err != nil {
				return nil, nil, err
			}
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return notForMarkers(w.Rules) })
			for i := range c.Webhooks {
				trimPath(&c.Webhooks[i].ClientConfig)
			}
			mutating = append(mutating, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, c); err != nil {
				return nil, nil, err
			}
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return notForMarkers(w.Rules) })
			for i := range c.Webhooks {
				trimPath(&c.Webhooks[i].ClientConfig)
			}
			validating = append(validating, c)
		}
	}
	if len(mutating) == 0 || len(validating) == 0 {
		return nil, nil, fmt.Errorf("%s: no PodProbeMarker webhooks", file)
	}
	return mutating, validating, nil
}

// writeKubeconfig writes the kubeconfig of cfg, context namespace "default".
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

func needEnv(t *testing.T) {
	t.Helper()
	if testEnv.skip != "" {
		t.Skip("integration test skipped: " + testEnv.skip)
	}
}

// kubectl runs `kubectl probeshim args...` with the test's kubeconfig and stdin.
func kubectl(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(&cli.Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut},
		PollInterval: 50 * time.Millisecond, Now: func() time.Time { return testEnv.now }})
	cmd.SetArgs(append([]string{"--kubeconfig", testEnv.kubeconfig}, args...))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := testEnv.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// create creates obj and deletes it when the test ends: Nodes and NodePodProbes are cluster-wide,
// and status reads them all.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := testEnv.c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = testEnv.c.Delete(context.Background(), obj) })
}

func contains(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
}
