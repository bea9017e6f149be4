// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/kruise"
)

const kruiseUsage = `usage: probeshim-cluster kruise handover --probes|--crr [--dry-run] [--rollback] [flags]

Hands PodProbeMarker probing (--probes) and/or ContainerRecreateRequests (--crr) over from
OpenKruise to probeshim, or back (--rollback). Turn Kruise's feature gate off first
(PodProbeMarkerGate=false for --probes, KruiseDaemon=false for --crr). Its last step marks the
CRDs of the three kinds helm.sh/resource-policy=keep, on the objects and in Kruise's Helm release,
so that uninstalling Kruise keeps them and their objects. Idempotent. Uses the kubeconfig
($KUBECONFIG, --kubeconfig, or in-cluster).
`

// runKruise is the "kruise" subcommand; it returns the exit code.
func runKruise(ctx context.Context, args []string, out, errOut io.Writer, cfg func() (*rest.Config, error)) int {
	if helpAsked(args) {
		fmt.Fprint(out, kruiseUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "handover" {
		fmt.Fprint(errOut, kruiseUsage)
		return 2
	}
	fs := flag.NewFlagSet("kruise handover", flag.ContinueOnError)
	fs.SetOutput(errOut)
	o := kruise.HandoverOptions{Out: out}
	fs.BoolVar(&o.Probes, "probes", false, "hand over PodProbeMarkers, NodePodProbes and their pod conditions")
	fs.BoolVar(&o.CRR, "crr", false, "hand over ContainerRecreateRequests")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would be done, change nothing")
	fs.BoolVar(&o.Rollback, "rollback", false, "give the work back to Kruise: restore its webhook entries, stop keeping them removed")
	fs.StringVar(&o.Namespace, "namespace", "probeshim-system", "probeshim's namespace (the handover record)")
	fs.StringVar(&o.KruiseNamespace, "kruise-namespace", kruise.DefaultNamespace, "Kruise's namespace (kruise-manager, kruise-daemon)")
	fs.StringVar(&o.ServiceAccount, "service-account", "probeshim-cluster", "the deployment's service account, in --namespace: bound to the ClusterRole "+kruise.KeeperRole+" while work is handed over")
	fs.Usage = func() { fmt.Fprint(fs.Output(), kruiseUsage+"\nFlags:\n"); fs.PrintDefaults() }
	if helpAsked(args[1:]) {
		fs.SetOutput(out)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	rc, err := cfg()
	if err != nil {
		fmt.Fprintln(errOut, "loading the kubeconfig:", err)
		return 1
	}
	c, err := client.New(rc, client.Options{Scheme: kruiseScheme()})
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	o.Secrets = func(ns string) typedcorev1.SecretInterface { return cs.CoreV1().Secrets(ns) }
	if err := kruise.Handover(ctx, c, o); err != nil {
		fmt.Fprintln(errOut, "kruise handover:", err)
		return 1
	}
	return 0
}

func kruiseScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// kruiseSubcommand runs "probeshim-cluster kruise ..." when asked; ok is false otherwise.
func kruiseSubcommand() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != "kruise" {
		return 0, false
	}
	return runKruise(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdout, os.Stderr, ctrl.GetConfig), true
}
