// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/shim/config"
)

// The steps of up, in the order up runs them.

// bringUpRig starts the rig with the demo's images and makes the clients for it.
func (d *demo) bringUpRig(ctx context.Context) error {
	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	d.root = root
	d.section("Bringing up the rig: etcd, kube-apiserver, controller-manager, scheduler, kube-proxy, containerd and a kubelet in a network namespace of their own")
	fmt.Println("   (the first run builds the registry and the images' programs with go build: minutes on a cold Go build cache)")
	r, err := rig.Start(ctx, rig.Config{Logf: printf, Images: announced(images())})
	if err != nil {
		return err
	}
	d.r = r
	// From here on a failure leaves the rig up for a look; `make demo-down` removes it.
	d.c, err = framework.NewCluster(r, v1alpha1.AddToScheme)
	return err
}

// deployClusterPart deploys probeshim-cluster from cluster/deploy and shows its pods.
func (d *demo) deployClusterPart(ctx context.Context) error {
	d.section("Deploying the cluster part (probeshim-cluster) from cluster/deploy: kubectl apply -k cluster/deploy")
	if err := cluster.Deploy(ctx, d.c, printf); err != nil {
		return err
	}
	d.show(ctx, "get", "-n", cluster.Namespace, "deployment,pods", "-o", "wide")
	return nil
}

// startNodeService builds the node service into the demo's folder and runs it on the rig's node
// as the kubelet's identity, detached: it keeps running after the demo, until `demo down` (or
// any teardown of the rig) stops it. Its status socket is the default one, so that `probeshim
// status` needs no flag, as on a node of the package.
func (d *demo) startNodeService(ctx context.Context) error {
	r := d.r
	d.section("Running the node service (probeshim) on node " + r.NodeName() + ", as the kubelet's identity system:node:" + r.NodeName())
	fmt.Println("   building it: go build " + nodesvc.Package)
	t0 := time.Now()
	bin, err := nodesvc.Build(ctx, d.root, demoDir(r.Dir()))
	if err != nil {
		return err
	}
	fmt.Printf("   built in %s\n", time.Since(t0).Round(100*time.Millisecond))
	user, groups := framework.NodeServiceUser(r.NodeName())
	kubeconfig, err := r.Kubeconfig(user, groups...)
	if err != nil {
		return err
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
		Logf:             printf,
	})
	if err != nil {
		return err
	}
	fmt.Printf("   probeshim runs as pid %d, logging to %s\n", d.svc.Pid(), d.svc.LogPath())
	return nil
}

// applyExample applies docs/examples/game-servers and waits until the marker has marked its three
// game servers idle.
func (d *demo) applyExample(ctx context.Context) error {
	d.section("Applying the example: three game servers and the PodProbeMarker \"idle\" (" + exampleDir + ")")
	d.show(ctx, "apply", "-f", filepath.Join(d.root, exampleDir))
	pods, err := d.waitGames(ctx, "three idle game servers", 3, func(p *corev1.Pod) bool { return idle(p) })
	if err != nil {
		return err
	}
	d.printPods(pods)
	d.printNodeStatus(ctx)
	d.busy = pods[0].Name
	return nil
}

// startMatch makes one game server busy (its idle file gone) and waits until the marker says so.
func (d *demo) startMatch(ctx context.Context) error {
	return d.playOnBusy(ctx, "A match starts", []string{"rm", "/tmp/idle"}, "busy", 3,
		func(p *corev1.Pod) bool { return idle(p) == (p.Name != d.busy) })
}

// scaleDown scales the game servers to one: the pod-deletion-cost keeps the busy one.
func (d *demo) scaleDown(ctx context.Context) error {
	busy := d.busy
	d.section("Scaling the game servers down to one: kubectl scale deployment/" + gamesDeploy + " --replicas=1 (the ReplicaSet removes the pods with the lowest pod-deletion-cost first)")
	d.show(ctx, "scale", "-n", gamesNS, "deployment/"+gamesDeploy, "--replicas=1")
	pods, err := d.waitGames(ctx, "only "+busy+" left", 1, func(p *corev1.Pod) bool { return p.Name == busy })
	if err != nil {
		return err
	}
	d.printPods(pods)
	fmt.Printf("   The busy server %s kept running its match; the idle ones were removed.\n", busy)
	return nil
}

// endMatch makes the busy game server idle again and waits until the marker says so.
func (d *demo) endMatch(ctx context.Context) error {
	return d.playOnBusy(ctx, "The match is over", []string{"sh", "-c", `echo "match over" > /tmp/idle`}, "idle again", 1,
		func(p *corev1.Pod) bool { return idle(p) })
}

// playOnBusy runs cmd in the busy game server, waits until its n game servers all satisfy want
// (the marker's view of it), and shows the pods, the busy one's conditions and its probe events.
func (d *demo) playOnBusy(ctx context.Context, title string, cmd []string, what string, n int, want func(*corev1.Pod) bool) error {
	busy := d.busy
	d.section(title + " on " + busy + ": kubectl exec " + busy + " -- " + shellQuote(cmd))
	if _, _, err := d.c.Exec(ctx, gamesNS, busy, container, cmd...); err != nil {
		return err
	}
	pods, err := d.waitGames(ctx, busy+" "+what, n, want)
	if err != nil {
		return err
	}
	d.printPods(pods)
	d.printConditions(pods, busy)
	d.printProbeEvents(ctx, busy)
	return nil
}

// shellQuote writes cmd as a user would type it.
func shellQuote(cmd []string) string {
	out := make([]string, len(cmd))
	for i, a := range cmd {
		if strings.ContainsAny(a, " \"'>") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// ---- what the steps use ----

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
