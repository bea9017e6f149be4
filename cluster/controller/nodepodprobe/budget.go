// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// DefaultNodeBudget is how many bytes the probes of one node may cost in its NodePodProbe (see
// probeCost), far below etcd's 1.5 MiB request limit: the estimate covers the spec, the status
// (one state per probe with the smallest message share) and the field-manager bookkeeping, and
// validation.NodeStatusMessageBudget of longer messages comes on top. A full node is thus under
// 1 MiB in all, even with every probe failing.
const DefaultNodeBudget = 512 << 10

// Per-probe and per-pod costs in the stored object beyond the JSON of the spec entry, measured on
// a real API server (TestGreedyTenantIsLeftOutOverTheNodeBudget checks the estimate stays an upper
// bound; 1,282 small failing probes stored 462 bytes each plus their messages):
//   - a probe's status state: name, state, two timestamps (~130 bytes plus the name) and a message
//     of at least validation.MinProbeMessageBytes;
//   - metadata.managedFields, which lists every field of the spec entry and of its state again
//     (about the JSON's size without the values, ~120 bytes for the state).
const (
	probeStateBytes = 280
	podStatusBytes  = 128
)

// probeCost estimates what one NodePodProbe probe costs in the stored object.
func probeCost(p *v1alpha1.ContainerProbe) int {
	b, _ := json.Marshal(p)
	return 2*len(b) + 2*len(p.Name) + probeStateBytes + validation.MinProbeMessageBytes
}

// podCost estimates what the pod part of a NodePodProbe entry costs (its spec and status
// identity and their managed fields), without the probes.
func podCost(pp *v1alpha1.PodProbe) int {
	b, _ := json.Marshal(v1alpha1.PodProbe{Name: pp.Name, Namespace: pp.Namespace, UID: pp.UID, IP: pp.IP})
	return 3*len(b) + podStatusBytes
}

// entriesCost is the estimate of every probe owns accepts in pods, with their pods.
func entriesCost(pods []v1alpha1.PodProbe, owns func(string) bool) int {
	total := 0
	for i := range pods {
		n := 0
		for j := range pods[i].Probes {
			if owns(pods[i].Probes[j].Name) {
				n += probeCost(&pods[i].Probes[j])
			}
		}
		if n > 0 {
			total += n + podCost(&pods[i])
		}
	}
	return total
}

// markerLoad is what one marker's probes cost on one node. Each marker pays for the pod entries
// it appears in, as if it were alone there, so the estimate stays an upper bound.
type markerLoad struct {
	namespace, name string
	bytes           int
}

func (l markerLoad) key() string { return markerKey(l.namespace, l.name) }

// markerLoads sums the cost of each marker's probes in entries (marker entries only).
func markerLoads(entries []v1alpha1.PodProbe) []markerLoad {
	by := map[string]*markerLoad{}
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
				l = &markerLoad{namespace: pp.Namespace, name: m}
				by[k] = l
			}
			l.bytes += probeCost(&pp.Probes[j])
			if !onPod[k] {
				onPod[k] = true
				l.bytes += podCost(pp)
			}
		}
	}
	out := make([]markerLoad, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b markerLoad) int { return cmp.Compare(a.key(), b.key()) })
	return out
}

// leftOut is a marker whose probes a node leaves out, and why.
type leftOut struct {
	load      markerLoad
	nsBytes   int // what the marker's namespace asked for on the node
	share     int // the namespace's fair share
	available int // the node's budget left for markers
}

func (l leftOut) reason(node string, budget int) string {
	return fmt.Sprintf("node %s has no room for its probes: they would cost %d bytes of the node's NodePodProbe, and namespace %s "+
		"asks for %d bytes there, over its fair share of %d of the %d bytes left for markers (node budget %d bytes, "+
		"enhanced liveness probes first); select fewer pods per node, use fewer or smaller probes, or ask the "+
		"administrator to raise --node-probe-budget",
		node, l.load.bytes, l.load.namespace, l.nsBytes, l.share, l.available, budget)
}

// fit chooses the markers to leave out of a node whose marker probes may cost at most available
// bytes. Max-min fairness between namespaces: each namespace gets an equal share of what is
// available, a namespace that needs less than its share keeps all and leaves the rest to the
// others, and only namespaces over their share lose markers, the largest first (within a share,
// the smallest markers are kept). Room that remains after that (markers do not divide evenly) is
// given back to left-out markers, smallest first. Equal inputs give equal results.
func fit(loads []markerLoad, available int) []leftOut {
	total := 0
	byNS := map[string][]markerLoad{}
	for _, l := range loads {
		total += l.bytes
		byNS[l.namespace] = append(byNS[l.namespace], l)
	}
	if total <= available {
		return nil
	}
	avail := max(available, 0)
	type nsLoad struct {
		name  string
		bytes int
	}
	var nss []nsLoad
	for ns, ls := range byNS {
		n := 0
		for _, l := range ls {
			n += l.bytes
		}
		nss = append(nss, nsLoad{ns, n})
	}
	sort.Slice(nss, func(i, j int) bool {
		return cmp.Or(cmp.Compare(nss[i].bytes, nss[j].bytes), cmp.Compare(nss[i].name, nss[j].name)) < 0
	})

	remaining := avail
	used := 0
	share := -1
	var out []leftOut
	for i, ns := range nss {
		if share < 0 && ns.bytes <= remaining/(len(nss)-i) {
			remaining -= ns.bytes
			used += ns.bytes
			continue
		}
		// Over its share, as is every larger namespace after it: all get the same share.
		if share < 0 {
			share = remaining / (len(nss) - i)
		}
		ls := byNS[ns.name]
		slices.SortFunc(ls, func(a, b markerLoad) int { return cmp.Or(cmp.Compare(a.bytes, b.bytes), cmp.Compare(a.name, b.name)) })
		kept := 0
		for _, l := range ls {
			if kept+l.bytes <= share {
				kept += l.bytes
				continue
			}
			out = append(out, leftOut{load: l, nsBytes: ns.bytes, share: share})
		}
		used += kept
	}
	// Give back what the shares left unused, smallest marker first.
	slices.SortFunc(out, func(a, b leftOut) int {
		return cmp.Or(cmp.Compare(a.load.bytes, b.load.bytes), cmp.Compare(a.load.key(), b.load.key()))
	})
	kept := out[:0]
	for _, l := range out {
		if used+l.load.bytes <= avail {
			used += l.load.bytes
			continue
		}
		l.available = avail
		kept = append(kept, l)
	}
	return kept
}

// without returns entries without the probes of the markers in out; pods left without probes are
// dropped.
func without(entries []v1alpha1.PodProbe, out []leftOut) []v1alpha1.PodProbe {
	if len(out) == 0 {
		return entries
	}
	drop := map[string]bool{}
	for _, l := range out {
		drop[l.load.key()] = true
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
