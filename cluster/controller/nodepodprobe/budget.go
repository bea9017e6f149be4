// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// DefaultNodeBudget is how many bytes the probes of one node may cost in its NodePodProbe (see
// nppspec.DefaultNodeBudget).
const DefaultNodeBudget = nppspec.DefaultNodeBudget

// markerLoads sums the cost of each marker's probes in entries (marker entries only). Each marker
// pays for the pod entries it appears in, as if it were alone there, so the estimate stays an
// upper bound.
func markerLoads(entries []v1alpha1.PodProbe) []nppspec.Load {
	by := map[string]*nppspec.Load{}
	for i := range entries {
		pp := &entries[i]
		onPod := map[string]bool{}
		for j := range pp.Probes {
			m, _, ok := v1alpha1.SplitProbeName(pp.Probes[j].Name)
			if !ok {
				continue
			}
			k := markerKey(pp.Namespace, m)
			l := by[k]
			if l == nil {
				l = &nppspec.Load{Namespace: pp.Namespace, Name: m}
				by[k] = l
			}
			l.Bytes += nppspec.ProbeCost(&pp.Probes[j])
			if !onPod[k] {
				onPod[k] = true
				l.Bytes += nppspec.PodCost(pp)
			}
		}
	}
	out := make([]nppspec.Load, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b nppspec.Load) int { return cmp.Compare(a.Key(), b.Key()) })
	return out
}

// leftOutReason says why a node leaves a marker out.
func leftOutReason(l nppspec.LeftOut, node string, budget int) string {
	return fmt.Sprintf("node %s has no room for its probes: they would cost %d bytes of the node's NodePodProbe, and namespace %s "+
		"asks for %d bytes there, over its fair share of %d of the %d bytes left for markers (node budget %d bytes, "+
		"enhanced liveness probes first); select fewer pods per node, use fewer or smaller probes, or ask the "+
		"administrator to raise --node-probe-budget",
		node, l.Bytes, l.Namespace, l.NSBytes, l.Share, l.Available, budget)
}

// without returns entries without the probes of the markers in out; pods left without probes are
// dropped.
func without(entries []v1alpha1.PodProbe, out []nppspec.LeftOut) []v1alpha1.PodProbe {
	if len(out) == 0 {
		return entries
	}
	drop := map[string]bool{}
	for _, l := range out {
		drop[l.Key()] = true
	}
	var res []v1alpha1.PodProbe
	for _, pp := range entries {
		probes := make([]v1alpha1.ContainerProbe, 0, len(pp.Probes))
		for _, p := range pp.Probes {
			if m, _, ok := v1alpha1.SplitProbeName(p.Name); ok && drop[markerKey(pp.Namespace, m)] {
				continue
			}
			probes = append(probes, p)
		}
		if len(probes) > 0 {
			pp.Probes = probes
			res = append(res, pp)
		}
	}
	return res
}

// budgetBook remembers, per node, the markers it leaves out and why, for the marker status. It is
// in memory: after a restart every node is reconciled again and fills it.
type budgetBook struct {
	mu     sync.Mutex
	byNode map[string]map[string]string // node -> marker key -> reason
}

// set records the markers node leaves out and returns the keys of markers whose entry changed.
func (b *budgetBook) set(node string, reasons map[string]string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byNode == nil {
		b.byNode = map[string]map[string]string{}
	}
	before := b.byNode[node]
	var changed []string
	for k, r := range reasons {
		if before[k] != r {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := reasons[k]; !ok {
			changed = append(changed, k)
		}
	}
	if len(reasons) == 0 {
		delete(b.byNode, node)
	} else {
		b.byNode[node] = reasons
	}
	slices.Sort(changed)
	return changed
}

// leftOutOn reports whether node leaves out the marker.
func (b *budgetBook) leftOutOn(node, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.byNode[node][key]
	return ok
}

// nodes returns the nodes that leave out the marker, sorted, and the reason of the first.
func (b *budgetBook) nodes(key string) ([]string, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var nodes []string
	for n, rs := range b.byNode {
		if _, ok := rs[key]; ok {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, ""
	}
	slices.Sort(nodes)
	return nodes, b.byNode[nodes[0]][key]
}

// budgetMessage is the condition message for a marker left out on nodes, bounded whatever the
// number of nodes.
func budgetMessage(nodes []string, first string) string {
	const maxNames = 10
	names := nodes
	more := ""
	if len(names) > maxNames {
		names = names[:maxNames]
		more = fmt.Sprintf(" and %d more", len(nodes)-maxNames)
	}
	msg := fmt.Sprintf("probes left out on %d node(s) (%s%s) to keep each node's NodePodProbe within its budget; %s",
		len(nodes), strings.Join(names, ", "), more, first)
	return validation.TruncateMessage(msg, validation.MaxProbeMessageBytes)
}
