// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/cluster/plugin"
)

const explainUsage = `usage: probeshim-cluster explain <namespace>/<pod>

Prints what probeshim knows and decided about a pod (the same as kubectl probeshim explain): the
PodProbeMarkers of its namespace that select it and why, each probe's last result from its node's
NodePodProbe, whether it opted in to enhanced liveness and where it may be scheduled, whether a node
service runs its liveness probes now (condition probeshim.io/LivenessProtected), the decider's last
decision about it (condition probeshim.io/LivenessRestart), what the decider did to it (its restart
record) and its latest decisions (the events LivenessRestart, LivenessRestartHeld,
LivenessRestartDryRun, LivenessRestartFailed, and the condition's and scheduling's own), newest first.
It reads only; the kubeconfig's user needs get on the pod and list on events in its namespace, and what
else it may not read (markers, the Node, its NodePodProbe) is named at the end.
`

func explainSubcommand() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != "explain" {
		return 0, false
	}
	return runExplain(context.Background(), os.Args[2:], os.Stdout, os.Stderr, ctrl.GetConfig), true
}

func runExplain(ctx context.Context, args []string, out, errOut io.Writer, cfg func() (*rest.Config, error)) int {
	if helpAsked(args) {
		fmt.Fprint(out, explainUsage)
		return 0
	}
	ns, name, ok := strings.Cut(strings.Join(args, ""), "/")
	if len(args) != 1 || !ok || ns == "" || name == "" {
		fmt.Fprint(errOut, explainUsage)
		return 2
	}
	rc, err := cfg()
	if err != nil {
		fmt.Fprintln(errOut, "loading the kubeconfig:", err)
		return 1
	}
	c, err := client.New(rc, client.Options{Scheme: plugin.Scheme()})
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := plugin.Explain(ctx, c, ns, name, time.Now())
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ex.Text(out)
	return 0
}

// clientOf is a client of the cluster cfg's kubeconfig reaches, for the read-only subcommands.
func clientOf(cfg func() (*rest.Config, error)) (kubernetes.Interface, error) {
	rc, err := cfg()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}
