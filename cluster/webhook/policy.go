// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PolicyParamsName is the ConfigMap the ValidatingAdmissionPolicyBindings in cluster/deploy
// read their parameters from (paramRef), in the cluster deployment's namespace.
const PolicyParamsName = "probeshim-admission-params"

// Keys of the PolicyParamsName ConfigMap, as the policies' CEL reads them (params.data.<key>).
const (
	ParamClusterUsername = "clusterUsername"
	ParamNodeGroup       = "nodeGroup"
	ParamNodeUserPrefix  = "nodeUserPrefix"
)

// PolicyParams are the identities the admission policies trust.
type PolicyParams struct {
	// ClusterUsername is the cluster deployment's own user, e.g.
	// system:serviceaccount:probeshim-system:probeshim-cluster: the only writer of NodePodProbe specs.
	ClusterUsername string
	// NodeGroup and NodeUserPrefix describe node service identities from dedicated kubeconfigs: a
	// user in NodeGroup named NodeUserPrefix+<node> acts for <node>. Both empty: only the kubelet's
	// own identity (system:node:<node> in system:nodes) counts as a node.
	NodeGroup      string
	NodeUserPrefix string
}

// Validate rejects params the policies would misread.
func (p PolicyParams) Validate() error {
	var errs []error
	if p.ClusterUsername == "" {
		errs = append(errs, errors.New("the cluster deployment's username is required"))
	}
	if (p.NodeGroup == "") != (p.NodeUserPrefix == "") {
		errs = append(errs, errors.New("set both the node group and the node user prefix, or neither"))
	}
	// system:node: is the kubelet's own prefix; the policies already handle it, with its group.
	if strings.HasPrefix(p.NodeUserPrefix, "system:") {
		errs = append(errs, fmt.Errorf("node user prefix %q: system: names are reserved", p.NodeUserPrefix))
	}
	return errors.Join(errs...)
}

// EnsurePolicyParams writes p into the PolicyParamsName ConfigMap in namespace (server-side
// apply, so running it from every replica on every start is harmless). The deployment owns the
// parameters because its flags are where its identity is configured; until it has run once the
// bindings find no parameters and deny (parameterNotFoundAction: Deny), which costs nothing since
// nothing writes NodePodProbes before the deployment runs.
func EnsurePolicyParams(ctx context.Context, c client.Client, namespace string, p PolicyParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("admission policy parameters: %w", err)
	}
	cm := corev1ac.ConfigMap(PolicyParamsName, namespace).
		WithLabels(map[string]string{"app.kubernetes.io/name": "probeshim", "app.kubernetes.io/component": "admission"}).
		WithData(map[string]string{
			ParamClusterUsername: p.ClusterUsername,
			ParamNodeGroup:       p.NodeGroup,
			ParamNodeUserPrefix:  p.NodeUserPrefix,
		})
	if err := c.Apply(ctx, cm, client.FieldOwner("probeshim-cluster"), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing admission policy parameters %s/%s: %w", namespace, PolicyParamsName, err)
	}
	return nil
}
