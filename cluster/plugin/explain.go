// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/controller/nodepodprobe"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/internal/termsafe"
)

// Explanation is `kubectl probeshim explain`: what probeshim knows and decided about one pod.
type Explanation struct {
	Kind       string `json:"kind"` // "Explanation"
	APIVersion string `json:"apiVersion"`
	Pod        string `json:"pod"` // namespace/name
	UID        string `json:"uid"`
	Node       string `json:"node,omitempty"`
	// NodeServed: the pod's node carries v1alpha1.LabelNodeServed=true; nil when the pod has no
	// node or the Node could not be read.
	NodeServed *bool `json:"nodeServed,omitempty"`
	// NodeMissing: the pod is bound to a node that has no Node object (any more).
	NodeMissing bool `json:"nodeMissing,omitempty"`
	// NodeService and NodeServiceSince are the cluster part's record of the node service's
	// heartbeat on the node's NodePodProbe (Live, Silent, NoLease).
	NodeService      string `json:"nodeService,omitempty"`
	NodeServiceSince string `json:"nodeServiceSince,omitempty"`
	// NotProbed says why no node service probes the pod (v1alpha1.UnprobedVirtualNode,
	// UnprobedNodeNotServed, UnprobedNoNodePodProbe), when a marker selects it and it is ready to
	// be probed; nothing is written on it then.
	NotProbed string `json:"notProbed,omitempty"`
	// Markers are the PodProbeMarkers of the pod's namespace, whether they match it and why.
	Markers []MarkerMatch `json:"markers"`
	// Probes are the probes of the pod: those of the matching markers and its enhanced liveness
	// probes, with their last results from the node's NodePodProbe status.
	Probes   []ProbeResult `json:"probes"`
	Liveness Liveness      `json:"liveness"`
	// Unreadable lists what could not be read (no permission, API errors); the rest is shown.
	Unreadable []string `json:"unreadable,omitempty"`
}

// MarkerMatch is one marker of the pod's namespace.
type MarkerMatch struct {
	Name    string `json:"name"`
	Matches bool   `json:"matches"`
	// Why: the selector and, when it does not match, the requirements the pod's labels fail.
	Why string `json:"why"`
	// DryRun: the marker is in dry run (probeshim.io/dry-run): its probes run, nothing of theirs is
	// written on the pod.
	DryRun bool `json:"dryRun,omitempty"`
}

// ProbeResult is one probe of the pod.
type ProbeResult struct {
	// Name is the probe's name in the NodePodProbe: <marker>#<probe>, or <container>-livenessProbe.
	Name      string `json:"name"`
	Marker    string `json:"marker,omitempty"`
	Container string `json:"container"`
	Liveness  bool   `json:"liveness,omitempty"`
	// Placed: the probe is in the node's NodePodProbe spec, so its node service runs it.
	Placed bool `json:"placed"`
	// State is the last result (Succeeded, Failed, Unknown; empty before the first).
	State string `json:"state,omitempty"`
	// Reason: why an Unknown probe could not run (the node service's, e.g. CommandNotFound);
	// NodeServiceSilent when the result is not current; NotPlaced when the probe is not placed.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// LastProbeTime is when it last ran, AgeSeconds how long ago.
	LastProbeTime      *metav1.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	AgeSeconds         *int64       `json:"ageSeconds,omitempty"`
}

// Liveness is the pod's enhanced liveness and the decider's decisions about it.
type Liveness struct {
	// OptedIn: the pod has apps.kruise.io/using-enhanced-liveness: "true".
	OptedIn bool `json:"optedIn"`
	// Summary says so in a line: which containers' liveness probes probeshim runs.
	Summary    string   `json:"summary"`
	Containers []string `json:"containers,omitempty"`
	// ServedNodeAffinity is how the pod is tied to served nodes (require, prefer, off).
	ServedNodeAffinity string `json:"servedNodeAffinity,omitempty"`
	// Served: on, and served now: the node carries the served label and the condition
	// probeshim.io/LivenessProtected is True.
	Served bool `json:"served"`
	// Conditions: probeshim.io/LivenessProtected, probeshim.io/LivenessRestart (the decider's
	// last decision) and PodScheduled while it is not True.
	Conditions []Condition `json:"conditions,omitempty"`
	// Restarts are the decider's record of its restarts, per container; RecordError when the
	// record does not parse; RequestInFlight the ContainerRecreateRequest it waits for.
	Restarts        []RestartRecord `json:"restarts,omitempty"`
	RecordError     string          `json:"recordError,omitempty"`
	RequestInFlight string          `json:"requestInFlight,omitempty"`
	// Decisions are the latest decision events (the decider's and the heartbeat's), newest first.
	Decisions []Event `json:"decisions"`
}

// Condition is a pod condition.
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// RestartRecord is the decider's record of one container.
type RestartRecord struct {
	Container   string           `json:"container"`
	Restarts    int              `json:"restarts"`
	LastRestart metav1.MicroTime `json:"lastRestart"`
	// Failure is when the failure acted on began.
	Failure metav1.Time `json:"failure"`
}

// Event is one decision event.
type Event struct {
	Time   metav1.Time `json:"time"`
	Type   string      `json:"type"`
	Reason string      `json:"reason"`
	Note   string      `json:"note"`
}

// decisionReasons are the events that tell a decision about a pod's enhanced liveness.
var decisionReasons = []string{decider.EventReasonRestart, decider.EventReasonHeld, decider.EventReasonDryRun,
	decider.EventReasonRestartFailed, liveness.EventReasonUnprotected, liveness.EventReasonProtected,
	liveness.EventReasonProbeSkipped, heartbeat.EventReasonNoServedNode, heartbeat.EventReasonSilent, heartbeat.EventReasonResumed}

// maxDecisions is how many decisions are kept.
const maxDecisions = 10

// Explain reads what probeshim knows about the pod namespace/name. Only a pod that cannot be read
// is an error: whatever else cannot be read is named in Unreadable.
func Explain(ctx context.Context, c client.Reader, namespace, name string, now time.Time) (*Explanation, error) {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	ex := &Explanation{Kind: "Explanation", APIVersion: OutputAPIVersion, Pod: namespace + "/" + name, UID: string(pod.UID),
		Node: pod.Spec.NodeName, Markers: []MarkerMatch{}, Probes: []ProbeResult{}}
	unreadable := func(what string, err error) { ex.Unreadable = append(ex.Unreadable, what+": "+err.Error()) }

	var markers v1alpha1.PodProbeMarkerList
	if err := c.List(ctx, &markers, client.InNamespace(namespace)); err != nil {
		unreadable("PodProbeMarkers of namespace "+namespace, err)
	}
	slices.SortFunc(markers.Items, func(a, b v1alpha1.PodProbeMarker) int { return cmp.Compare(a.Name, b.Name) })
	for i := range markers.Items {
		ex.Markers = append(ex.Markers, matchMarker(&markers.Items[i], pod))
	}

	var npp *v1alpha1.NodePodProbe
	var node *corev1.Node
	nodeRead := false
	if pod.Spec.NodeName != "" {
		node = &corev1.Node{}
		switch err := c.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
		case apierrors.IsNotFound(err):
			ex.NodeMissing, node, nodeRead = true, nil, true
		case err != nil:
			unreadable("node "+pod.Spec.NodeName, err)
		default:
			nodeRead = true
			served := node.Labels[v1alpha1.LabelNodeServed] == "true"
			ex.NodeServed = &served
		}
		npp = &v1alpha1.NodePodProbe{}
		switch err := c.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, npp); {
		case apierrors.IsNotFound(err):
			npp = nil
		case err != nil:
			unreadable("NodePodProbe "+pod.Spec.NodeName, err)
			npp = nil
		default:
			ex.NodeService = npp.Annotations[v1alpha1.AnnotationNodeService]
			ex.NodeServiceSince = npp.Annotations[v1alpha1.AnnotationNodeServiceSince]
		}
	}
	if nodeRead && nodepodprobe.Probeable(pod) && slices.ContainsFunc(ex.Markers, func(m MarkerMatch) bool { return m.Matches }) {
		// As the cluster part counts it in the marker's probeshim.io/unprobed (budget aside: the
		// probes show it per marker).
		ex.NotProbed = nodepodprobe.UnprobedReason(node, npp, false)
	}
	ex.Liveness = explainLiveness(pod, ex.NodeServed)
	ex.Probes = probeResults(pod, markers.Items, npp, ex.Liveness.Containers, now)

	var evs eventsv1.EventList
	if err := c.List(ctx, &evs, client.InNamespace(namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("regarding.name", name)}); err != nil {
		unreadable("events of pod "+ex.Pod, err)
	}
	ex.Liveness.Decisions = decisions(pod, evs.Items)
	return ex, nil
}

// matchMarker says whether m selects pod, and why.
func matchMarker(m *v1alpha1.PodProbeMarker, pod *corev1.Pod) MarkerMatch {
	mm := MarkerMatch{Name: m.Name}
	sel := nodepodprobe.MarkerSelector(m)
	reqs, _ := sel.Requirements()
	switch {
	case len(reqs) == 0:
		mm.Why = "its selector is empty or invalid: it selects nothing"
	case sel.Matches(labels.Set(pod.Labels)):
		mm.Matches = true
		mm.Why = "selector " + sel.String() + " matches the pod's labels"
	default:
		var failed []string
		for _, r := range reqs {
			if !r.Matches(labels.Set(pod.Labels)) {
				failed = append(failed, r.String())
			}
		}
		mm.Why = "the pod's labels fail " + strings.Join(failed, ", ") + " (selector " + sel.String() + ")"
	}
	if mm.Matches && m.DeletionTimestamp != nil {
		mm.Matches = false
		mm.Why += ", but the marker is being deleted"
	}
	if mm.DryRun = v1alpha1.DryRun(m); mm.DryRun && mm.Matches {
		mm.Why += "; dry run: its results are counted, not written on the pod"
	}
	return mm
}

// probeResults lists the probes of the matching markers and the enhanced liveness probes of
// livenessOf's containers, then any other probe the node has for the pod, with their results.
func probeResults(pod *corev1.Pod, markers []v1alpha1.PodProbeMarker, npp *v1alpha1.NodePodProbe, livenessOf []string, now time.Time) []ProbeResult {
	placed, containerOf, states, silent := nodeEntry(npp, pod)
	var out []ProbeResult
	seen := map[string]bool{}
	add := func(r ProbeResult, notPlaced func() string) {
		seen[r.Name] = true
		r.Placed = placed[r.Name]
		if s, ok := states[r.Name]; ok {
			r.State, r.Message = string(s.State), s.Message
			if s.State == v1alpha1.ProbeUnknown {
				r.Reason, _, _ = v1alpha1.ParseProbeError(s.Message)
			}
			if !s.LastProbeTime.IsZero() {
				r.LastProbeTime, r.AgeSeconds = &s.LastProbeTime, age(now, s.LastProbeTime.Time)
			}
			if !s.LastTransitionTime.IsZero() {
				r.LastTransitionTime = &s.LastTransitionTime
			}
			if silent {
				r.Reason = liveness.ReasonNodeServiceSilent
			}
		}
		if !r.Placed {
			r.Reason, r.Message = "NotPlaced", notPlaced()
		}
		out = append(out, r)
	}
	notPlaced := func(container string, budget *metav1.Condition) func() string {
		return func() string { return whyNotPlaced(pod, container, npp, budget) }
	}
	for i := range markers {
		m := &markers[i]
		if m.DeletionTimestamp != nil || !nodepodprobe.MarkerSelector(m).Matches(labels.Set(pod.Labels)) {
			continue
		}
		budget := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.PodProbeMarkerNodeBudget)
		for _, p := range m.Spec.Probes {
			add(ProbeResult{Name: v1alpha1.ProbeName(m.Name, p.Name), Marker: m.Name, Container: p.ContainerName},
				notPlaced(p.ContainerName, budget))
		}
	}
	for _, c := range livenessOf {
		add(ProbeResult{Name: v1alpha1.LivenessProbeName(c), Container: c, Liveness: true}, notPlaced(c, nil))
	}
	// What else the node has for the pod: a marker deleted or changed since.
	var rest []string
	for name := range placed {
		rest = append(rest, name)
	}
	for name := range states {
		if !placed[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, name := range rest {
		if seen[name] {
			continue
		}
		r := ProbeResult{Name: name, Container: containerOf[name]}
		r.Marker, _, _ = v1alpha1.SplitProbeName(name)
		_, r.Liveness = v1alpha1.ParseLivenessProbeName(name)
		add(r, func() string { return "no longer placed: its result is the last before it was removed" })
	}
	if out == nil {
		out = []ProbeResult{}
	}
	return out
}

// nodeEntry is what npp (nil: none) holds for pod: its probes placed, their containers, their
// states, and whether the node service is recorded silent.
func nodeEntry(npp *v1alpha1.NodePodProbe, pod *corev1.Pod) (placed map[string]bool, containerOf map[string]string,
	states map[string]v1alpha1.ContainerProbeState, silent bool) {
	placed, containerOf, states = map[string]bool{}, map[string]string{}, map[string]v1alpha1.ContainerProbeState{}
	if npp == nil {
		return placed, containerOf, states, false
	}
	_, silent = v1alpha1.NodeServiceSilence(npp)
	for _, pp := range npp.Spec.PodProbes {
		if pp.UID == string(pod.UID) {
			for _, p := range pp.Probes {
				placed[p.Name], containerOf[p.Name] = true, p.ContainerName
			}
		}
	}
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.UID == string(pod.UID) {
			for _, s := range ps.ProbeStates {
				states[s.Name] = s
			}
		}
	}
	return placed, containerOf, states, silent
}

// whyNotPlaced says why a probe of container ("" for any) is not in the node's NodePodProbe; budget
// is its marker's NodeBudget condition (nil: none, or not a marker's probe).
func whyNotPlaced(pod *corev1.Pod, container string, npp *v1alpha1.NodePodProbe, budget *metav1.Condition) string {
	switch {
	case container != "" && v1alpha1.RestartableContainer(pod, container) == nil:
		return fmt.Sprintf("the pod has no container %q", container)
	case !nodepodprobe.Probeable(pod):
		return "the pod is not ready to be probed: not on a node, not initialised, without an IP, finished or terminating"
	case container != "" && nodepodprobe.StartupHeld(pod, v1alpha1.RestartableContainer(pod, container)):
		return fmt.Sprintf("container %q has a startupProbe that has not succeeded yet: its probes start once the kubelet reports it started", container)
	case npp == nil:
		return "node " + pod.Spec.NodeName + " has no NodePodProbe (the cluster part writes it once the node is Ready)"
	case budget != nil && budget.Status != metav1.ConditionTrue && strings.Contains(budget.Message, pod.Spec.NodeName):
		return "the node leaves the marker out over its NodePodProbe budget: " + budget.Message
	}
	return "not in node " + pod.Spec.NodeName + "'s NodePodProbe yet (is the cluster part running, or OpenKruise acting?)"
}

// explainLiveness reads the pod's enhanced liveness: opt-in, probes, conditions, restart record.
func explainLiveness(pod *corev1.Pod, nodeServed *bool) Liveness {
	l := Liveness{OptedIn: v1alpha1.UsesEnhancedLiveness(pod), Decisions: []Event{}}
	if !l.OptedIn {
		l.Summary = "no (no " + v1alpha1.AnnotationUsingEnhancedLiveness + `: "true"): the kubelet runs its liveness probes`
		return l
	}
	probes, err := v1alpha1.ParseContainerProbeContext(pod.Annotations[v1alpha1.AnnotationContainerProbeContext])
	switch {
	case err != nil:
		l.Summary = "opted in; " + v1alpha1.AnnotationContainerProbeContext + " unreadable: " + err.Error()
	case len(probes) == 0:
		l.Summary = "opted in, but no liveness probe was moved: the kubelet runs any it has"
	default:
		for _, p := range probes {
			l.Containers = append(l.Containers, p.Name)
		}
		l.Summary = "opted in; probeshim runs the liveness probes of " + strings.Join(l.Containers, ", ")
	}
	l.ServedNodeAffinity = pod.Annotations[v1alpha1.AnnotationServedNodeAffinity]
	for _, c := range pod.Status.Conditions {
		if c.Type == liveness.ConditionLivenessProtected || c.Type == decider.ConditionLivenessRestart ||
			(c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue) {
			l.Conditions = append(l.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
				Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		}
		if c.Type == liveness.ConditionLivenessProtected {
			l.Served = c.Status == corev1.ConditionTrue && nodeServed != nil && *nodeServed
		}
	}
	rec, err := decider.ParseRecord(pod.Annotations)
	if err != nil {
		l.RecordError = err.Error()
		return l
	}
	for name, r := range rec.Containers {
		l.Restarts = append(l.Restarts, RestartRecord{Container: name, Restarts: r.Restarts, LastRestart: r.LastRestart, Failure: r.Failure})
	}
	slices.SortFunc(l.Restarts, func(a, b RestartRecord) int { return cmp.Compare(a.Container, b.Container) })
	l.RequestInFlight = rec.Request
	return l
}

// decisions are the pod's decision events, newest first; another pod of the same name's are not.
func decisions(pod *corev1.Pod, events []eventsv1.Event) []Event {
	var ds []Event
	for _, e := range events {
		if e.Regarding.UID == pod.UID && slices.Contains(decisionReasons, e.Reason) {
			ds = append(ds, Event{Time: metav1.NewTime(lastSeen(e)), Type: e.Type, Reason: e.Reason, Note: e.Note})
		}
	}
	slices.SortStableFunc(ds, func(a, b Event) int { return b.Time.Compare(a.Time.Time) })
	if ds == nil {
		return []Event{}
	}
	return ds[:min(len(ds), maxDecisions)]
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

// Text writes the explanation for a person; text from tenants (labels, messages, notes) is
// escaped, as a terminal would act on what it holds.
func (ex *Explanation) Text(w io.Writer) {
	kv := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(kv, "%s:\t%s\n", k, termsafe.Escape(v)) }
	line("Pod", ex.Pod)
	node := cmp.Or(ex.Node, "(not scheduled)")
	if ex.NodeMissing {
		node += " (no such Node)"
	}
	if ex.NodeServed != nil {
		if *ex.NodeServed {
			node += ", served (" + v1alpha1.LabelNodeServed + "=true)"
		} else {
			node += ", not served (no " + v1alpha1.LabelNodeServed + "=true)"
		}
	}
	if ex.NodeService != "" {
		node += "; node service " + ex.NodeService
		if ex.NodeServiceSince != "" {
			node += " since " + ex.NodeServiceSince
		}
	}
	line("Node", node)
	if ex.NotProbed != "" {
		line("Not probed", ex.NotProbed+": no node service probes this pod, nothing is written on it")
	}
	matching := 0
	for _, m := range ex.Markers {
		if m.Matches {
			matching++
		}
	}
	line("Markers", fmt.Sprintf("%d in the namespace, %d select the pod", len(ex.Markers), matching))
	kv.Flush()
	if len(ex.Markers) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, m := range ex.Markers {
			verdict := "no match"
			if m.Matches {
				verdict = "matches"
			}
			fmt.Fprintf(tw, "  %s\t%s: %s\n", m.Name, verdict, termsafe.Escape(m.Why))
		}
		tw.Flush()
	}
	if len(ex.Probes) == 0 {
		fmt.Fprintln(w, "Probes: none")
	} else {
		fmt.Fprintln(w, "Probes:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tCONTAINER\tSTATE\tREASON\tLAST PROBE\tMESSAGE")
		for _, p := range ex.Probes {
			last := "-"
			if p.AgeSeconds != nil {
				last = humanAge(p.AgeSeconds) + " ago"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Name, cmp.Or(p.Container, "-"), cmp.Or(p.State, "-"),
				cmp.Or(p.Reason, "-"), last, termsafe.Escape(p.Message))
		}
		tw.Flush()
	}
	ex.Liveness.text(w)
	if len(ex.Unreadable) > 0 {
		fmt.Fprintln(w, "Not readable with this kubeconfig:")
		for _, u := range ex.Unreadable {
			fmt.Fprintf(w, "  %s\n", u)
		}
	}
}

func (l *Liveness) text(w io.Writer) {
	kv := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer kv.Flush()
	line := func(k, v string) { fmt.Fprintf(kv, "%s:\t%s\n", k, termsafe.Escape(v)) }
	line("Enhanced liveness", l.Summary)
	if !l.OptedIn {
		return
	}
	served := "no"
	if l.Served {
		served = "yes: the node is served and the probes run there"
	}
	line("Served now", served)
	line("Served nodes", cmp.Or(l.ServedNodeAffinity, "(not recorded)")+" (node label "+v1alpha1.LabelNodeServed+")")
	for _, c := range l.Conditions {
		line(c.Type, fmt.Sprintf("%s (%s) since %s: %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Message))
	}
	switch {
	case l.RecordError != "":
		line("Restarts", "record unreadable: "+l.RecordError)
	case len(l.Restarts) == 0:
		line("Restarts", "none by the decider")
	default:
		for _, r := range l.Restarts {
			line("Restarts of "+r.Container, fmt.Sprintf("%d, the last at %s for the failure since %s", r.Restarts,
				r.LastRestart.UTC().Format(time.RFC3339), r.Failure.UTC().Format(time.RFC3339)))
		}
		if l.RequestInFlight != "" {
			line("Request in flight", l.RequestInFlight)
		}
	}
	if len(l.Decisions) == 0 {
		line("Decisions", "none recorded (events expire after an hour by default)")
		return
	}
	for i, e := range l.Decisions {
		k := "Decisions (newest first):"
		if i > 0 {
			k = ""
		}
		fmt.Fprintf(kv, "%s\t%s  %s  %s\n", k, e.Time.UTC().Format(time.RFC3339), e.Reason, termsafe.Escape(e.Note))
	}
}
