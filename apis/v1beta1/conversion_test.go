// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1beta1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

var acquired = metav1.NewTime(time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC))

func alpha(annotations map[string]string) *v1alpha1.ContainerRecreateRequest {
	return &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Annotations: annotations,
			Labels: map[string]string{v1alpha1.LabelCRRNodeName: "node-a"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "p",
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}},
			Strategy:   &v1alpha1.ContainerRecreateRequestStrategy{UnreadyGracePeriodSeconds: ptr.To[int64](3)}},
		Status: v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
			ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "app", Phase: v1alpha1.ContainerRecreateRequestRecreating, IsKilled: true}}},
	}
}

func beta(annotations map[string]string, status func(*ContainerRecreateRequestStatus)) *ContainerRecreateRequest {
	a := alpha(annotations)
	b := &ContainerRecreateRequest{ObjectMeta: a.ObjectMeta, Spec: a.Spec, Status: ContainerRecreateRequestStatus{
		Phase: a.Status.Phase, ContainerRecreateStates: a.Status.ContainerRecreateStates}}
	if status != nil {
		status(&b.Status)
	}
	return b
}

func grace(at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: ConditionPreRecreateGrace, Status: metav1.ConditionTrue, LastTransitionTime: at, Reason: graceReason, Message: graceMessage}
}

// Each v1alpha1 request has its v1beta1 form: the two annotations become fields, and back.
func TestConversionPairs(t *testing.T) {
	snapshot := []ContainerRecreateRequestSyncContainerStatus{{Name: "app", Ready: true, RestartCount: 2, ContainerID: "containerd://abc"}}
	cases := []struct {
		name  string
		alpha *v1alpha1.ContainerRecreateRequest
		beta  *ContainerRecreateRequest
	}{
		{"no annotations", alpha(nil), beta(nil, nil)},
		{"unready acquired", alpha(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "2026-12-05T01:02:03Z", "other": "x"}),
			beta(map[string]string{"other": "x"}, func(s *ContainerRecreateRequestStatus) { s.Conditions = []metav1.Condition{grace(acquired)} })},
		{"unready acquired to the nanosecond", alpha(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "2026-12-05T01:02:03.123456789Z"}),
			beta(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "2026-12-05T01:02:03.123456789Z"},
				func(s *ContainerRecreateRequestStatus) { s.Conditions = []metav1.Condition{grace(acquired)} })},
		{"container statuses", alpha(map[string]string{v1alpha1.AnnotationCRRSyncContainerStatuses: `[{"name":"app","ready":true,"restartCount":2,"containerID":"containerd://abc"}]`}),
			beta(nil, func(s *ContainerRecreateRequestStatus) { s.ContainerStatusSnapshot = snapshot })},
		{"an unparsable time stays an annotation", alpha(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "yesterday"}),
			beta(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "yesterday"}, nil)},
		{"unparsable statuses stay an annotation", alpha(map[string]string{v1alpha1.AnnotationCRRSyncContainerStatuses: "{"}),
			beta(map[string]string{v1alpha1.AnnotationCRRSyncContainerStatuses: "{"}, nil)},
		{"conditions v1alpha1 has no place for", alpha(map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: "2026-12-05T01:02:03Z",
			AnnotationConditions: `[{"type":"Other","status":"False","lastTransitionTime":"2026-12-05T01:02:03Z","reason":"R","message":"m"},` +
				`{"type":"PreRecreateGrace","status":"True","lastTransitionTime":"2026-12-05T01:02:03Z","reason":"Mine","message":""}]`}),
			beta(nil, func(s *ContainerRecreateRequestStatus) {
				s.Conditions = []metav1.Condition{{Type: "Other", Status: metav1.ConditionFalse, LastTransitionTime: acquired, Reason: "R", Message: "m"},
					{Type: ConditionPreRecreateGrace, Status: metav1.ConditionTrue, LastTransitionTime: acquired, Reason: "Mine"}}
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gotBeta ContainerRecreateRequest
			if err := gotBeta.ConvertFrom(tc.alpha.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.beta, &gotBeta); d != "" {
				t.Errorf("v1alpha1 -> v1beta1 (-want +got):\n%s", d)
			}
			var gotAlpha v1alpha1.ContainerRecreateRequest
			if err := tc.beta.DeepCopy().ConvertTo(&gotAlpha); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.alpha, &gotAlpha); d != "" {
				t.Errorf("v1beta1 -> v1alpha1 (-want +got):\n%s", d)
			}
		})
	}
}

// v1alpha1 is the truth for the grace: probeshim's controllers write the annotation, so a kept
// PreRecreateGrace condition follows it (replaced at a new time, dropped without it).
func TestGraceFollowsTheAnnotation(t *testing.T) {
	mine := metav1.Condition{Type: ConditionPreRecreateGrace, Status: metav1.ConditionTrue, LastTransitionTime: acquired, Reason: "Mine"}
	other := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, LastTransitionTime: acquired, Reason: "R"}
	var stored v1alpha1.ContainerRecreateRequest
	if err := beta(nil, func(s *ContainerRecreateRequestStatus) { s.Conditions = []metav1.Condition{mine, other} }).ConvertTo(&stored); err != nil {
		t.Fatal(err)
	}
	later := metav1.NewTime(acquired.Add(time.Minute))
	stored.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired] = later.UTC().Format(time.RFC3339)
	var got ContainerRecreateRequest
	if err := got.ConvertFrom(&stored); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]metav1.Condition{grace(later), other}, got.Status.Conditions); d != "" {
		t.Errorf("after a new grace (-want +got):\n%s", d)
	}
	delete(stored.Annotations, v1alpha1.AnnotationCRRUnreadyAcquired)
	got = ContainerRecreateRequest{}
	if err := got.ConvertFrom(&stored); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]metav1.Condition{other}, got.Status.Conditions); d != "" {
		t.Errorf("without the annotation (-want +got):\n%s", d)
	}
	if len(got.Annotations) != 0 {
		t.Errorf("annotations %v left on the v1beta1 object", got.Annotations)
	}
}
