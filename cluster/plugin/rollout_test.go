// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// The markers' mode and counts come from their annotations; a marker not counted yet shows "-",
// and what a tenant wrote into the annotations is escaped or ignored, never trusted as a number.
func TestMarkerRolloutText(t *testing.T) {
	counted := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{
		v1alpha1.AnnotationDryRun:          "true",
		v1alpha1.AnnotationResults:         `{"idle":{"Succeeded":3,"Failed":1,"Unknown":0,"Error":0},"ready":{"Succeeded":2,"Failed":0,"Unknown":1,"Error":1}}`,
		v1alpha1.AnnotationUnprobed:        "2",
		v1alpha1.AnnotationUnprobedReasons: "NodeNotServed=1,VirtualNode=1",
	}}}
	fresh := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "new", Annotations: map[string]string{
		v1alpha1.AnnotationResults: "not json", v1alpha1.AnnotationUnprobed: "many"}}}
	st := &Status{}
	for _, m := range []*v1alpha1.PodProbeMarker{counted, fresh} {
		ms := MarkerStatus{Namespace: m.Namespace, Name: m.Name, Probes: 2, Current: true}
		markerRollout(&ms, m)
		st.Markers = append(st.Markers, ms)
	}
	var b bytes.Buffer
	st.textMarkers(&b)
	want := `Markers: 2
NAMESPACE  NAME  MODE     PROBES  MATCHED PODS  PLACED PODS  RESULTS S/F/U/E  UNPROBED  NODE BUDGET
shop       web   dry-run  2       0             0            5/1/1/1          2         -
shop       new   live     2       0             0            -                -         -
  shop/web: 2 matched pod(s) not probed: NodeNotServed=1, VirtualNode=1
  shop/web probe idle: Succeeded=3 Failed=1 Unknown=0 Error=0
  shop/web probe ready: Succeeded=2 Failed=0 Unknown=1 Error=1
  (dry-run: probes run and are counted, nothing is written on pods; go live with
   kubectl annotate ppm NAME probeshim.io/dry-run=false --overwrite)
`
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}

	hostile := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		v1alpha1.AnnotationUnprobed: "1", v1alpha1.AnnotationUnprobedReasons: "\x1b[2Jfake=1"}}}
	ms := MarkerStatus{}
	markerRollout(&ms, hostile)
	if s := reasonsText(ms.UnprobedReasons); strings.Contains(s, "\x1b") {
		t.Errorf("reasons printed raw: %q", s)
	}
}
