// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command demo shows probeshim working end to end on the test rig (`make demo`, `make
// demo-down`):
//
//	demo up     bring the rig up, run the node service on its node, deploy the cluster part
//	            from cluster/deploy, apply docs/examples/game-servers, flip a game server
//	            busy and idle and show what changes; the rig and the node service keep running
//	demo down   stop the node service and tear the rig down
//
// The Kubernetes binaries come from $PROBESHIM_KUBE_BIN (make demo sets it).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/server"
)

// The example (docs/examples/game-servers) as the demo reads it.
const (
	exampleDir     = "docs/examples/game-servers"
	gamesNS        = "games"
	gamesSelector  = "app=gameserver"
	gamesDeploy    = "gameserver"
	container      = "server"
	labelIdle      = "gameserver-idle"
	annotationCost = "controller.kubernetes.io/pod-deletion-cost"
	conditionIdle  = "game.example.com/idle"
	// busyboxImage is what the example's Deployment runs. The rig reaches no registry outside: the
	// demo builds a static busybox image and the rig pushes it to its own registry, containerd's
	// mirror of docker.io (imagePullPolicy IfNotPresent).
	busyboxImage = "busybox:1.36"
	// healthAddr is the node service's health and metrics endpoint, inside the rig's netns.
	healthAddr = "127.0.0.1:19180"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: demo up|down")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: the rig needs root")
		os.Exit(1)
	}
	logf.SetLogger(logr.Discard()) // the framework's clients log nothing worth reading
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if os.Args[1] == "up" {
		err = up(ctx)
	} else {
		err = down(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// ---- up ----

type demo struct {
	r     *rig.Rig
	c     *framework.Cluster
	svc   *nodesvc.Service // the node service, detached: it outlives the demo
	root  string
	t0    time.Time
	step  int
	steps int
}

func up(ctx context.Context) error {
	d := &demo{t0: time.Now(), steps: 7}
	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	d.root = root

	d.section("Bringing up the rig: etcd, kube-apiserver, controller-manager, scheduler, kube-proxy, containerd and a kubelet in a network namespace of their own")
	fmt.Println("   (the first run builds the registry and the images' programs with go build: minutes on a cold Go build cache)")
	cfg := rig.Config{
		Logf:   func(format string, args ...any) { fmt.Printf("   "+format+"\n", args...) },
		Images: announced(images()),
	}
	r, err := rig.Start(ctx, cfg)
	if err != nil {
		return err
	}
	d.r = r
	// From here on a failure leaves the rig up for a look; `make demo-down` removes it.
	d.c, err = framework.NewCluster(r, v1alpha1.AddToScheme)
	if err != nil {
		return d.failed(err)
	}

	d.section("Deploying the cluster part (probeshim-cluster) from cluster/deploy: kubectl apply -k cluster/deploy")
	if err := cluster.Deploy(ctx, d.c, func(format string, args ...any) { fmt.Printf("   "+format+"\n", args...) }); err != nil {
		return d.failed(err)
	}
	d.show(ctx, "get", "-n", cluster.Namespace, "deployment,pods", "-o", "wide")

	d.section("Running the node service (probeshim) on node " + r.NodeName() + ", as the kubelet's identity system:node:" + r.NodeName())
	pid, err := d.startNodeService(ctx)
	if err != nil {
		return d.failed(err)
	}
	fmt.Printf("   probeshim runs as pid %d, logging to %s\n", pid, nodeServiceLog(r.Dir()))

	d.section("Applying the example: three game servers and the PodProbeMarker \"idle\" (" + exampleDir + ")")
	d.show(ctx, "apply", "-f", filepath.Join(d.root, exampleDir))
	pods, err := d.waitGames(ctx, "three idle game servers", 3, func(p *corev1.Pod) bool { return idle(p) })
	if err != nil {
		return d.failed(err)
	}
	d.printPods(pods)
	d.printNodeStatus(ctx)

	busy := pods[0].Name
	d.section("A match starts on " + busy + ": kubectl exec " + busy + " -- rm /tmp/idle")
	if _, _, err := d.c.Exec(ctx, gamesNS, busy, container, "rm", "/tmp/idle"); err != nil {
		return d.failed(err)
	}
	if pods, err = d.waitGames(ctx, busy+" busy", 3, func(p *corev1.Pod) bool { return idle(p) == (p.Name != busy) }); err != nil {
		return d.failed(err)
	}
	d.printPods(pods)
	d.printConditions(pods, busy)
	d.printProbeEvents(ctx, busy)

	d.section("Scaling the game servers down to one: kubectl scale deployment/" + gamesDeploy + " --replicas=1 (the ReplicaSet removes the pods with the lowest pod-deletion-cost first)")
	d.show(ctx, "scale", "-n", gamesNS, "deployment/"+gamesDeploy, "--replicas=1")
	if pods, err = d.waitGames(ctx, "only "+busy+" left", 1, func(p *corev1.Pod) bool { return p.Name == busy }); err != nil {
		return d.failed(err)
	}
	d.printPods(pods)
	fmt.Printf("   The busy server %s kept running its match; the idle ones were removed.\n", busy)

	d.section("The match on " + busy + " is over: kubectl exec " + busy + " -- sh -c 'echo \"match over\" > /tmp/idle'")
	if _, _, err := d.c.Exec(ctx, gamesNS, busy, container, "sh", "-c", `echo "match over" > /tmp/idle`); err != nil {
		return d.failed(err)
	}
	if pods, err = d.waitGames(ctx, busy+" idle again", 1, func(p *corev1.Pod) bool { return idle(p) }); err != nil {
		return d.failed(err)
	}
	d.printPods(pods)
	d.printConditions(pods, busy)
	d.printProbeEvents(ctx, busy)

	if err := d.checkShell(ctx); err != nil {
		return d.failed(err)
	}
	d.printHandHints(busy)
	return nil
}

// images are what the demo has the rig push to its registry besides the rig's own
// (rig.DefaultImages): the cluster part and the example's busybox.
func images() []rig.Image {
	return []rig.Image{cluster.Image(), {Ref: busyboxImage, Busybox: true, Cmd: []string{"sh"}}}
}

// announced has the images built from an index (the cluster part's: a go build) say when they
// are built, so that the minute it may take is not a silent one.
func announced(imgs []rig.Image) []rig.Image {
	for i := range imgs {
		build, ref := imgs[i].Index, imgs[i].Ref
		if build == nil {
			continue
		}
		imgs[i].Index = func(ctx context.Context, dir string) (v1.ImageIndex, error) {
			fmt.Printf("   demo: building the image %s (go build)\n", ref)
			t0 := time.Now()
			idx, err := build(ctx, dir)
			if err == nil {
				fmt.Printf("   demo: image %s built in %s\n", ref, time.Since(t0).Round(100*time.Millisecond))
			}
			return idx, err
		}
	}
	return imgs
}

// section starts the next numbered step.
func (d *demo) section(title string) {
	d.step++
	fmt.Printf("\n== %d/%d  %s   [%s]\n", d.step, d.steps, title, time.Since(d.t0).Round(time.Second))
}

// failed adds to err where to look: the rig stays up.
func (d *demo) failed(err error) error {
	return fmt.Errorf("%w\n\nThe rig is still up for a look (logs in %s, node service log %s); `make demo-down` removes it", err, d.r.LogDir(), nodeServiceLog(d.r.Dir()))
}

// show runs kubectl with args, echoing the command line and its output.
func (d *demo) show(ctx context.Context, args ...string) {
	fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
	out, err := d.c.Kubectl(ctx, args...)
	if err != nil {
		fmt.Printf("   (failed: %v)\n", err)
		return
	}
	fmt.Print(out)
}

// waitGames waits until there are n game server pods, running and ready, each as ok wants, and
// returns them sorted by name.
func (d *demo) waitGames(ctx context.Context, what string, n int, ok func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	t0 := time.Now()
	err := framework.WaitFor(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, string, error) {
		list, err := d.c.Kube.CoreV1().Pods(gamesNS).List(ctx, metav1.ListOptions{LabelSelector: gamesSelector})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = list.Items
		var seen []string
		good := 0
		for i := range pods {
			p := &pods[i]
			seen = append(seen, fmt.Sprintf("%s(ready=%t idle=%t)", p.Name, framework.PodReady(p), idle(p)))
			if p.DeletionTimestamp == nil && framework.PodReady(p) && ok(p) {
				good++
			}
		}
		return good == n && len(pods) == n, strings.Join(seen, " "), nil
	})
	if err != nil {
		return nil, err
	}
	fmt.Printf("   (%s after %s)\n", what, time.Since(t0).Round(100*time.Millisecond))
	sortPods(pods)
	return pods, nil
}

// idle reports whether the marker's Succeeded marks are on the pod.
func idle(p *corev1.Pod) bool {
	c := condition(p, conditionIdle)
	return p.Labels[labelIdle] == "true" && p.Annotations[annotationCost] == "-10" && c != nil && c.Status == corev1.ConditionTrue
}

func condition(p *corev1.Pod, typ string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func sortPods(pods []corev1.Pod) {
	for i := 1; i < len(pods); i++ {
		for j := i; j > 0 && pods[j].Name < pods[j-1].Name; j-- {
			pods[j], pods[j-1] = pods[j-1], pods[j]
		}
	}
}

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

func (d *demo) printHandHints(pod string) {
	r := d.r
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

// ---- the node service ----

// demoDir holds the node service's binary, config and pid file; it is inside the rig's folder,
// so the teardown removes it.
func demoDir(rigDir string) string        { return filepath.Join(rigDir, "demo") }
func nodeServiceLog(rigDir string) string { return filepath.Join(rigDir, "logs", "probeshim.log") }

// startNodeService builds the node service into the demo's folder and runs it on the rig's node
// as the kubelet's identity, detached: it keeps running after the demo, until `demo down` (or
// any teardown of the rig) stops it. Its status socket is the default one, so that `probeshim
// status` needs no flag, as on a node of the package.
func (d *demo) startNodeService(ctx context.Context) (int, error) {
	r := d.r
	fmt.Println("   building it: go build " + nodesvc.Package)
	t0 := time.Now()
	bin, err := nodesvc.Build(ctx, d.root, demoDir(r.Dir()))
	if err != nil {
		return 0, err
	}
	fmt.Printf("   built in %s\n", time.Since(t0).Round(100*time.Millisecond))
	user, groups := framework.NodeServiceUser(r.NodeName())
	kubeconfig, err := r.Kubeconfig(user, groups...)
	if err != nil {
		return 0, err
	}
	d.svc, err = nodesvc.Launch(ctx, r, nodesvc.Options{
		Bin:              bin,
		Node:             r.NodeName(),
		Kubeconfig:       kubeconfig,
		ContainerdSocket: r.ContainerdSocket(),
		Health:           healthAddr,
		Dir:              demoDir(r.Dir()),
		StatusSocket:     config.DefaultStatusSocket,
		Log:              nodeServiceLog(r.Dir()),
		Detach:           true,
		Logf:             func(format string, args ...any) { fmt.Printf("   "+format+"\n", args...) },
	})
	if err != nil {
		return 0, err
	}
	return d.svc.Pid(), nil
}

// ---- down ----

func down(ctx context.Context) error {
	cfg := rig.Config{Logf: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }}
	rigDir := strings.TrimSuffix(rig.StateFile(cfg), ".state.json")
	unlock, holder, err := tryLock(rigDir + ".lock")
	if err != nil {
		return err
	}
	if unlock == nil {
		return fmt.Errorf("the rig is in use by pid %s (a test run?): not tearing it down; try again when it is done", holder)
	}
	defer unlock()
	if err := nodesvc.StopDetached(demoDir(rigDir), func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }); err != nil {
		return err
	}
	// The demo's status socket, unless a service still answers on it.
	if c, err := net.DialTimeout("unix", config.DefaultStatusSocket, time.Second); err == nil {
		c.Close()
	} else {
		_ = os.Remove(config.DefaultStatusSocket)
	}
	if err := rig.Teardown(ctx, cfg); err != nil {
		return err
	}
	if left := rig.Leftovers(cfg); len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	fmt.Println("demo: the node service is stopped and the rig is gone")
	return nil
}

// tryLock takes the rig's lock without waiting. It returns unlock == nil and the holder's pid
// when another process holds it.
func tryLock(path string) (unlock func(), holder string, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, "", err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, strings.TrimSpace(string(b)), nil
		}
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, "", nil
}
