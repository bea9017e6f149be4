// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

const selftestUsage = `usage: probeshim-cluster selftest [--namespace <namespace>] [--timeout <duration>]

Checks that the cluster part serves, as the Helm chart's test (helm test) runs it: the API server serves
the CRDs' resources (podprobemarkers, nodepodprobes, containerrecreaterequests of apps.kruise.io/v1alpha1),
and the webhooks answer: a server-side dry run of a PodProbeMarker with an invalid annotation goes through
the mutating webhook and is refused by the validating webhook with its message (a dry run stores nothing).
Tries again until both hold or the timeout passes (the deployment may still be starting); exits 0 when
they hold, 1 saying what does not. The kubeconfig's user (in the test, the ServiceAccount
probeshim-selftest) needs create on podprobemarkers in the namespace.
`

// selftestMarker is what the dry run creates: valid but for its annotation, which only the
// validating webhook checks (a CRD schema cannot see metadata.annotations).
func selftestMarker(ns string) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probeshim-selftest",
			Annotations: map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: "selftest-invalid"}},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/selftest": "none"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "selftest", ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded,
					Labels: map[string]string{"example.com/selftest": "ok"}}}}},
		},
	}
}

// selftestResources are what the CRDs serve.
var selftestResources = []string{"podprobemarkers", "nodepodprobes", "containerrecreaterequests"}

func selftestSubcommand() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != "selftest" {
		return 0, false
	}
	return runSelftest(context.Background(), os.Args[2:], os.Stdout, os.Stderr, ctrl.GetConfig), true
}

func runSelftest(ctx context.Context, args []string, out, errOut io.Writer, cfg func() (*rest.Config, error)) int {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "probeshim-system"
	}
	fs.StringVar(&ns, "namespace", ns, "where the dry run creates its PodProbeMarker")
	timeout := fs.Duration("timeout", time.Minute, "how long to try")
	if helpAsked(args) {
		fmt.Fprint(out, selftestUsage+"\nFlags:\n")
		fs.SetOutput(out)
		fs.PrintDefaults()
		return 0
	}
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprint(errOut, selftestUsage)
		return 2
	}
	rc, err := cfg()
	if err != nil {
		fmt.Fprintln(errOut, "loading the kubeconfig:", err)
		return 1
	}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	checks := []struct {
		name  string
		check func(context.Context) (string, error)
	}{
		{"CRDs", func(context.Context) (string, error) { return crdsServed(disco) }},
		{"webhooks", func(ctx context.Context) (string, error) { return webhookRefuses(ctx, c, ns) }},
	}
	for _, ch := range checks {
		for {
			msg, err := ch.check(ctx)
			if err == nil {
				fmt.Fprintf(out, "ok: %s: %s\n", ch.name, msg)
				break
			}
			select {
			case <-ctx.Done():
				fmt.Fprintf(out, "FAILED: %s: %v\n", ch.name, err)
				return 1
			case <-time.After(2 * time.Second):
			}
		}
	}
	return 0
}

// crdsServed: discovery lists a CRD's resource only once the CRD is established.
func crdsServed(disco discovery.DiscoveryInterface) (string, error) {
	gv := v1alpha1.SchemeGroupVersion.String()
	list, err := disco.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return "", fmt.Errorf("the API server does not serve %s: %w", gv, err)
	}
	var missing []string
	for _, r := range selftestResources {
		if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r }) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("the API server does not serve %s of %s (are the CRDs installed?)", strings.Join(missing, ", "), gv)
	}
	return "the API server serves " + strings.Join(selftestResources, ", ") + " of " + gv, nil
}

// webhookRefuses dry-runs the create of selftestMarker: the validating webhook must refuse it,
// naming the annotation.
func webhookRefuses(ctx context.Context, c client.Client, ns string) (string, error) {
	err := c.Create(ctx, selftestMarker(ns), client.DryRunAll)
	switch {
	case err == nil:
		return "", errors.New("a PodProbeMarker with an invalid " + v1alpha1.AnnotationOnNodeServiceSilent +
			" annotation was admitted (dry run, nothing stored): is probeshim's ValidatingWebhookConfiguration installed?")
	case strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), v1alpha1.AnnotationOnNodeServiceSilent):
		return "the webhook refused an invalid PodProbeMarker (dry run): " + err.Error(), nil
	case strings.Contains(err.Error(), "failed calling webhook"):
		return "", fmt.Errorf("the webhooks do not answer: %w", err)
	default:
		return "", fmt.Errorf("the dry run of an invalid PodProbeMarker: %w", err)
	}
}
