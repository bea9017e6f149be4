// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/nodepodprobe"
	"github.com/probeshim/probeshim/internal/termsafe"
)

// DryRun is `kubectl probeshim dry-run`: what the API server and probeshim's webhooks say of a
// PodProbeMarker, and what it would place on which nodes.
type DryRun struct {
	Kind       string `json:"kind"` // "DryRun"
	APIVersion string `json:"apiVersion"`
	Marker     string `json:"marker"` // namespace/name
	// Operation is "create", or "update" when the marker exists.
	Operation string `json:"operation"`
	Admitted  bool   `json:"admitted"`
	// Refusal is the API server's or a webhook's message when not admitted.
	Refusal string `json:"refusal,omitempty"`
	// Pods are the pods of the namespace its selector matches, by name.
	Pods []MatchedPod `json:"pods"`
	// BudgetBytes is each node's NodePodProbe budget; BudgetSource where it was read.
	BudgetBytes  int    `json:"budgetBytes"`
	BudgetSource string `json:"budgetSource"`
	// Nodes are the nodes of the matched pods, by name.
	Nodes []NodeEstimate `json:"nodes"`
	// Unreadable lists what could not be read; the rest is shown.
	Unreadable []string `json:"unreadable,omitempty"`
}

// MatchedPod is a pod the marker selects.
type MatchedPod struct {
	Name string `json:"name"`
	Node string `json:"node,omitempty"`
	// Probeable: the pod gets NodePodProbe entries now (on a node, initialised, with an IP).
	Probeable bool `json:"probeable"`
}

// NodeEstimate is what the marker would place on one node (see nodepodprobe.MarkerEstimate).
type NodeEstimate struct {
	Node   string `json:"node"`
	Pods   int    `json:"pods"`
	Probes int    `json:"probes"`
	// Bytes is the marker's estimated cost there, NodeBytes the node's with it.
	Bytes     int      `json:"bytes"`
	NodeBytes int      `json:"nodeBytes"`
	LeftOut   string   `json:"leftOut,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
}

// budgetFlag is probeshim-cluster's flag of the node budget.
const budgetFlag = "--node-probe-budget"

// DryRunMarker dry-runs the marker in doc (one YAML or JSON document; namespace defaults to ns)
// and estimates its placement. The marker is sent as written, so that the API server's strict
// field validation names fields the schema does not have.
func DryRunMarker(ctx context.Context, c client.Client, doc []byte, ns, clusterNamespace string) (*DryRun, error) {
	u, err := decodeMarker(doc)
	if err != nil {
		return nil, err
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(ns)
	}
	dr := &DryRun{Kind: "DryRun", APIVersion: OutputAPIVersion, Marker: u.GetNamespace() + "/" + u.GetName(),
		Operation: "create", Pods: []MatchedPod{}, Nodes: []NodeEstimate{}}
	unreadable := func(what string, err error) { dr.Unreadable = append(dr.Unreadable, what+": "+err.Error()) }

	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(u.GroupVersionKind())
	switch err := c.Get(ctx, client.ObjectKeyFromObject(u), existing); {
	case err == nil:
		dr.Operation = "update"
		u.SetResourceVersion(existing.GetResourceVersion())
		err = c.Update(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
		dr.admit(err)
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
		dr.admit(err)
	default:
		return nil, fmt.Errorf("reading PodProbeMarker %s: %w", dr.Marker, err)
	}

	// As admitted (with the webhook's defaults), else as written.
	m := &v1alpha1.PodProbeMarker{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m); err != nil {
		unreadable("the marker as a PodProbeMarker", err)
		return dr, nil
	}
	sel := nodepodprobe.MarkerSelector(m)
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(m.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		unreadable("pods of namespace "+m.Namespace, err)
		return dr, nil
	}
	byNode := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		dr.Pods = append(dr.Pods, MatchedPod{Name: p.Name, Node: p.Spec.NodeName, Probeable: nodepodprobe.Probeable(&p)})
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	slices.SortFunc(dr.Pods, func(a, b MatchedPod) int { return cmp.Compare(a.Name, b.Name) })
	dr.BudgetBytes, dr.BudgetSource = nodeBudget(ctx, c, clusterNamespace)
	for node, onNode := range byNode {
		npp := &v1alpha1.NodePodProbe{}
		switch err := c.Get(ctx, client.ObjectKey{Name: node}, npp); {
		case apierrors.IsNotFound(err):
			npp = nil
		case err != nil:
			unreadable("NodePodProbe "+node+" (the node's other probes are not counted)", err)
			npp = nil
		}
		est := nodepodprobe.EstimateMarker(m, onNode, npp, node, dr.BudgetBytes)
		dr.Nodes = append(dr.Nodes, NodeEstimate{Node: node, Pods: est.Pods, Probes: est.Probes, Bytes: est.Bytes,
			NodeBytes: est.NodeBytes, LeftOut: est.LeftOut, Skipped: est.Skipped})
	}
	slices.SortFunc(dr.Nodes, func(a, b NodeEstimate) int { return cmp.Compare(a.Node, b.Node) })
	return dr, nil
}

// admit records the dry run's answer.
func (dr *DryRun) admit(err error) {
	if err == nil {
		dr.Admitted = true
		return
	}
	dr.Refusal = err.Error()
}

// decodeMarker reads the one PodProbeMarker of doc.
func decodeMarker(doc []byte) (*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the marker: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("want one PodProbeMarker in the file, found %d documents", len(objs))
	}
	u := objs[0]
	if gvk := u.GroupVersionKind(); gvk != v1alpha1.SchemeGroupVersion.WithKind("PodProbeMarker") {
		return nil, fmt.Errorf("want apiVersion %s, kind PodProbeMarker; the file has %q, kind %q", v1alpha1.SchemeGroupVersion, u.GetAPIVersion(), u.GetKind())
	}
	if u.GetName() == "" {
		return nil, errors.New("the marker has no metadata.name")
	}
	return u, nil
}

// nodeBudget reads --node-probe-budget from the cluster part's Deployment, else the default.
func nodeBudget(ctx context.Context, c client.Reader, ns string) (int, string) {
	def := "the default of probeshim-cluster " + budgetFlag
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return nodepodprobe.DefaultNodeBudget, def + " (the Deployments of " + ns + " are not readable)"
	}
	for _, d := range deps.Items {
		for _, ct := range d.Spec.Template.Spec.Containers {
			args := append(slices.Clone(ct.Command), ct.Args...)
			for i, a := range args {
				v, ok := strings.CutPrefix(a, budgetFlag+"=")
				if !ok && a == budgetFlag && i+1 < len(args) {
					v, ok = args[i+1], true
				}
				if n, err := strconv.Atoi(v); ok && err == nil && n > 0 {
					return n, fmt.Sprintf("%s of Deployment %s/%s", budgetFlag, ns, d.Name)
				}
			}
		}
	}
	return nodepodprobe.DefaultNodeBudget, def
}

// Text writes the dry run for a person.
func (dr *DryRun) Text(w io.Writer) {
	if dr.Admitted {
		fmt.Fprintf(w, "PodProbeMarker %s: admitted (server-side dry run, %s; nothing stored)\n", dr.Marker, dr.Operation)
	} else {
		fmt.Fprintf(w, "PodProbeMarker %s: REFUSED (server-side dry run, %s): %s\n", dr.Marker, dr.Operation, termsafe.Escape(dr.Refusal))
	}
	if len(dr.Pods) == 0 {
		fmt.Fprintln(w, "Selects no pod now.")
	} else {
		var names []string
		for _, p := range dr.Pods {
			n := p.Name + " (" + cmp.Or(p.Node, "not scheduled")
			if !p.Probeable && p.Node != "" {
				n += ", not ready to probe"
			}
			names = append(names, n+")")
		}
		fmt.Fprintf(w, "Selects %d pod(s): %s\n", len(dr.Pods), strings.Join(names, ", "))
	}
	if len(dr.Nodes) > 0 {
		fmt.Fprintf(w, "NodePodProbe budget: %d bytes per node (%s)\n", dr.BudgetBytes, dr.BudgetSource)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPODS\tPROBES\tMARKER BYTES\tNODE BYTES\tFITS")
		for _, n := range dr.Nodes {
			fits := "yes"
			if n.LeftOut != "" {
				fits = "NO, left out"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", n.Node, n.Pods, n.Probes, n.Bytes, n.NodeBytes, fits)
		}
		tw.Flush()
		for _, n := range dr.Nodes {
			if n.LeftOut != "" {
				fmt.Fprintf(w, "  %s: %s\n", n.Node, n.LeftOut)
			}
			for _, s := range n.Skipped {
				fmt.Fprintf(w, "  %s: not placed: %s\n", n.Node, termsafe.Escape(s))
			}
		}
	}
	for _, u := range dr.Unreadable {
		fmt.Fprintf(w, "Not readable with this kubeconfig: %s\n", u)
	}
}
