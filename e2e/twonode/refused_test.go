// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// Node B's identities — the kubelet's (system:node:<B>) and the node service's dedicated one
// (probeshim:node:<B>) — may write the status of B's NodePodProbe and of requests for B's pods,
// and are refused for node A's; and the other way round. The writes are dry runs: admission
// decides them in full, nothing is stored.
func (s *suite) testRefused(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 3*time.Minute)

	// A request for a pod on node A, for the request status writes.
	p := framework.NewPod(ns, "target", framework.Shell(appContainer, appScript))
	p.Spec.NodeName = s.a.Name()
	p = s.c.WaitForPodReady(t, s.c.CreatePod(t, p), waitPodReady)
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: p.Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: appContainer}}},
	}
	if err := s.c.Client.Create(ctx, crr); err != nil {
		t.Fatal(err)
	}
	if got := crr.Labels[v1alpha1.LabelCRRNodeName]; got != s.a.Name() {
		t.Fatalf("request %s is labelled for node %q, want %s", crr.Name, got, s.a.Name())
	}
	// The status as it is, and a message: a status the schema accepts, so admission decides.
	if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), crr); err != nil {
		t.Fatal(err)
	}
	phase := crr.Status.Phase
	if phase == "" {
		phase = v1alpha1.ContainerRecreateRequestPending
	}
	crrPatch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"status":{"phase":%q,"message":"example.com: written by the test"}}`, phase)))
	nppPatch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"podProbeStatuses":null}}`))
	dry := &client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{DryRun: []string{metav1.DryRunAll}}}

	for _, id := range []struct {
		name string
		user func(node string) (string, []string)
	}{{"kubelet identity", framework.NodeServiceUser}, {"dedicated identity", framework.DedicatedNodeUser}} {
		as, bs := s.nodeClient(t, s.a, id.user), s.nodeClient(t, s.b, id.user)
		for _, c := range []struct {
			who    client.Client
			whom   *rig.Node
			name   string
			refuse bool
		}{
			{bs, s.a, "B writes A's", true},
			{as, s.b, "A writes B's", true},
			{bs, s.b, "B writes its own", false},
			{as, s.a, "A writes its own", false},
		} {
			npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: c.whom.Name()}}
			err := c.who.Status().Patch(ctx, npp, nppPatch, dry)
			checkRefusal(t, id.name+": NodePodProbe status: "+c.name, err, c.refuse, "may not write the status of NodePodProbe "+c.whom.Name())
		}
		// Nor the spec, of any NodePodProbe.
		for _, who := range []client.Client{as, bs} {
			npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: s.a.Name()}}
			err := who.Patch(ctx, npp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podProbes":null}}`)),
				&client.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			checkRefusal(t, id.name+": NodePodProbe spec", err, true, "")
		}
		err := bs.Status().Patch(ctx, crr.DeepCopy(), crrPatch, dry)
		checkRefusal(t, id.name+": request status: B writes A's", err, true, "only its node ("+s.a.Name()+")")
		err = as.Status().Patch(ctx, crr.DeepCopy(), crrPatch, dry)
		checkRefusal(t, id.name+": request status: A writes its own", err, false, "")
	}

	// Node A carries the request out; node B never touched it.
	if _, err := s.c.WaitForPod(ctx, ns, p.Name, waitRestart, "restarted once", func(p *corev1.Pod) bool {
		return restarts(p, appContainer) == 1
	}); err != nil {
		t.Fatalf("%v\n%s", err, s.explain(p))
	}
}

// nodeClient is a client with node n's identity as user names it, issued by the rig's CA.
func (s *suite) nodeClient(t testing.TB, n *rig.Node, user func(node string) (string, []string)) client.Client {
	t.Helper()
	name, groups := user(n.Name())
	cfg, err := s.c.Rig.RESTConfigFor(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: s.c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// checkRefusal checks that err is a refusal (Forbidden) whose message holds msg when refuse is
// set, and no error at all otherwise.
func checkRefusal(t testing.TB, what string, err error, refuse bool, msg string) {
	t.Helper()
	switch {
	case refuse && err == nil:
		t.Errorf("%s: accepted, want it refused", what)
	case refuse && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg)):
		t.Errorf("%s: %v, want a refusal saying %q", what, err, msg)
	case !refuse && err != nil:
		t.Errorf("%s: %v, want it accepted", what, err)
	}
}
