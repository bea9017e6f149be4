// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1beta1"
)

// A request written as v1beta1 goes through the conversion webhook to the stored v1alpha1 and the
// v1alpha1 admission webhooks (matchPolicy Equivalent), and reads back in either version; what
// v1alpha1 keeps in annotations reads as v1beta1's fields and back.
func TestContainerRecreateRequestV1beta1(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	pod := crrPod(t, nil)
	before := testEnv.calls.get(PathConversion)

	b := &v1beta1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("crr-%d", crrSeq.Add(1))},
		Spec:       newCRR(pod.Name, "main").Spec,
	}
	if err := testEnv.admin.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if testEnv.calls.get(PathConversion) == before {
		t.Fatalf("created a v1beta1 request without a call to %s: the CRD does not convert through the webhook", PathConversion)
	}
	// The v1alpha1 mutator ran on it: the labels and the status context from the pod.
	if b.Labels[v1alpha1.LabelCRRNodeName] != "node-a" || len(b.Spec.Containers) != 1 || b.Spec.Containers[0].StatusContext == nil {
		t.Fatalf("v1beta1 request as created: labels %v, containers %+v; want the mutator's labels and status context", b.Labels, b.Spec.Containers)
	}
	a := &v1alpha1.ContainerRecreateRequest{}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(b), a); err != nil {
		t.Fatal(err)
	}
	if a.Spec.PodName != pod.Name || a.Spec.Containers[0].StatusContext.ContainerID != "containerd://"+pod.Name+"-main" {
		t.Errorf("read as v1alpha1: spec %+v", a.Spec)
	}

	// The v1alpha1 validator too: a v1beta1 request for a container the pod lacks is refused with
	// its message.
	bad := &v1beta1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "crr-missing-container"},
		Spec: newCRR(pod.Name, "nope").Spec}
	if err := testEnv.admin.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a v1beta1 request for a missing container: %v, want a refusal that names it", err)
	}

	// The controller stamps the grace on v1alpha1 (to the nanosecond): v1beta1 reads the
	// PreRecreateGrace condition, and writing the v1beta1 object back changes nothing of it.
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationCRRUnreadyAcquired, stamp)))
	if err := testEnv.admin.Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, stamp)
	grace := meta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionPreRecreateGrace)
	if grace == nil || grace.Status != metav1.ConditionTrue || !grace.LastTransitionTime.Time.Equal(at.Truncate(time.Second)) {
		t.Fatalf("read as v1beta1 after the grace was stamped: conditions %+v, want PreRecreateGrace True at %s", b.Status.Conditions, stamp)
	}
	b.Labels["team"] = "games"
	if err := testEnv.admin.Update(ctx, b); err != nil {
		t.Fatalf("a v1beta1 read-modify-write after the grace was stamped: %v", err)
	}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	if got := a.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired]; got != stamp || a.Labels["team"] != "games" {
		t.Errorf("after the v1beta1 write: unready-acquired %q (want %q), labels %v", got, stamp, a.Labels)
	}

	// OpenKruise's snapshot annotation, written on v1alpha1, reads as containerStatusSnapshot.
	snapshot := []v1beta1.ContainerRecreateRequestSyncContainerStatus{{Name: "main", Ready: true, RestartCount: 0, ContainerID: "containerd://" + pod.Name + "-main"}}
	raw, _ := json.Marshal(snapshot)
	patch = client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationCRRSyncContainerStatuses, raw)))
	if err := testEnv.admin.Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(b.Status.ContainerStatusSnapshot) != fmt.Sprint(snapshot) {
		t.Errorf("containerStatusSnapshot %+v, want %+v", b.Status.ContainerStatusSnapshot, snapshot)
	}
	if _, ok := b.Annotations[v1alpha1.AnnotationCRRSyncContainerStatuses]; ok {
		t.Errorf("the snapshot annotation is still on the v1beta1 object: %v", b.Annotations)
	}
}
