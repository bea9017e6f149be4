// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// RequiredPolicies are the ValidatingAdmissionPolicies of cluster/deploy/admission-policies.yaml,
// each bound (Deny) by a binding of the same name. probeshim's security relies on them: without
// them any node could write any node's results or renew any node's heartbeat, and anyone who can
// patch pods could forge the deployment's records or change which commands the liveness probes run,
// and the deployment's right to patch Nodes would reach beyond their served label.
var RequiredPolicies = []string{
	"probeshim-nodepodprobe-writers",
	"probeshim-crr-status-writers",
	"probeshim-node-lease-writers",
	"probeshim-pod-records",
	"probeshim-pod-liveness-context",
	"probeshim-node-served-label",
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies,verbs=get
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicybindings,verbs=get

// MissingPolicies returns what of RequiredPolicies the cluster lacks, each with why: the policy,
// or a binding of the same name that names it and denies.
func MissingPolicies(ctx context.Context, r client.Reader) ([]string, error) {
	var missing []string
	for _, name := range RequiredPolicies {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := r.Get(ctx, client.ObjectKey{Name: name}, p); apierrors.IsNotFound(err) {
			missing = append(missing, "ValidatingAdmissionPolicy "+name)
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", name, err)
		}
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		err := r.Get(ctx, client.ObjectKey{Name: name}, b)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, "ValidatingAdmissionPolicyBinding "+name)
		case err != nil:
			return nil, fmt.Errorf("reading ValidatingAdmissionPolicyBinding %s: %w", name, err)
		case b.Spec.PolicyName != name || !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny):
			missing = append(missing, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s (binds %q with %v, want %q with Deny)",
				name, b.Spec.PolicyName, b.Spec.ValidationActions, name))
		}
	}
	return missing, nil
}

// PolicyChecker checks the required policies when the deployment starts and every Interval
// after, and says so loudly when any is missing: an error log naming them and the metric
// probeshim_admission_policies_missing. It does not stop the deployment: the webhooks and the
// controllers are still worth running, and an operator installing the policies fixes it live.
type PolicyChecker struct {
	Reader   client.Reader // uncached: the deployment may read these objects by name only
	Interval time.Duration // default 5 minutes
	missing  prometheus.Gauge
}

// NewPolicyChecker returns a PolicyChecker reading with r whose metric is registered on reg (the
// deployment passes controller-runtime's registry, which the manager serves; nil: none).
func NewPolicyChecker(r client.Reader, reg prometheus.Registerer) (*PolicyChecker, error) {
	c := &PolicyChecker{Reader: r, missing: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "probeshim_admission_policies_missing",
		Help: "Admission policies (or their Deny bindings) from cluster/deploy/admission-policies.yaml that the cluster lacks; anything above 0 leaves tenants and nodes rights probeshim's security model takes away.",
	})}
	if reg != nil {
		if err := reg.Register(c.missing); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// NeedLeaderElection: every replica reports for itself.
func (*PolicyChecker) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (c *PolicyChecker) Start(ctx context.Context) error {
	if c.missing == nil {
		c.missing = prometheus.NewGauge(prometheus.GaugeOpts{Name: "probeshim_admission_policies_missing"})
	}
	if c.Interval <= 0 {
		c.Interval = 5 * time.Minute
	}
	logger := logf.FromContext(ctx).WithName("admission-policies")
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		missing, err := MissingPolicies(ctx, c.Reader)
		switch {
		case err != nil:
			logger.Error(err, "cannot check the admission policies probeshim's security relies on")
		case len(missing) > 0:
			c.missing.Set(float64(len(missing)))
			logger.Error(nil, "admission policies that probeshim's security relies on are MISSING: install cluster/deploy/admission-policies.yaml; until then nodes may write each other's results and anyone who can patch pods may forge the deployment's records or change liveness commands without pods/exec",
				"missing", strings.Join(missing, ", "))
		default:
			c.missing.Set(0)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
