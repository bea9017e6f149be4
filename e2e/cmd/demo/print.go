// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/server"
)

// What up prints: tables of the game servers, the node service's status, the shell to look
// further in and the hints for it.

// printPods is a kubectl-style table of the game servers with what the marker put on them.
func (d *demo) printPods(pods []corev1.Pod) {
	fmt.Printf("\n   pods in namespace %s: label %s, annotation %s, condition %s\n\n", gamesNS, labelIdle, annotationCost, conditionIdle)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREADY\tSTATUS\tGAMESERVER-IDLE\tPOD-DELETION-COST\tIDLE-CONDITION\tMESSAGE")
	for i := range pods {
		p := &pods[i]
		ready, total := 0, len(p.Status.ContainerStatuses)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
		}
		status, msg := "<none>", ""
		if c := condition(p, conditionIdle); c != nil {
			status, msg = string(c.Status), c.Message
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", p.Name, ready, total, p.Status.Phase,
			orNone(p.Labels[labelIdle]), orNone(p.Annotations[annotationCost]), status, oneLine(msg))
	}
	tw.Flush()
}

// printConditions shows the pod's conditions as the kubelet and probeshim set them.
func (d *demo) printConditions(pods []corev1.Pod, name string) {
	for i := range pods {
		p := &pods[i]
		if p.Name != name {
			continue
		}
		fmt.Printf("\n   conditions of pod %s (%s is probeshim's, the others the kubelet's)\n\n", name, conditionIdle)
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tSTATUS\tLAST-TRANSITION\tMESSAGE")
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.LastTransitionTime.Format(time.TimeOnly), orNone(oneLine(c.Message)))
		}
		tw.Flush()
	}
}

// printProbeEvents is a kubectl-style table of the probe events of a pod (`kubectl events
// --for pod/NAME` shows them among all the others).
func (d *demo) printProbeEvents(ctx context.Context, pod string) {
	evs, err := d.c.Events(ctx, gamesNS, pod)
	if err != nil {
		fmt.Printf("   (events: %v)\n", err)
		return
	}
	fmt.Printf("\n   probe events of pod %s (all its events: kubectl -n %s events --for pod/%s)\n\n", pod, gamesNS, pod)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tFROM\tMESSAGE")
	for _, e := range evs {
		if e.Reason != v1alpha1.EventReasonProbeSucceeded && e.Reason != v1alpha1.EventReasonProbeFailed {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		from := e.ReportingController
		if from == "" {
			from = e.Source.Component
		}
		fmt.Fprintf(tw, "%s ago\t%s\t%s\t%s\t%s\n", time.Since(at).Round(time.Second), e.Type, e.Reason, orNone(from), oneLine(e.Message))
	}
	tw.Flush()
}

// printNodeStatus shows what the node service probes, from its status socket (`probeshim status`).
// It waits (a little) for the first renewal of the heartbeat lease: until then the status says
// "NOT renewing", which at start-up is no fault.
func (d *demo) printNodeStatus(ctx context.Context) {
	var st *server.Status
	err := framework.WaitFor(ctx, 30*time.Second, "the node service's lease renewed", func(ctx context.Context) (bool, string, error) {
		s, err := d.svc.Status(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		st = s
		return s.Heartbeat == nil || s.Heartbeat.Renewing, fmt.Sprintf("%+v", s.Heartbeat), nil
	})
	fmt.Printf("\n$ probeshim status        # %s\n", filepath.Join(demoDir(d.r.Dir()), "probeshim"))
	if st == nil {
		fmt.Printf("   (failed: %v)\n", err)
		return
	}
	_ = server.WriteStatus(os.Stdout, st)
}

// shell is the command line that opens a shell inside the rig's netns with the rig's kubectl and
// the demo's probeshim first on PATH, so that `kubectl get nodes` and `probeshim status` work
// there as typed.
func (d *demo) shell() string {
	return rig.ShellLine(d.r.NetNSPath(), d.r.AdminKubeconfig(), d.r.KubeBin(), demoDir(d.r.Dir()))
}

// checkShell runs the commands the hints name in the shell they print: it fails when that
// shell finds another kubectl or probeshim than the demo's, or either does not answer.
func (d *demo) checkShell(ctx context.Context) error {
	script := "command -v kubectl probeshim && kubectl get nodes -o name && probeshim status >/dev/null"
	out, err := exec.CommandContext(ctx, "bash", "-c", d.shell()+" -c '"+script+"'").CombinedOutput()
	if err != nil {
		return fmt.Errorf("the shell the demo prints (%s): %s: %w\n%s", d.shell(), script, err, out)
	}
	want := []string{filepath.Join(d.r.KubeBin(), "kubectl"), filepath.Join(demoDir(d.r.Dir()), "probeshim"), "node/" + d.r.NodeName()}
	if got := strings.Fields(string(out)); !slices.Equal(got, want) {
		return fmt.Errorf("the shell the demo prints (%s) says %q, want %q", d.shell(), got, want)
	}
	return nil
}

// printHandHints ends up: how to look further by hand, with the busy game server's name.
func (d *demo) printHandHints() {
	r, pod := d.r, d.busy
	reg := rig.Registry
	fmt.Printf(`
== Done in %s. Everything keeps running; look further by hand.

The cluster lives inside the network namespace %s. Open a shell there, with KUBECONFIG
set and the rig's kubectl and the demo's probeshim first on PATH:

    %s

or run single commands from here:

    export KUBECONFIG=%s
    nsenter --net=%s %s -n %s get pods -L %s

Things to try in that shell:

`, time.Since(d.t0).Round(time.Second), r.NetNSPath(), d.shell(),
		r.AdminKubeconfig(), r.NetNSPath(), filepath.Join(r.KubeBin(), "kubectl"), gamesNS, labelIdle)
	printCommands([][2]string{
		{"kubectl -n " + gamesNS + " get pods -L " + labelIdle, "which servers are idle"},
		{"kubectl -n " + gamesNS + " exec " + pod + " -- rm /tmp/idle", "a match starts: watch the label go"},
		{"kubectl -n " + gamesNS + " scale deployment/" + gamesDeploy + " --replicas=3", "more servers, marked within seconds"},
		{"kubectl -n " + gamesNS + " events --for pod/" + pod, "KruiseProbeSucceeded / KruiseProbeFailed among the rest"},
		{"kubectl -n " + gamesNS + " get podprobemarker idle -o yaml", "the marker; status.matchedPods"},
		{"kubectl get nodepodprobe " + r.NodeName() + " -o yaml", "the node's probes and their results"},
		{"kubectl -n " + cluster.Namespace + " logs deployment/" + cluster.Deployment, "the cluster part's log"},
	})
	fmt.Printf("\nThe node service (not under systemd here; pid in %s):\n\n", nodesvc.PidFile(demoDir(r.Dir())))
	printCommands([][2]string{
		{"probeshim status", "what it probes, its lease; no flag: its status socket is the default, " + config.DefaultStatusSocket},
		{"less " + nodeServiceLog(r.Dir()), "its log (a node installed from the package logs to journald)"},
	})
	fmt.Printf(`
The cluster's registry, %s inside the netns, holds the images the demo runs and is containerd's
mirror of docker.io (busybox:1.36 is %s/library/busybox:1.36). Push an image of your own there and
run it in a pod as image: %s/me/app:1 with the default imagePullPolicy (IfNotPresent). With crane
(build it here: go build -o /usr/local/bin/crane github.com/google/go-containerregistry/cmd/crane),
in that shell:

`, reg, reg, reg)
	printCommands([][2]string{
		{"crane catalog " + reg, "what it holds (crane ls " + reg + "/library/busybox: the tags)"},
		{"crane copy " + reg + "/library/busybox:1.36 " + reg + "/me/app:1", "a name of your own for an image it holds"},
		{"crane append -b " + reg + "/library/busybox:1.36 -f files.tar.gz -t " + reg + "/me/app:1", "busybox plus your files"},
		{"crane push app.tar " + reg + "/me/app:1", "an image saved as a tarball"},
	})
	fmt.Println("\nStop everything: make demo-down")
}

// printCommands prints commands, each with a comment, the comments aligned.
func printCommands(lines [][2]string) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "    %s\t# %s\n", l[0], l[1])
	}
	tw.Flush()
}

// oneLine fits a probe's output (which often ends in a newline) into a table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
