// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/internal/termsafe"
)

const explainUsage = `usage: probeshim-cluster explain <namespace>/<pod>

Prints what probeshim knows and decided about a pod's enhanced liveness: whether it opted in, where it
may be scheduled, whether a node service runs its liveness probes now (condition
probeshim.io/LivenessProtected), the decider's last decision about it (condition probeshim.io/LivenessRestart),
what the decider did to it (its restart record) and its latest decisions
(the events LivenessRestart, LivenessRestartHeld, LivenessRestartDryRun, LivenessRestartFailed, and the
condition's and scheduling's own), newest first. It reads only; the kubeconfig's user needs get on the pod
and list on events in its namespace.
`

func explainSubcommand() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != "explain" {
		return 0, false
	}
	return runExplain(context.Background(), os.Args[2:], os.Stdout, os.Stderr, ctrl.GetConfig), true
}

// explainReasons are the events that tell a decision about a pod's enhanced liveness.
var explainReasons = []string{decider.EventReasonRestart, decider.EventReasonHeld, decider.EventReasonDryRun,
	decider.EventReasonRestartFailed, liveness.EventReasonUnprotected, liveness.EventReasonProtected,
	liveness.EventReasonProbeSkipped, heartbeat.EventReasonNoServedNode, heartbeat.EventReasonSilent, heartbeat.EventReasonResumed}

// maxExplainEvents is how many decisions are printed.
const maxExplainEvents = 10

func runExplain(ctx context.Context, args []string, out, errOut io.Writer, cfg func() (*rest.Config, error)) int {
	ns, name, ok := strings.Cut(strings.Join(args, ""), "/")
	if len(args) != 1 || !ok || ns == "" || name == "" {
		fmt.Fprint(errOut, explainUsage)
		return 2
	}
	kc, err := clientOf(cfg)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pod, err := kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(errOut, "pod %s/%s: %v\n", ns, name, err)
		return 1
	}
	evs, err := kc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", name).String()})
	if err != nil {
		fmt.Fprintf(errOut, "events of pod %s/%s: %v\n", ns, name, err)
		return 1
	}
	explain(out, pod, evs.Items)
	return 0
}

// clientOf is a client of the cluster cfg's kubeconfig reaches, for the read-only subcommands.
func clientOf(cfg func() (*rest.Config, error)) (kubernetes.Interface, error) {
	rc, err := cfg()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// explain writes what pod and its events say about its enhanced liveness.
func explain(out io.Writer, pod *corev1.Pod, events []eventsv1.Event) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	line := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, termsafe.Escape(v)) }
	line("Pod", pod.Namespace+"/"+pod.Name)
	if !v1alpha1.UsesEnhancedLiveness(pod) {
		line("Enhanced liveness", "no (no "+v1alpha1.AnnotationUsingEnhancedLiveness+`: "true"): the kubelet runs its liveness probes`)
		return
	}
	probes, err := v1alpha1.ParseContainerProbeContext(pod.Annotations[v1alpha1.AnnotationContainerProbeContext])
	switch {
	case err != nil:
		line("Enhanced liveness", "opted in; "+v1alpha1.AnnotationContainerProbeContext+" unreadable: "+err.Error())
	case len(probes) == 0:
		line("Enhanced liveness", "opted in, but no liveness probe was moved: the kubelet runs any it has")
	default:
		var names []string
		for _, p := range probes {
			names = append(names, p.Name)
		}
		line("Enhanced liveness", "opted in; probeshim runs the liveness probes of "+strings.Join(names, ", "))
	}
	line("Served nodes", cmp.Or(pod.Annotations[v1alpha1.AnnotationServedNodeAffinity], "(not recorded)")+
		" (node label "+v1alpha1.LabelNodeServed+")")
	line("Node", cmp.Or(pod.Spec.NodeName, "(not scheduled)"))
	for _, c := range pod.Status.Conditions {
		if c.Type == liveness.ConditionLivenessProtected || c.Type == decider.ConditionLivenessRestart ||
			(c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue) {
			line(string(c.Type), fmt.Sprintf("%s (%s) since %s: %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Message))
		}
	}
	rec, err := decider.ParseRecord(pod.Annotations)
	switch {
	case err != nil:
		line("Restarts", "record unreadable: "+err.Error())
	case len(rec.Containers) == 0:
		line("Restarts", "none by the decider")
	default:
		names := make([]string, 0, len(rec.Containers))
		for c := range rec.Containers {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			r := rec.Containers[c]
			line("Restarts of "+c, fmt.Sprintf("%d, the last at %s for the failure since %s", r.Restarts,
				r.LastRestart.UTC().Format(time.RFC3339), r.Failure.UTC().Format(time.RFC3339)))
		}
		if rec.Request != "" {
			line("Request in flight", rec.Request)
		}
	}
	var decisions []eventsv1.Event
	for _, e := range events {
		if e.Regarding.UID == pod.UID && slices.Contains(explainReasons, e.Reason) {
			decisions = append(decisions, e)
		}
	}
	slices.SortFunc(decisions, func(a, b eventsv1.Event) int { return lastSeen(b).Compare(lastSeen(a)) })
	if len(decisions) == 0 {
		line("Decisions", "none recorded (events expire after an hour by default)")
		return
	}
	for i, e := range decisions[:min(len(decisions), maxExplainEvents)] {
		k := "Decisions (newest first):"
		if i > 0 {
			k = ""
		}
		fmt.Fprintf(w, "%s\t%s  %s  %s\n", k, lastSeen(e).UTC().Format(time.RFC3339), e.Reason, termsafe.Escape(e.Note))
	}
}

// lastSeen is when the event last happened.
func lastSeen(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
