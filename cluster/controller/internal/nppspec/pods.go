// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// Probeable reports whether pod is ready to be probed by the node service: bound to a node,
// initialised (so its containers are starting or running), with an IP, and neither finished nor
// terminating. Only such pods get NodePodProbe entries; an entry disappears when its pod stops
// being probeable.
func Probeable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ResolvePorts returns a copy of probe whose httpGet and tcpSocket ports are numbers, named
// ports looked up in container's ports as the kubelet does. The node service sees only the
// NodePodProbe, not the pod, so it cannot resolve names itself.
func ResolvePorts(probe *corev1.Probe, container *corev1.Container) (*corev1.Probe, error) {
	out := probe.DeepCopy()
	if out.HTTPGet != nil {
		p, err := resolvePort(out.HTTPGet.Port, container)
		if err != nil {
			return nil, fmt.Errorf("httpGet: %w", err)
		}
		out.HTTPGet.Port = p
	}
	if out.TCPSocket != nil {
		p, err := resolvePort(out.TCPSocket.Port, container)
		if err != nil {
			return nil, fmt.Errorf("tcpSocket: %w", err)
		}
		out.TCPSocket.Port = p
	}
	return out, nil
}

func resolvePort(port intstr.IntOrString, container *corev1.Container) (intstr.IntOrString, error) {
	if port.Type != intstr.String {
		return port, nil
	}
	for _, cp := range container.Ports {
		if cp.Name == port.StrVal {
			return intstr.FromInt32(cp.ContainerPort), nil
		}
	}
	// The kubelet's last resort: a number written as a string.
	if n, err := strconv.Atoi(port.StrVal); err == nil && n > 0 && n < 65536 {
		return intstr.FromInt32(int32(n)), nil
	}
	return port, fmt.Errorf("container %q has no port named %q", container.Name, port.StrVal)
}

// PodNodeIndex is the field index of pods by spec.nodeName; register it with a PodIndex.
const PodNodeIndex = "spec.nodeName"

// PodIndex adds PodNodeIndex to one manager's cache once, however many controllers ask: whoever
// sets up several controllers on one manager makes one PodIndex and hands it to each.
type PodIndex struct {
	indexer client.FieldIndexer
	once    sync.Once
	err     error
}

// NewPodIndex returns the PodIndex of indexer (the manager's GetFieldIndexer).
func NewPodIndex(indexer client.FieldIndexer) *PodIndex { return &PodIndex{indexer: indexer} }

// Ensure registers the index the first time it is called and returns that call's error after.
func (p *PodIndex) Ensure(ctx context.Context) error {
	p.once.Do(func() {
		p.err = p.indexer.IndexField(ctx, &corev1.Pod{}, PodNodeIndex, func(o client.Object) []string {
			if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
				return []string{n}
			}
			return nil
		})
	})
	return p.err
}

// PodsOnNode lists the cached pods bound to node.
func PodsOnNode(ctx context.Context, r client.Reader, node string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.MatchingFields{PodNodeIndex: node}); err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// SelectorMatches reports whether m's selector matches pod (same namespace), whether or not m is
// being deleted. A loop over many pods parses the selector once with MarkerSelector instead.
func SelectorMatches(m *v1alpha1.PodProbeMarker, pod *corev1.Pod) bool {
	return m.Namespace == pod.Namespace && MarkerSelector(m).Matches(labels.Set(pod.Labels))
}

// MarkerSelector is m's pod selector (pods of m's namespace only). A nil, empty or invalid selector
// matches nothing: validation rejects them, and an empty one would otherwise match every pod of
// the namespace.
func MarkerSelector(m *v1alpha1.PodProbeMarker) labels.Selector {
	if m.Spec.Selector == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(m.Spec.Selector)
	if err != nil || sel.Empty() {
		return labels.Nothing()
	}
	return sel
}

// CheckProbe returns why the NodePodProbe admission or the node service would refuse probe (after
// ResolvePorts) in the entry of a pod with podIP, or nil. A probe is checked before it is placed
// because the admission validates the whole spec: one refused probe would block every write of
// the node's NodePodProbe, for both mapping controllers.
func CheckProbe(probe *corev1.Probe, podIP string, liveness bool, path *field.Path) error {
	return validation.ValidateProbe(probe, validation.ProbeOptions{PodIP: podIP, Liveness: liveness}, path).ToAggregate()
}
