// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

const nppWebhook = `admission webhook "nodepodprobes.probeshim.io" denied the request`

var testParams = PolicyParams{ClusterUsername: clusterUser, NodeGroup: "probeshim:nodes", NodeUserPrefix: "probeshim:node:"}

var paramsOnce sync.Once

// policyReady writes the policy parameters once and waits until the policies act on them.
func policyReady(t *testing.T) {
	t.Helper()
	needEnv(t)
	ctx := context.Background()
	paramsOnce.Do(func() {
		if err := EnsurePolicyParams(ctx, testEnv.admin, systemNamespace, testParams); err != nil {
			t.Fatal(err)
		}
		// A second write changes nothing (every replica runs it on every start).
		if err := EnsurePolicyParams(ctx, testEnv.admin, systemNamespace, testParams); err != nil {
			t.Fatal(err)
		}
	})
	// The cluster deployment can create a NodePodProbe once policy, parameters and RBAC are seen.
	poll.Eventually(t, 15*time.Second, func() error {
		err := clusterClient(t).Create(ctx, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "policy-ready"}})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

func clusterClient(t *testing.T) client.Client {
	return as(t, clusterUser, "system:serviceaccounts", "system:serviceaccounts:"+systemNamespace)
}

func kubelet(t *testing.T, node string) client.Client {
	return as(t, "system:node:"+node, "system:nodes")
}

func nppWith(name string, probes ...v1alpha1.ContainerProbe) *v1alpha1.NodePodProbe {
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(probes) > 0 {
		npp.Spec.PodProbes = []v1alpha1.PodProbe{{Name: "gs-0", Namespace: "games", UID: "uid-" + name, IP: "10.244.0.7", Probes: probes}}
	}
	return npp
}

func nppProbe(h corev1.ProbeHandler) v1alpha1.ContainerProbe {
	return v1alpha1.ContainerProbe{Name: "idle#up", ContainerName: "main", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h}}}
}

func statusPatch(uid string) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil,
		`{"status":{"podProbeStatuses":[{"name":"gs-0","namespace":"games","uid":%q,"probeStates":[{"name":"idle#up","state":"Succeeded"}]}]}}`, uid))
}

func TestNodePodProbeHostFields(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	c := clusterClient(t)
	hostHeader := func(v string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: v}}}}
	}
	cases := []struct {
		name  string
		h     corev1.ProbeHandler
		field string // "" = accepted
	}{
		{"tcpSocket host", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(22)}},
			"spec.podProbes[0].probes[0].probe.tcpSocket.host"},
		{"httpGet host", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}},
			"spec.podProbes[0].probes[0].probe.httpGet.host"},
		// A Host header only sets the header (prober.TestHTTPHostHeaderNeverRedirects).
		{"Host header naming a virtual host", hostHeader("game.example.com"), ""},
		{"Host header that is no host", hostHeader("a b"), "spec.podProbes[0].probes[0].probe.httpGet.httpHeaders[0].value"},
		{"Host header naming the pod's IP", hostHeader("10.244.0.7:8080"), ""},
		{"Host header naming the pod's IP in brackets", hostHeader("[::ffff:10.244.0.7]"), ""},
		{"Host header naming localhost", hostHeader("localhost"), ""},
		{"tcpSocket host naming the pod's loopback", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt32(22)}}, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, nppWith(fmt.Sprintf("host-%d", i), nppProbe(tc.h)))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), nppWebhook) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want the webhook to reject %s, got %v", tc.field, err)
			}
		})
	}

	// The other rules of the shared validation surface with their paths too.
	other := []struct {
		name  string
		mut   func(*v1alpha1.NodePodProbe)
		field string
	}{
		{"bad pod IP", func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].IP = "10.244.0" }, "spec.podProbes[0].IP"},
		{"bad container name", func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].Probes[0].ContainerName = "Main" },
			"spec.podProbes[0].probes[0].containerName"},
		{"no handler", func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[0].Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{}
		},
			"spec.podProbes[0].probes[0].probe"},
	}
	for i, tc := range other {
		t.Run(tc.name, func(t *testing.T) {
			npp := nppWith(fmt.Sprintf("other-%d", i), nppProbe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}))
			tc.mut(npp)
			err := c.Create(ctx, npp)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), nppWebhook) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want the webhook to reject %s, got %v", tc.field, err)
			}
		})
	}

	// An update that adds a host field is rejected too.
	npp := nppWith("host-update", nppProbe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}))
	if err := c.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	npp.Spec.PodProbes[0].Probes[0].Probe.TCPSocket.Host = "10.244.0.9"
	if err := c.Update(ctx, npp); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "tcpSocket.host") {
		t.Fatalf("update adding a host: %v", err)
	}
}

// The NodePodProbe policy: the spec is the cluster deployment's, the status the named node's.
func TestNodePodProbePolicy(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	cluster := clusterClient(t)
	tcp := nppProbe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}})
	for _, n := range []string{"node-a", "node-b"} {
		if err := cluster.Create(ctx, nppWith(n, tcp)); err != nil {
			t.Fatal(err)
		}
	}
	a := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	b := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}

	denied := func(t *testing.T, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Fatalf("want a denial, got %v", err)
		}
		if want != "" && !strings.Contains(err.Error(), want) {
			t.Fatalf("denial lacks %q: %v", want, err)
		}
	}

	t.Run("a node writes its own status", func(t *testing.T) {
		if err := kubelet(t, "node-a").Status().Patch(ctx, a, statusPatch("uid-node-a")); err != nil {
			t.Fatal(err)
		}
		if len(a.Status.PodProbeStatuses) != 1 {
			t.Fatalf("status not written: %+v", a.Status)
		}
	})
	t.Run("not another node's status", func(t *testing.T) {
		err := kubelet(t, "node-a").Status().Patch(ctx, b, statusPatch("uid-node-b"))
		denied(t, err, "user system:node:node-a may not write the status of NodePodProbe node-b: only node node-b may")
	})
	t.Run("not the spec", func(t *testing.T) {
		// RBAC stops a node before admission does.
		err := kubelet(t, "node-a").Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podProbes":null}}`)))
		denied(t, err, "")
	})
	t.Run("a dedicated node identity writes its own status, not another's", func(t *testing.T) {
		c := as(t, "probeshim:node:node-b", "probeshim:nodes")
		if err := c.Status().Patch(ctx, b, statusPatch("uid-node-b")); err != nil {
			t.Fatal(err)
		}
		denied(t, c.Status().Patch(ctx, a, statusPatch("uid-node-a")), "may not write the status of NodePodProbe node-a")
	})
	t.Run("a kubelet name without the kubelet group is no node", func(t *testing.T) {
		c := as(t, "system:node:node-a", "probeshim:nodes") // RBAC allows it through probeshim:nodes
		denied(t, c.Status().Patch(ctx, a, statusPatch("uid-node-a")), "may not write the status of NodePodProbe node-a")
	})
	t.Run("nobody else writes status", func(t *testing.T) {
		denied(t, cluster.Status().Patch(ctx, a, statusPatch("uid-node-a")), "") // RBAC stops it first
		denied(t, testEnv.admin.Status().Patch(ctx, a, statusPatch("uid-node-a")), "may not write the status of NodePodProbe node-a")
	})
	t.Run("an administrator may not write the spec", func(t *testing.T) {
		err := testEnv.admin.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podProbes":null}}`)))
		denied(t, err, "may not write the spec of NodePodProbe node-a: only the probeshim cluster deployment ("+clusterUser+") may")
		denied(t, testEnv.admin.Create(ctx, nppWith("node-c")), "may not write the spec of NodePodProbe node-c")
	})
	t.Run("anyone RBAC allows may change metadata", func(t *testing.T) {
		err := testEnv.admin.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"games"}}}`)))
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the cluster deployment writes the spec", func(t *testing.T) {
		if err := cluster.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podProbes":null}}`))); err != nil {
			t.Fatal(err)
		}
	})
}

func TestContainerRecreateRequestStatusPolicy(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	// The node-name label comes from the pod (crrPod runs on node-a): admission sets it and keeps
	// it, so a request without one cannot exist; the policy's message for that case is a fallback.
	onA := newCRR(crrPod(t, nil).Name, "main")
	if err := testEnv.admin.Create(ctx, onA); err != nil {
		t.Fatal(err)
	}
	phase := func(p string) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"phase":%q}}`, p))
	}

	if err := kubelet(t, "node-a").Status().Patch(ctx, onA, phase("Recreating")); err != nil {
		t.Errorf("node-a on its own request: %v", err)
	}
	if err := as(t, "probeshim:node:node-a", "probeshim:nodes").Status().Patch(ctx, onA, phase("Recreating")); err != nil {
		t.Errorf("node-a's dedicated identity on its own request: %v", err)
	}
	err := kubelet(t, "node-b").Status().Patch(ctx, onA, phase("Completed"))
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "user system:node:node-b may not write the status of ContainerRecreateRequest games/"+onA.Name+": only its node (node-a)") {
		t.Errorf("node-b on node-a's request: %v", err)
	}
	if err := clusterClient(t).Status().Patch(ctx, onA, phase("Completed")); err != nil {
		t.Errorf("the cluster deployment completes requests: %v", err)
	}
}
