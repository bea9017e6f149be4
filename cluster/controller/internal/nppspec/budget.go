// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"cmp"
	"encoding/json"
	"slices"
	"sort"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// DefaultNodeBudget is how many bytes the probes of one node may cost in its NodePodProbe (see
// ProbeCost), far below etcd's 1.5 MiB request limit: the estimate covers the spec, the status
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

// ProbeCost estimates what one NodePodProbe probe costs in the stored object.
func ProbeCost(p *v1alpha1.ContainerProbe) int {
	b, _ := json.Marshal(p)
	return 2*len(b) + 2*len(p.Name) + probeStateBytes + validation.MinProbeMessageBytes
}

// PodCost estimates what the pod part of a NodePodProbe entry costs (its spec and status
// identity and their managed fields), without the probes.
func PodCost(pp *v1alpha1.PodProbe) int {
	b, _ := json.Marshal(v1alpha1.PodProbe{Name: pp.Name, Namespace: pp.Namespace, UID: pp.UID, IP: pp.IP})
	return 3*len(b) + podStatusBytes
}

// EntriesCost is the estimate of every probe owns accepts in pods, with their pods.
func EntriesCost(pods []v1alpha1.PodProbe, owns func(string) bool) int {
	total := 0
	for i := range pods {
		n := 0
		for j := range pods[i].Probes {
			if owns(pods[i].Probes[j].Name) {
				n += ProbeCost(&pods[i].Probes[j])
			}
		}
		if n > 0 {
			total += n + PodCost(&pods[i])
		}
	}
	return total
}

// Load is what one unit placed on a node costs there: one marker's probes (Name the marker), or
// one pod's enhanced liveness probes (Name the pod), of Namespace.
type Load struct {
	Namespace, Name string
	Bytes           int
}

// Key is "<namespace>/<name>".
func (l Load) Key() string { return l.Namespace + "/" + l.Name }

// LeftOut is a load a node leaves out, and why.
type LeftOut struct {
	Load
	NSBytes   int // what the load's namespace asked for on the node
	Share     int // the namespace's fair share
	Available int // the node's budget for loads of this kind
}

// Fit chooses the loads to leave out of a node whose probes of one kind may cost at most
// available bytes. Max-min fairness between namespaces: each namespace gets an equal share of what is
// available, a namespace that needs less than its share keeps all and leaves the rest to the
// others, and only namespaces over their share lose loads, the largest first (within a share,
// the smallest loads are kept). Room that remains after that (loads do not divide evenly) is
// given back to left-out loads, smallest first. Equal inputs give equal results.
func Fit(loads []Load, available int) []LeftOut {
	total := 0
	byNS := map[string][]Load{}
	for _, l := range loads {
		total += l.Bytes
		byNS[l.Namespace] = append(byNS[l.Namespace], l)
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
			n += l.Bytes
		}
		nss = append(nss, nsLoad{ns, n})
	}
	sort.Slice(nss, func(i, j int) bool {
		return cmp.Or(cmp.Compare(nss[i].bytes, nss[j].bytes), cmp.Compare(nss[i].name, nss[j].name)) < 0
	})

	remaining := avail
	used := 0
	share := -1
	var out []LeftOut
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
		slices.SortFunc(ls, func(a, b Load) int { return cmp.Or(cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.Name, b.Name)) })
		kept := 0
		for _, l := range ls {
			if kept+l.Bytes <= share {
				kept += l.Bytes
				continue
			}
			out = append(out, LeftOut{Load: l, NSBytes: ns.bytes, Share: share})
		}
		used += kept
	}
	// Give back what the shares left unused, smallest load first.
	slices.SortFunc(out, func(a, b LeftOut) int {
		return cmp.Or(cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.Key(), b.Key()))
	})
	kept := out[:0]
	for _, l := range out {
		if used+l.Bytes <= avail {
			used += l.Bytes
			continue
		}
		l.Available = avail
		kept = append(kept, l)
	}
	return kept
}
