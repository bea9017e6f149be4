// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestDecisionsOnSlimPods: the decider reads the same of a pod from the deployment's pod cache
// (podcache.Packed: slimmed and packed) as from the whole object: the same views, the same
// decisions, the same grace, the same workload and the same update filter, over pods covering
// everything the decider looks at (failing containers, records, opt-outs, readiness, restarts,
// silence, deletion).
func TestDecisionsOnSlimPods(t *testing.T) {
	pods, npp := slimFixture()
	s := settings(nil)
	var whole, slim []Pod
	for _, p := range pods {
		sp := podcache.Packed(p)
		vw, errW := podView(p, npp)
		vs, errS := podView(sp, npp)
		if !reflect.DeepEqual(vw, vs) || (errW == nil) != (errS == nil) {
			t.Errorf("pod %s: view of the whole pod %+v (%v), of the slim one %+v (%v)", p.Name, vw, errW, vs, errS)
		}
		if gw, gs := grace(p, vw.Failing), grace(sp, vs.Failing); !reflect.DeepEqual(gw, gs) {
			t.Errorf("pod %s: grace %v from the whole pod, %v from the slim one", p.Name, gw, gs)
		}
		if kw, ks := controllerKey(p), controllerKey(sp); kw != ks {
			t.Errorf("pod %s: workload %q from the whole pod, %q from the slim one", p.Name, kw, ks)
		}
		whole, slim = append(whole, vw), append(slim, vs)
	}
	for i := range pods {
		for j := range pods {
			if cw, cs := podChanged(pods[i], pods[j]), podChanged(podcache.Packed(pods[i]), podcache.Packed(pods[j])); cw != cs {
				t.Errorf("podChanged(%s, %s) = %v on whole pods, %v on slim ones", pods[i].Name, pods[j].Name, cw, cs)
			}
		}
	}
	dw, bw := Decide(input(s, whole...), plenty())
	ds, bs := Decide(input(s, slim...), plenty())
	if !reflect.DeepEqual(dw, ds) || !reflect.DeepEqual(bw, bs) {
		t.Errorf("decisions on whole pods:\n%s\non slim pods:\n%s", summary(dw), summary(ds))
	}
	if summary(dw) == "" {
		t.Fatal("the fixture decides nothing: it proves nothing")
	}
	t.Logf("decisions: %s", summary(dw))
}

// slimFixture is a workload of realistic pods on one node and that node's NodePodProbe, which
// fails some of their liveness probes.
func slimFixture() ([]*corev1.Pod, *v1alpha1.NodePodProbe) {
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	var pods []*corev1.Pod
	for i := range 8 {
		p := podcachetest.Pod("shop", i, podcachetest.Options{Liveness: i != 7, Applied: i == 3, Node: "node-1"})
		p.Name = fmt.Sprintf("web-%d", i)
		for ci := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[ci].State.Running.StartedAt = metav1.NewTime(t0.Add(-2 * time.Hour))
		}
		pods = append(pods, p)
		st := v1alpha1.PodProbeStatus{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
		for ci, c := range p.Spec.Containers {
			state := v1alpha1.ProbeSucceeded
			if (i+ci)%5 == 0 {
				state = v1alpha1.ProbeFailed
			}
			st.ProbeStates = append(st.ProbeStates, v1alpha1.ContainerProbeState{Name: v1alpha1.LivenessProbeName(c.Name), State: state,
				LastTransitionTime: metav1.NewTime(t0.Add(-time.Duration(i) * time.Minute))})
		}
		npp.Status.PodProbeStatuses = append(npp.Status.PodProbeStatuses, st)
	}
	pods[1].Annotations[AnnotationRestartDisabled] = "true"
	pods[2].Annotations[AnnotationRestarts] = Record{Containers: map[string]ContainerRecord{"app": {
		Failure: metav1.NewTime(t0.Add(-time.Hour)), Restarts: 2, LastRestart: metav1.NewMicroTime(t0.Add(-30 * time.Minute))}}}.format()
	pods[4].Status.Conditions[2].Status = corev1.ConditionFalse // not Ready
	pods[5].Status.ContainerStatuses[0].RestartCount = 9
	pods[5].Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	pods[6].DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	pods[6].Spec.TerminationGracePeriodSeconds = ptr.To(int64(90))
	return pods, npp
}

// TestDecisionsOnSlimPodsSilent: a silent node service reads the same from slim pods.
func TestDecisionsOnSlimPodsSilent(t *testing.T) {
	pods, npp := slimFixture()
	npp.Annotations = map[string]string{v1alpha1.AnnotationNodeService: v1alpha1.NodeServiceSilent,
		v1alpha1.AnnotationNodeServiceSince: t0.Format(time.RFC3339)}
	for _, p := range pods {
		vw, _ := podView(p, npp)
		vs, _ := podView(podcache.Packed(p), npp)
		if vw.NodeServiceSilent == "" || !reflect.DeepEqual(vw, vs) {
			t.Errorf("pod %s: view of the whole pod %+v, of the slim one %+v", p.Name, vw, vs)
		}
	}
}
