// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package leaserelay

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/probeshim/probeshim/internal/heartbeatapi"
)

// Publisher keeps the ConfigMap heartbeatapi.ConfigMapName in the Lease namespace current: where
// the relay is (the webhook Service) and the CA its serving certificate is signed by, so that
// nodes can find and verify it. The CA is the one the webhook configuration trusts, whoever put
// it there (this deployment's certificate manager or cert-manager's CA injector).
type Publisher struct {
	Client kubernetes.Interface
	// Namespace is the Lease namespace, where the nodes may read the ConfigMap.
	Namespace string
	// Service is the webhook Service and Port its port.
	ServiceNamespace, ServiceName string
	Port                          int32
	// WebhookConfiguration is the ValidatingWebhookConfiguration whose CA bundle is published.
	WebhookConfiguration string
	// Interval is how often the CA bundle is looked at (a minute when zero).
	Interval time.Duration
	Log      logr.Logger
}

// Start publishes at once and then every Interval until ctx ends (on the leader).
func (p *Publisher) Start(ctx context.Context) error {
	if p.Interval <= 0 {
		p.Interval = time.Minute
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := p.Publish(ctx); err != nil {
			p.Log.Error(err, "publishing the heartbeat endpoint for nodes on the kubelet's identity, retrying", "configmap", p.Namespace+"/"+heartbeatapi.ConfigMapName)
		}
	}, p.Interval)
	return nil
}

// NeedLeaderElection is true: one writer is enough.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Publish writes the ConfigMap when it differs from what is wanted.
func (p *Publisher) Publish(ctx context.Context) error {
	vwc, err := p.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, p.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the CA bundle of ValidatingWebhookConfiguration %s: %w", p.WebhookConfiguration, err)
	}
	ca := caBundle(vwc)
	if len(ca) == 0 {
		return fmt.Errorf("ValidatingWebhookConfiguration %s has no CA bundle yet", p.WebhookConfiguration)
	}
	want := map[string]string{
		heartbeatapi.KeyCA:         string(ca),
		heartbeatapi.KeyService:    fmt.Sprintf("%s/%s:%d", p.ServiceNamespace, p.ServiceName, p.Port),
		heartbeatapi.KeyServerName: p.ServiceName + "." + p.ServiceNamespace + ".svc",
	}
	cms := p.Client.CoreV1().ConfigMaps(p.Namespace)
	cm, err := cms.Get(ctx, heartbeatapi.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: heartbeatapi.ConfigMapName, Namespace: p.Namespace}, Data: want}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	} else if err != nil {
		return err
	}
	if maps.Equal(cm.Data, want) {
		return nil
	}
	cm.Data = want
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// caBundle is the first CA bundle of the configuration's webhooks (they all have the same).
func caBundle(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []byte {
	for _, w := range vwc.Webhooks {
		if len(bytes.TrimSpace(w.ClientConfig.CABundle)) > 0 {
			return w.ClientConfig.CABundle
		}
	}
	return nil
}
