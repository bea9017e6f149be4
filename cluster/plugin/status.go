// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/internal/termsafe"
)

// Status is `kubectl probeshim status`: the nodes, the OpenKruise hand-over, the liveness decider
// and the markers, as the cluster part and the node services record them.
type Status struct {
	Kind       string `json:"kind"` // "Status"
	APIVersion string `json:"apiVersion"`
	// Nodes are every Node, and the heartbeat Leases of nodes without one, by name.
	Nodes   []NodeStatus  `json:"nodes"`
	Kruise  KruiseStatus  `json:"kruise"`
	Decider DeciderStatus `json:"decider"`
	// Markers are the PodProbeMarkers of -n's namespace, or of all namespaces without -n.
	Markers []MarkerStatus `json:"markers"`
	// Unreadable lists what could not be read (no permission, API errors); the rest is shown.
	Unreadable []string `json:"unreadable,omitempty"`
}

// NodeStatus is one node.
type NodeStatus struct {
	Name string `json:"name"`
	// Served: the Node carries v1alpha1.LabelNodeServed=true, which the cluster part sets while
	// the node's service renews its heartbeat.
	Served bool `json:"served"`
	// NoNodeObject: a heartbeat Lease names the node, but there is no such Node.
	NoNodeObject bool `json:"noNodeObject,omitempty"`
	// NodeService is the cluster part's record on the node's NodePodProbe (Live, Silent or
	// NoLease; empty without one), and NodeServiceSince when that began.
	NodeService      string `json:"nodeService,omitempty"`
	NodeServiceSince string `json:"nodeServiceSince,omitempty"`
	// Lease is the node service's heartbeat Lease (namespace probeshim-node-lease), nil when none.
	Lease *LeaseStatus `json:"lease,omitempty"`
	// Version of the node service: "unknown", as no object records it yet.
	Version string `json:"version"`
	// Pods and Probes count the entries of the node's NodePodProbe spec.
	Pods   int `json:"pods"`
	Probes int `json:"probes"`
	// ProbesLate is the node service's note that its probes start late (empty when they do not).
	ProbesLate string `json:"probesLate,omitempty"`
}

// LeaseStatus is a node service's heartbeat Lease.
type LeaseStatus struct {
	Holder          string            `json:"holder,omitempty"`
	RenewTime       *metav1.MicroTime `json:"renewTime,omitempty"`
	DurationSeconds int32             `json:"durationSeconds,omitempty"`
	// AgeSeconds is how long ago it was renewed.
	AgeSeconds *int64 `json:"ageSeconds,omitempty"`
}

// KruiseStatus is what the cluster part's OpenKruise detector published (ConfigMap
// probeshim-kruise-status) and what was handed over (ConfigMap probeshim-kruise-handover).
type KruiseStatus struct {
	// ConfigMap is the status ConfigMap, namespace/name.
	ConfigMap string `json:"configMap"`
	// Published is false while there is no status ConfigMap: the cluster part is not running, or
	// runs with --kruise-detect-period=0 (detection off).
	Published bool `json:"published"`
	// Installed: any of Kruise's objects was found.
	Installed bool `json:"installed"`
	// Work is who acts on each kind of work: probes and crr.
	Work []KruiseWork `json:"work"`
	// Conflicts are the live Kruise parts that do what probeshim does.
	Conflicts []kruise.Conflict `json:"conflicts,omitempty"`
	// Unreadable is what the detector could not read (each counts as a live Kruise part).
	Unreadable []string `json:"unreadable,omitempty"`
}

// KruiseWork is one kind of work and its actor.
type KruiseWork struct {
	Work kruise.Work `json:"work"`
	// Actor is "probeshim", or "kruise" while probeshim holds the work off (Held says why).
	Actor string `json:"actor"`
	Held  string `json:"held,omitempty"`
	// HandedOver: `probeshim-cluster kruise handover` handed this work from Kruise to probeshim.
	HandedOver bool `json:"handedOver"`
}

// DeciderStatus is the liveness decider's configuration and its open circuit breakers.
type DeciderStatus struct {
	// ConfigMap is namespace/name of its configuration.
	ConfigMap string `json:"configMap"`
	// Config is "ok", "absent" (the defaults apply; but a decider that had read one holds every
	// restart until it is back), "invalid" (every restart is held; Error says why) or
	// "unreadable" (see Status.Unreadable).
	Config string `json:"config"`
	Error  string `json:"error,omitempty"`
	// Settings are the switches in force, nil while the document is invalid.
	Settings *DeciderSettings `json:"settings,omitempty"`
	// Breakers are the pods whose last decision was held by an open circuit breaker (their
	// workload's or their node's) and whose liveness still fails.
	Breakers []BreakerHold `json:"breakers"`
}

// DeciderSettings are the decider's switches, every default filled in.
type DeciderSettings struct {
	Enabled               bool    `json:"enabled"`
	DryRun                bool    `json:"dryRun"`
	QPS                   float64 `json:"qps"`
	Burst                 int     `json:"burst"`
	NamespaceQPS          float64 `json:"namespaceQPS"`
	NamespaceBurst        int     `json:"namespaceBurst"`
	DefaultMaxUnavailable string  `json:"defaultMaxUnavailable"`
	// The workload's breaker opens above FailingShare of its pods and at MinFailingPods; the
	// node's above NodeFailingShare and at NodeMinFailingPods.
	FailingShare       string            `json:"failingShare"`
	MinFailingPods     int               `json:"minFailingPods"`
	NodeFailingShare   string            `json:"nodeFailingShare"`
	NodeMinFailingPods int               `json:"nodeMinFailingPods"`
	Blacklist          decider.Blacklist `json:"blacklist"`
}

// BreakerHold is a pod held by an open breaker.
type BreakerHold struct {
	Pod  string `json:"pod"` // namespace/name
	Node string `json:"node,omitempty"`
	// Reason is CircuitBreakerOpen (the workload's breaker) or NodeSuspected (the node's).
	Reason  string      `json:"reason"`
	Since   metav1.Time `json:"since"`
	Message string      `json:"message"`
}

// MarkerStatus is one PodProbeMarker.
type MarkerStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Probes    int    `json:"probes"`
	// MatchedPods is the marker's status.matchedPods; Current is false while the status is of an
	// older generation.
	MatchedPods int64 `json:"matchedPods"`
	Current     bool  `json:"current"`
	// PlacedPods counts the pods with its probes in a NodePodProbe.
	PlacedPods int `json:"placedPods"`
	// NodeBudget is the status of its NodeBudget condition ("" without one), with its message
	// while False (nodes that leave the marker out).
	NodeBudget        string `json:"nodeBudget,omitempty"`
	NodeBudgetMessage string `json:"nodeBudgetMessage,omitempty"`
	// DryRun: the marker writes nothing on pods (annotation probeshim.io/dry-run).
	DryRun bool `json:"dryRun"`
	// Results counts the pods per probe and state (annotation probeshim.io/results); absent until
	// the cluster part counted them.
	Results v1alpha1.ResultCounts `json:"results,omitempty"`
	// Unprobed counts the matched pods no node service probes, and UnprobedReasons says why
	// (annotations probeshim.io/unprobed and probeshim.io/unprobed-reasons); nil until counted.
	Unprobed        *int           `json:"unprobed,omitempty"`
	UnprobedReasons map[string]int `json:"unprobedReasons,omitempty"`
}

// markerRollout fills ms's dry run and counts from m's annotations (see v1alpha1.AnnotationDryRun:
// annotations, because Kruise's CRD prunes unknown status fields).
func markerRollout(ms *MarkerStatus, m *v1alpha1.PodProbeMarker) {
	ms.DryRun = v1alpha1.DryRun(m)
	if r, ok := v1alpha1.ParseResults(m); ok {
		ms.Results = r
	}
	if n, reasons, ok := v1alpha1.ParseUnprobed(m); ok {
		ms.Unprobed, ms.UnprobedReasons = &n, reasons
	}
}

// mode is "dry-run" or "live".
func (ms *MarkerStatus) mode() string {
	if ms.DryRun {
		return "dry-run"
	}
	return "live"
}

// resultsText is the summed counts, "-" before the first count.
func (ms *MarkerStatus) resultsText() string {
	if ms.Results == nil {
		return "-"
	}
	t := ms.Results.Total()
	return fmt.Sprintf("%d/%d/%d/%d", t.Succeeded, t.Failed, t.Unknown, t.Error)
}

// unprobedText is "-" before the first count.
func (ms *MarkerStatus) unprobedText() string {
	if ms.Unprobed == nil {
		return "-"
	}
	return fmt.Sprint(*ms.Unprobed)
}

// reasonsText is "NodeNotServed=2, VirtualNode=1", escaped: anyone who may edit the marker may
// write these annotations.
func reasonsText(reasons map[string]int) string {
	return termsafe.Escape(strings.ReplaceAll(v1alpha1.FormatUnprobed(reasons), ",", ", "))
}

// GetStatus reads the status; markerNamespace "" lists the markers of every namespace. Only a
// failure to list Nodes is an error: whatever else cannot be read is named in Unreadable.
func GetStatus(ctx context.Context, c client.Reader, clusterNamespace, markerNamespace string, now time.Time) (*Status, error) {
	st := &Status{Kind: "Status", APIVersion: OutputAPIVersion, Nodes: []NodeStatus{}, Markers: []MarkerStatus{}}
	unreadable := func(what string, err error) { st.Unreadable = append(st.Unreadable, what+": "+err.Error()) }

	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(heartbeat.LeaseNamespace)); err != nil {
		unreadable("heartbeat Leases in "+heartbeat.LeaseNamespace, err)
	}
	var npps v1alpha1.NodePodProbeList
	if err := c.List(ctx, &npps); err != nil && !meta.IsNoMatchError(err) {
		unreadable("NodePodProbes", err)
	}
	st.Nodes = nodeStatuses(nodes.Items, leases.Items, npps.Items, now)
	st.Kruise = kruiseStatus(ctx, c, clusterNamespace, unreadable)
	st.Decider = deciderStatus(ctx, c, clusterNamespace, npps.Items, unreadable)
	st.Markers = markerStatuses(ctx, c, markerNamespace, npps.Items, unreadable)
	return st, nil
}

func nodeStatuses(nodes []corev1.Node, leases []coordinationv1.Lease, npps []v1alpha1.NodePodProbe, now time.Time) []NodeStatus {
	byName := map[string]*NodeStatus{}
	for _, n := range nodes {
		byName[n.Name] = &NodeStatus{Name: n.Name, Served: n.Labels[v1alpha1.LabelNodeServed] == "true", Version: "unknown"}
	}
	for _, l := range leases {
		ns := byName[l.Name]
		if ns == nil {
			ns = &NodeStatus{Name: l.Name, NoNodeObject: true, Version: "unknown"}
			byName[l.Name] = ns
		}
		ls := &LeaseStatus{Holder: ptrOr(l.Spec.HolderIdentity), RenewTime: l.Spec.RenewTime, DurationSeconds: ptrOr(l.Spec.LeaseDurationSeconds)}
		if l.Spec.RenewTime != nil {
			ls.AgeSeconds = age(now, l.Spec.RenewTime.Time)
		}
		ns.Lease = ls
	}
	for _, npp := range npps {
		ns := byName[npp.Name]
		if ns == nil {
			continue // a node gone: its NodePodProbe goes with it
		}
		ns.NodeService = npp.Annotations[v1alpha1.AnnotationNodeService]
		ns.NodeServiceSince = npp.Annotations[v1alpha1.AnnotationNodeServiceSince]
		ns.ProbesLate = npp.Annotations[v1alpha1.AnnotationProbesLate]
		ns.Pods = len(npp.Spec.PodProbes)
		for _, pp := range npp.Spec.PodProbes {
			ns.Probes += len(pp.Probes)
		}
	}
	out := make([]NodeStatus, 0, len(byName))
	for _, ns := range byName {
		out = append(out, *ns)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func kruiseStatus(ctx context.Context, c client.Reader, ns string, unreadable func(string, error)) KruiseStatus {
	ks := KruiseStatus{ConfigMap: ns + "/" + kruise.StatusConfigMap}
	var obs kruise.Observation
	cm := &corev1.ConfigMap{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: kruise.StatusConfigMap}, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		unreadable("ConfigMap "+ks.ConfigMap, err)
	default:
		if err := json.Unmarshal([]byte(cm.Data["observation"]), &obs); err != nil {
			unreadable("ConfigMap "+ks.ConfigMap+" key observation", err)
		} else {
			ks.Published = true
		}
	}
	ks.Installed, ks.Unreadable = obs.Installed, obs.Unreadable
	ks.Conflicts = obs.Conflicts()
	rec, _, err := kruise.ReadRecord(ctx, c, ns)
	if err != nil {
		unreadable("ConfigMap "+ns+"/"+kruise.HandoverConfigMap, err)
	}
	for _, w := range []kruise.Work{kruise.WorkProbes, kruise.WorkCRR} {
		kw := KruiseWork{Work: w, Actor: "probeshim"}
		_, kw.HandedOver = rec[w]
		if ks.Published {
			if why := obs.Holds(w); why != "" {
				kw.Actor, kw.Held = "kruise", why
			}
		}
		ks.Work = append(ks.Work, kw)
	}
	return ks
}

// breakerReasons are the decisions an open circuit breaker makes.
var breakerReasons = []string{string(decider.ReasonCircuitBreakerOpen), string(decider.ReasonNodeSuspected)}

func deciderStatus(ctx context.Context, c client.Reader, ns string, npps []v1alpha1.NodePodProbe, unreadable func(string, error)) DeciderStatus {
	ds := DeciderStatus{ConfigMap: ns + "/" + decider.ConfigMapName, Breakers: []BreakerHold{}}
	cm := &corev1.ConfigMap{}
	var s *decider.Settings
	var cfg decider.Config
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: decider.ConfigMapName}, cm); {
	case apierrors.IsNotFound(err):
		ds.Config, s = "absent", decider.DefaultSettings()
	case err != nil:
		ds.Config = "unreadable"
		unreadable("ConfigMap "+ds.ConfigMap, err)
	default:
		doc, ok := cm.Data[decider.ConfigKey]
		if !ok {
			ds.Config, s = "absent", decider.DefaultSettings()
			break
		}
		if s, err = decider.ParseConfig(doc); err != nil {
			ds.Config, ds.Error = "invalid", err.Error()
			break
		}
		ds.Config = "ok"
		_ = yaml.UnmarshalStrict([]byte(doc), &cfg) // parsed above: only for the blacklist as written
	}
	if s != nil {
		ds.Settings = &DeciderSettings{Enabled: s.Enabled, DryRun: s.DryRun, QPS: s.QPS, Burst: s.Burst,
			NamespaceQPS: s.NamespaceQPS, NamespaceBurst: s.NamespaceBurst, DefaultMaxUnavailable: s.DefaultMaxUnavailable.String(),
			FailingShare: s.FailingShare.String(), MinFailingPods: s.MinFailingPods,
			NodeFailingShare: s.NodeFailingShare.String(), NodeMinFailingPods: s.NodeMinFailingPods, Blacklist: cfg.Blacklist}
	}

	// A breaker's hold stays the pod's last decision after its failure heals, so only the pods
	// whose liveness probe still fails count.
	failing := map[string]bool{}
	for _, npp := range npps {
		for _, ps := range npp.Status.PodProbeStatuses {
			for _, s := range ps.ProbeStates {
				if _, ok := v1alpha1.ParseLivenessProbeName(s.Name); ok && s.State == v1alpha1.ProbeFailed {
					failing[ps.UID] = true
				}
			}
		}
	}
	if len(failing) == 0 {
		return ds
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		unreadable("pods (for the breakers' holds)", err)
		return ds
	}
	for _, p := range pods.Items {
		if !failing[string(p.UID)] {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == decider.ConditionLivenessRestart && slices.Contains(breakerReasons, cond.Reason) {
				ds.Breakers = append(ds.Breakers, BreakerHold{Pod: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName,
					Reason: cond.Reason, Since: cond.LastTransitionTime, Message: cond.Message})
			}
		}
	}
	slices.SortFunc(ds.Breakers, func(a, b BreakerHold) int { return cmp.Compare(a.Pod, b.Pod) })
	return ds
}

func markerStatuses(ctx context.Context, c client.Reader, ns string, npps []v1alpha1.NodePodProbe, unreadable func(string, error)) []MarkerStatus {
	out := []MarkerStatus{}
	var markers v1alpha1.PodProbeMarkerList
	if err := c.List(ctx, &markers, client.InNamespace(ns)); err != nil {
		unreadable("PodProbeMarkers", err)
		return out
	}
	placed := map[string]int{} // namespace/marker -> pods
	for _, npp := range npps {
		for _, pp := range npp.Spec.PodProbes {
			seen := map[string]bool{}
			for _, p := range pp.Probes {
				if m, _, ok := v1alpha1.SplitProbeName(p.Name); ok && !seen[m] {
					seen[m] = true
					placed[pp.Namespace+"/"+m]++
				}
			}
		}
	}
	for _, m := range markers.Items {
		ms := MarkerStatus{Namespace: m.Namespace, Name: m.Name, Probes: len(m.Spec.Probes), MatchedPods: m.Status.MatchedPods,
			Current: m.Status.ObservedGeneration == m.Generation, PlacedPods: placed[m.Namespace+"/"+m.Name]}
		if cond := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.PodProbeMarkerNodeBudget); cond != nil {
			ms.NodeBudget = string(cond.Status)
			if cond.Status != metav1.ConditionTrue {
				ms.NodeBudgetMessage = cond.Message
			}
		}
		markerRollout(&ms, &m)
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b MarkerStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Text writes the status for a person.
func (st *Status) Text(w io.Writer) {
	served := 0
	for _, n := range st.Nodes {
		if n.Served {
			served++
		}
	}
	fmt.Fprintf(w, "Nodes: %d of %d served (label %s=true)\n", served, len(st.Nodes), v1alpha1.LabelNodeServed)
	if len(st.Nodes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tSERVED\tNODE SERVICE\tLEASE AGE\tHOLDER\tVERSION\tPODS\tPROBES")
		for _, n := range st.Nodes {
			servedCol := map[bool]string{true: "yes", false: "no"}[n.Served]
			if n.NoNodeObject {
				servedCol = "no Node"
			}
			svc := cmp.Or(n.NodeService, "-")
			if n.NodeServiceSince != "" {
				svc += " since " + n.NodeServiceSince
			}
			leaseAge, holder := "no lease", "-"
			if n.Lease != nil {
				leaseAge, holder = humanAge(n.Lease.AgeSeconds), cmp.Or(n.Lease.Holder, "-")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.Name, servedCol, svc, leaseAge, termsafe.Escape(holder), n.Version, n.Pods, n.Probes)
		}
		tw.Flush()
		for _, n := range st.Nodes {
			if n.ProbesLate != "" {
				fmt.Fprintf(w, "  %s: probes start late: %s\n", n.Name, termsafe.Escape(n.ProbesLate))
			}
		}
	}
	fmt.Fprintln(w)
	st.Kruise.text(w)
	fmt.Fprintln(w)
	st.Decider.text(w)
	fmt.Fprintln(w)
	st.textMarkers(w)
	if len(st.Unreadable) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Not readable with this kubeconfig:")
		for _, u := range st.Unreadable {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(u))
		}
	}
}

func (k *KruiseStatus) text(w io.Writer) {
	switch {
	case !k.Published:
		fmt.Fprintf(w, "OpenKruise: not known (no ConfigMap %s: the cluster part is not running, or its detection is off)\n", k.ConfigMap)
	case k.Installed:
		fmt.Fprintf(w, "OpenKruise: installed (ConfigMap %s)\n", k.ConfigMap)
	default:
		fmt.Fprintf(w, "OpenKruise: not installed (ConfigMap %s)\n", k.ConfigMap)
	}
	for _, kw := range k.Work {
		line := "probeshim acts"
		if kw.Actor != "probeshim" {
			line = "held off, OpenKruise acts: " + kw.Held
		}
		if kw.HandedOver {
			line += " (handed over from OpenKruise)"
		}
		fmt.Fprintf(w, "  %-7s %s\n", string(kw.Work)+":", line)
	}
	for _, u := range k.Unreadable {
		fmt.Fprintf(w, "  unreadable to the detector (counts as live): %s\n", u)
	}
}

func (d *DeciderStatus) text(w io.Writer) {
	switch d.Config {
	case "ok":
		fmt.Fprintf(w, "Liveness decider: ConfigMap %s\n", d.ConfigMap)
	case "absent":
		fmt.Fprintf(w, "Liveness decider: no ConfigMap %s: the defaults (a decider that read one before holds every restart until it is back)\n", d.ConfigMap)
	case "invalid":
		fmt.Fprintf(w, "Liveness decider: ConfigMap %s is INVALID, every restart is held: %s\n", d.ConfigMap, d.Error)
	default:
		fmt.Fprintf(w, "Liveness decider: ConfigMap %s unreadable\n", d.ConfigMap)
	}
	if s := d.Settings; s != nil {
		fmt.Fprintf(w, "  enabled: %t, dry run: %t\n", s.Enabled, s.DryRun)
		fmt.Fprintf(w, "  rate limit: %v/s (burst %d), per namespace %v/s (burst %d); default max unavailable %s\n",
			s.QPS, s.Burst, s.NamespaceQPS, s.NamespaceBurst, s.DefaultMaxUnavailable)
		fmt.Fprintf(w, "  circuit breaker: a workload's over %s of its pods and at least %d failing; a node's over %s and at least %d\n",
			s.FailingShare, s.MinFailingPods, s.NodeFailingShare, s.NodeMinFailingPods)
		var bl []string
		for _, l := range []struct {
			what  string
			names []string
		}{{"namespaces", s.Blacklist.Namespaces}, {"selectors", s.Blacklist.Selectors}, {"workloads", s.Blacklist.Workloads}} {
			if len(l.names) > 0 {
				bl = append(bl, l.what+" "+strings.Join(l.names, ", "))
			}
		}
		if len(bl) > 0 {
			fmt.Fprintf(w, "  blacklist: %s\n", termsafe.Escape(strings.Join(bl, "; ")))
		}
	}
	if len(d.Breakers) == 0 {
		fmt.Fprintln(w, "  breakers open: none (no pod whose liveness fails is held by a breaker)")
	} else {
		fmt.Fprintf(w, "  breakers open: %d pod(s) whose liveness fails are held by one:\n", len(d.Breakers))
		for _, b := range d.Breakers {
			fmt.Fprintf(w, "    %s on %s: %s since %s: %s\n", b.Pod, cmp.Or(b.Node, "-"), b.Reason,
				b.Since.UTC().Format(time.RFC3339), termsafe.Escape(b.Message))
		}
	}
}

func (st *Status) textMarkers(w io.Writer) {
	fmt.Fprintf(w, "Markers: %d\n", len(st.Markers))
	if len(st.Markers) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tMODE\tPROBES\tMATCHED PODS\tPLACED PODS\tRESULTS S/F/U/E\tUNPROBED\tNODE BUDGET")
		for _, m := range st.Markers {
			matched := fmt.Sprint(m.MatchedPods)
			if !m.Current {
				matched += " (status behind)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", m.Namespace, m.Name, m.mode(), m.Probes, matched, m.PlacedPods,
				m.resultsText(), m.unprobedText(), cmp.Or(m.NodeBudget, "-"))
		}
		tw.Flush()
		for _, m := range st.Markers {
			if m.NodeBudgetMessage != "" {
				fmt.Fprintf(w, "  %s/%s: %s\n", m.Namespace, m.Name, termsafe.Escape(m.NodeBudgetMessage))
			}
			if m.Unprobed != nil && *m.Unprobed > 0 {
				fmt.Fprintf(w, "  %s/%s: %d matched pod(s) not probed: %s\n", m.Namespace, m.Name, *m.Unprobed, reasonsText(m.UnprobedReasons))
			}
			if len(m.Results) > 1 {
				for _, probe := range slices.Sorted(maps.Keys(m.Results)) {
					fmt.Fprintf(w, "  %s/%s probe %s: %s\n", m.Namespace, m.Name, termsafe.Escape(probe), m.Results[probe])
				}
			}
		}
		if st.anyDryRun() {
			fmt.Fprintln(w, "  (dry-run: probes run and are counted, nothing is written on pods; go live with")
			fmt.Fprintln(w, "   kubectl annotate ppm NAME probeshim.io/dry-run=false --overwrite)")
		}
	}
}

func (st *Status) anyDryRun() bool {
	return slices.ContainsFunc(st.Markers, func(m MarkerStatus) bool { return m.DryRun })
}
