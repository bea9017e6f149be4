// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// The pod admission policies of cluster/deploy/admission-policies.yaml, attacked by a tenant who
// may edit pods in its namespace (pods/patch) but not exec into them.

const (
	markerKeys       = "probeshim.io/marker-keys"
	livenessRestarts = "probeshim.io/liveness-restarts"
)

var podPolicySeq atomic.Int64

// tenantPod creates a plain pod in games.
func tenantPod(t *testing.T, annotations map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("tenant-pod-%d", podPolicySeq.Add(1)), Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if err := testEnv.admin.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// tenant is a user who may read, create and edit pods in games, and exec into them when exec;
// also create the subresources named.
func tenant(t *testing.T, exec bool, create ...string) client.Client {
	t.Helper()
	user := fmt.Sprintf("tenant-%d@games", podPolicySeq.Add(1))
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"},
		Verbs: []string{"get", "list", "create", "update", "patch"}}}
	if exec {
		create = append(create, "pods/exec")
	}
	if len(create) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: create, Verbs: []string{"create"}})
	}
	grant(t, "games", user, rules...)
	c := as(t, user)
	poll.Eventually(t, 10*time.Second, func() error { // RBAC is seen a moment after it is written
		err := c.Get(context.Background(), client.ObjectKey{Namespace: "games", Name: "no-such-pod"}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("RBAC not in effect yet: %w", err)
	})
	return c
}

func annotate(key, value string) client.Patch {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	return client.RawPatch(types.MergePatchType, b)
}

func removeAnnotation(key string) client.Patch {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	return client.RawPatch(types.MergePatchType, b)
}

func wantDenied(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial saying %q", want)
	}
	if (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err)) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want a denial saying %q, got %v", want, err)
	}
}

// The cluster part's bookkeeping on pods is its own: a tenant who can patch pods cannot forge the
// record of what markers set (which would make the controller remove Ready or another
// controller's keys) nor the decider's restart record (which would make it create requests).
func TestPodRecordsPolicy(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	alice := tenant(t, true) // even exec rights do not make these writable
	pod := tenantPod(t, nil)
	forged := map[string]string{
		markerKeys:       `{"labels":["team-gate"],"conditions":["Ready","KruisePodReady"]}`,
		livenessRestarts: `{"request":"x","requested":"2026-12-01T10:00:00.000000Z","containers":{"main":{"failure":null,"restarts":1,"lastRestart":"2026-12-01T10:00:00.000000Z"}}}`,
	}
	for key, value := range forged {
		t.Run("patch "+key, func(t *testing.T) {
			wantDenied(t, alice.Patch(ctx, pod.DeepCopy(), annotate(key, value)),
				"may not write the annotations probeshim.io/marker-keys and probeshim.io/liveness-restarts of pod games/"+pod.Name)
		})
		t.Run("create with "+key, func(t *testing.T) {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("forged-%d", podPolicySeq.Add(1)),
					Annotations: map[string]string{key: value}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			}
			wantDenied(t, alice.Create(ctx, p), "they are the records of the probeshim cluster deployment")
		})
		t.Run("the cluster deployment writes and removes "+key, func(t *testing.T) {
			if err := clusterClient(t).Patch(ctx, pod.DeepCopy(), annotate(key, value)); err != nil {
				t.Fatal(err)
			}
			wantDenied(t, alice.Patch(ctx, pod.DeepCopy(), removeAnnotation(key)), "may not write the annotations")
			wantDenied(t, alice.Patch(ctx, pod.DeepCopy(), annotate(key, value+" ")), "may not write the annotations")
			if err := clusterClient(t).Patch(ctx, pod.DeepCopy(), removeAnnotation(key)); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("other pod writes are untouched", func(t *testing.T) {
		if err := alice.Patch(ctx, pod.DeepCopy(), annotate("example.com/note", "hi")); err != nil {
			t.Fatal(err)
		}
	})
}

// The enhanced liveness annotations decide which commands run in the pod's containers: changing
// them needs the right to exec into the pod.
func TestPodLivenessContextPolicy(t *testing.T) {
	policyReady(t) // alone (go test -run), the policies may not be in effect yet
	ctx := context.Background()
	patcher := tenant(t, false)
	execer := tenant(t, true)
	execContext := `[{"name":"main","livenessProbe":{"exec":{"command":["sh","-c","id > /tmp/owned"]}}}]`
	const denial = "they decide which commands run in its containers, which needs create pods/exec on the pod"

	t.Run("pods/patch alone cannot add the probe context", func(t *testing.T) {
		pod := tenantPod(t, nil)
		wantDenied(t, patcher.Patch(ctx, pod, annotate(v1alpha1.AnnotationContainerProbeContext, execContext)), denial)
	})
	t.Run("nor opt an existing pod in", func(t *testing.T) {
		pod := tenantPod(t, nil)
		wantDenied(t, patcher.Patch(ctx, pod, annotate(v1alpha1.AnnotationUsingEnhancedLiveness, "true")), denial)
	})
	t.Run("nor change or remove what the webhook wrote at create", func(t *testing.T) {
		pod := tenantPod(t, map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true",
			v1alpha1.AnnotationContainerProbeContext: `[{"name":"main","livenessProbe":{"tcpSocket":{"port":80}}}]`})
		wantDenied(t, patcher.Patch(ctx, pod.DeepCopy(), annotate(v1alpha1.AnnotationContainerProbeContext, execContext)), denial)
		wantDenied(t, patcher.Patch(ctx, pod.DeepCopy(), removeAnnotation(v1alpha1.AnnotationUsingEnhancedLiveness)), denial)
	})
	t.Run("other annotations stay the tenant's", func(t *testing.T) {
		pod := tenantPod(t, map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"})
		if err := patcher.Patch(ctx, pod, annotate("example.com/note", "hi")); err != nil {
			t.Fatal(err)
		}
	})
	// A Binding's annotations are copied onto the pod it binds: pods/binding writes pod metadata.
	bind := func(c client.Client, annotations map[string]string) (*corev1.Pod, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("pending-%d", podPolicySeq.Add(1)),
				Annotations: map[string]string{v1alpha1.AnnotationContainerProbeContext: execContext}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}
		if err := testEnv.admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, Annotations: annotations},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}
		return pod, c.SubResource("binding").Create(ctx, pod, b)
	}
	binder, execBinder := tenant(t, false, "pods/binding"), tenant(t, true, "pods/binding")
	t.Run("pods/binding alone cannot opt a pending pod in", func(t *testing.T) {
		pod, err := bind(binder, map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"})
		wantDenied(t, err, denial)
		got := &corev1.Pod{}
		if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil || got.Spec.NodeName != "" ||
			v1alpha1.UsesEnhancedLiveness(got) {
			t.Fatalf("after the refused binding: node %q, annotations %v, %v", got.Spec.NodeName, got.Annotations, err)
		}
		_, err = bind(binder, map[string]string{v1alpha1.AnnotationContainerProbeContext: `[]`})
		wantDenied(t, err, denial)
	})
	t.Run("a binding without them binds as before", func(t *testing.T) {
		if _, err := bind(binder, map[string]string{"example.com/note": "hi"}); err != nil {
			t.Fatal(err)
		}
		if _, err := bind(binder, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a binder who may exec into the pod may", func(t *testing.T) {
		if _, err := bind(execBinder, map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a user who may exec into the pod may change them", func(t *testing.T) {
		pod := tenantPod(t, nil)
		if err := execer.Patch(ctx, pod.DeepCopy(), annotate(v1alpha1.AnnotationContainerProbeContext, execContext)); err != nil {
			t.Fatal(err)
		}
		if err := execer.Patch(ctx, pod.DeepCopy(), annotate(v1alpha1.AnnotationUsingEnhancedLiveness, "true")); err != nil {
			t.Fatal(err)
		}
	})
}

// The cluster deployment may patch Nodes (RBAC, for the served label) but change nothing of a
// Node except that label; others are not affected by the policy.
func TestNodeServedLabelPolicy(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("served-%d", podPolicySeq.Add(1)), Labels: map[string]string{"zone": "a"}}}
	if err := testEnv.admin.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.admin.Delete(context.Background(), node) })
	patch := func(body string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(body)) }
	cluster := clusterClient(t)
	const denial = "may change only the label node-restriction.kubernetes.io/probeshim-served of a Node"
	var err error
	poll.Eventually(t, 15*time.Second, func() error { // the policy may not be in effect yet
		err = cluster.Patch(ctx, node.DeepCopy(), patch(`{"metadata":{"labels":{"zone":"b"}}}`))
		if err == nil {
			return errors.New("admitted a change of another label")
		}
		return nil
	})
	wantDenied(t, err, denial)
	wantDenied(t, cluster.Patch(ctx, node.DeepCopy(), patch(`{"metadata":{"labels":{"zone":null}}}`)), denial)
	wantDenied(t, cluster.Patch(ctx, node.DeepCopy(), patch(`{"metadata":{"annotations":{"x":"y"}}}`)), denial)
	wantDenied(t, cluster.Patch(ctx, node.DeepCopy(), patch(`{"spec":{"unschedulable":true}}`)), denial)
	for _, body := range []string{`{"metadata":{"labels":{"` + v1alpha1.LabelNodeServed + `":"true"}}}`,
		`{"metadata":{"labels":{"` + v1alpha1.LabelNodeServed + `":null}}}`} {
		if err := cluster.Patch(ctx, node.DeepCopy(), patch(body)); err != nil {
			t.Errorf("the served label, %s: %v", body, err)
		}
	}
	if err := testEnv.admin.Patch(ctx, node.DeepCopy(), patch(`{"metadata":{"labels":{"zone":"c"}}}`)); err != nil {
		t.Errorf("an admin's label change: %v", err)
	}
}
