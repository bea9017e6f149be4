// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

// checkHeartbeatRelay: the running command publishes where its heartbeat relay is and the CA to
// verify it, and renews the Lease of a node that authenticates with a client certificate of the
// API server's own client CA (as a kubelet's kubeconfig has) — through the deployment's RBAC and
// the Lease admission policy. A node naming another node, a user that is no node and a
// certificate of another CA are refused. node-1 exists (TestRun created it).
func checkHeartbeatRelay(t *testing.T, ctx context.Context, c client.Client, env *envtest.Environment, webhookPort int, o options) {
	t.Helper()
	published := &corev1.ConfigMap{}
	poll.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: heartbeat.LeaseNamespace, Name: heartbeatapi.ConfigMapName}, published); err != nil {
			return err
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: o.webhookConfigName}, vwc); err != nil {
			return err
		}
		if published.Data[heartbeatapi.KeyCA] != string(vwc.Webhooks[0].ClientConfig.CABundle) {
			return fmt.Errorf("published CA is not the webhook configuration's")
		}
		return nil
	})
	if got, want := published.Data[heartbeatapi.KeyService], "probeshim-system/probeshim-webhook:443"; got != want {
		t.Errorf("published service %q, want %q", got, want)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(published.Data[heartbeatapi.KeyCA])) {
		t.Fatal("the published CA bundle holds no certificate")
	}

	post := func(cert *tls.Certificate, node string) (int, string) {
		t.Helper()
		tc := &tls.Config{RootCAs: roots, ServerName: published.Data[heartbeatapi.KeyServerName], MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		body, _ := json.Marshal(heartbeatapi.Request{Node: node, LeaseDurationSeconds: 40})
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, heartbeatapi.Path), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("posting a heartbeat: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	userCert := func(name string, groups ...string) *tls.Certificate {
		t.Helper()
		u, err := env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := u.Config()
		cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		return &cert
	}
	kubelet := userCert("system:node:node-1", "system:nodes")

	before := time.Now().Add(-time.Second)
	// The client CA is watched from the start; RBAC is seen a moment after it is written.
	poll.Eventually(t, 30*time.Second, func() error {
		if code, body := post(kubelet, "node-1"); code != http.StatusOK {
			return fmt.Errorf("heartbeat of node-1: %d %s", code, body)
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: heartbeat.LeaseNamespace, Name: "node-1"}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "node-1" || lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(before) {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].Name != "node-1" {
		t.Errorf("lease owners = %+v", lease.OwnerReferences)
	}

	for _, c := range []struct {
		name string
		cert *tls.Certificate
		node string
		code int
	}{
		{"node-1 renewing node-2's Lease", kubelet, "node-2", http.StatusForbidden},
		{"an administrator", userCert("admin-1", "system:masters"), "node-1", http.StatusForbidden},
		{"no certificate", nil, "node-1", http.StatusUnauthorized},
		{"a certificate of another CA", selfSigned(t), "node-1", http.StatusUnauthorized},
	} {
		if code, body := post(c.cert, c.node); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: heartbeat.LeaseNamespace, Name: "node-2"}, &coordinationv1.Lease{}); err == nil {
		t.Error("a Lease of node-2 was written")
	}
}

// selfSigned is a kubelet-looking client certificate no CA of the API server signed.
func selfSigned(t *testing.T) *tls.Certificate {
	l := testpki.NewCA(t).Issue(t, testpki.Leaf{CN: "system:node:node-1", Orgs: []string{"system:nodes"}})
	return &tls.Certificate{Certificate: [][]byte{l.Cert.Raw}, PrivateKey: l.Key}
}
