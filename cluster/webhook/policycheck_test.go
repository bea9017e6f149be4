// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// The list the deployment checks is the list it ships.
func TestRequiredPoliciesAreShipped(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs, err := loadManifests(scheme, "admission-policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var policies, bindings []string
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policies = append(policies, o.Name)
			for _, v := range o.Spec.Variables {
				// Written out where parameters cannot be used: it must be the deployment's own.
				if v.Name == "clusterUsername" && v.Expression != "'"+clusterUser+"'" {
					t.Errorf("policy %s trusts %s, the deployment is %s", o.Name, v.Expression, clusterUser)
				}
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if o.Spec.PolicyName == o.Name && slices.Contains(o.Spec.ValidationActions, admissionregistrationv1.Deny) {
				bindings = append(bindings, o.Name)
			}
		}
	}
	want := slices.Sorted(slices.Values(RequiredPolicies))
	if slices.Sort(policies); !slices.Equal(policies, want) {
		t.Errorf("admission-policies.yaml has policies %v, the deployment checks %v", policies, want)
	}
	if slices.Sort(bindings); !slices.Equal(bindings, want) {
		t.Errorf("admission-policies.yaml binds (Deny, same name) %v, the deployment checks %v", bindings, want)
	}
	if b, err := os.ReadFile("../deploy/rbac.yaml"); err != nil || !bytes.Contains(b, []byte("validatingadmissionpolicybindings")) {
		t.Errorf("rbac.yaml does not let the deployment read the bindings (%v)", err)
	}
}

func TestMissingPolicies(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme)
	for _, n := range RequiredPolicies[1:] {
		actions := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
		if n == "probeshim-pod-records" {
			actions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit} // audits, denies nothing
		}
		c.WithObjects(&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n}},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: n, ValidationActions: actions}})
	}
	missing, err := MissingPolicies(context.Background(), c.Build())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(missing, "; ")
	if len(missing) != 2 || !strings.Contains(got, "ValidatingAdmissionPolicy probeshim-nodepodprobe-writers") ||
		!strings.Contains(got, "ValidatingAdmissionPolicyBinding probeshim-pod-records (binds \"probeshim-pod-records\" with [Audit]") {
		t.Errorf("missing = %q", got)
	}
}

// Each checker has its own gauge on the registry it is given: two checkers, two registries, no
// process-wide state; the gauge counts what is missing.
func TestPolicyCheckerMetric(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		reg := prometheus.NewPedanticRegistry()
		c, err := NewPolicyChecker(fake.NewClientBuilder().WithScheme(scheme).Build(), reg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		want := len(RequiredPolicies)
		poll.Eventually(t, 5*time.Second, func() error {
			if v := testutil.ToFloat64(c.missing); v != float64(want) {
				return fmt.Errorf("probeshim_admission_policies_missing = %v, want %d", v, want)
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the checker ended with %v", err)
		}
		if n, err := testutil.GatherAndCount(reg, "probeshim_admission_policies_missing"); err != nil || n != 1 {
			t.Errorf("registry holds %d series of the gauge (%v), want 1", n, err)
		}
	}
}
