// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A Deployment and a DaemonSet named like Kruise's in its namespace, which whoever administers
// that namespace can create, are believed only while a Kruise webhook configuration (a cluster
// admin's) exists, or cannot be read; alone, they hold nothing off and are reported as ignored.
func TestObserveBelievesOnlyWhatAnAdminWrites(t *testing.T) {
	ctx := context.Background()
	impostor := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: ManagerName}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: DaemonName}},
	}
	o := Observe(ctx, fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(impostor...).Build(), DefaultNamespace)
	if o.Installed || o.Manager || o.Daemon || o.Holds(WorkProbes) != "" || o.Holds(WorkCRR) != "" {
		t.Errorf("a tenant's look-alikes believed: %+v", o)
	}
	if len(o.Ignored) != 2 || !strings.Contains(o.Ignored[0], "Deployment kruise-system/kruise-controller-manager: no Kruise webhook configuration") {
		t.Errorf("ignored %q", o.Ignored)
	}

	admin := append(impostor, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigName}})
	o = Observe(ctx, fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(admin...).Build(), DefaultNamespace)
	if !o.Manager || !o.Daemon || len(o.Ignored) != 0 || o.Holds(WorkProbes) == "" {
		t.Errorf("Kruise as an admin installs it not believed: %+v", o)
	}

	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		switch obj.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration:
			return apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "webhookconfigurations"}, key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	o = Observe(ctx, fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(impostor...).WithInterceptorFuncs(forbidden).Build(), DefaultNamespace)
	if !o.Manager || o.Holds(WorkProbes) == "" {
		t.Errorf("with the configurations unreadable, what cannot be read must count as live: %+v", o)
	}
}
