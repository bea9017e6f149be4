// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// apiServerClientName is the common name of the client certificate the test API server presents
// to the webhooks.
const apiServerClientName = "kube-apiserver-admission"

// testPKI is a CA and client certificates it signs, PEM-encoded.
type testPKI struct {
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
	caPEM []byte
}

func newTestPKI() (*testPKI, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testPKI{ca: ca, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// client issues a certificate for cn with the given extended key usage; PEM certificate and key.
func (p *testPKI) client(cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// apiServerAdmissionConfig writes, in dir, an AdmissionConfiguration that has the API server
// present a client certificate of pki (common name apiServerClientName) to every webhook, as a
// cluster admin sets it up for --webhook-client-ca-file, and returns its path.
func apiServerAdmissionConfig(dir string, pki *testPKI) (string, error) {
	certPEM, keyPEM, err := pki.client(apiServerClientName, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", err
	}
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	kubeconfig := filepath.Join(dir, "webhook-kubeconfig.yaml")
	admission := filepath.Join(dir, "admission.yaml")
	files := map[string]string{
		certFile: string(certPEM),
		keyFile:  string(keyPEM),
		// "*": every webhook the API server calls, by Service or URL.
		kubeconfig: fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %s
    client-key: %s
`, certFile, keyFile),
		admission: fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`, kubeconfig),
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return admission, nil
}

// The webhooks answer only the API server. Every integration test of this package reaches them
// through the real API server, which presents the client certificate of its
// AdmissionConfiguration; here, requests sent straight to the webhook server, as any pod that
// reaches the Service could send them, get 403 and no answer unless they carry that certificate.
func TestWebhooksAnswerOnlyTheAPIServer(t *testing.T) {
	needEnv(t)
	other, err := newTestPKI()
	if err != nil {
		t.Fatal(err)
	}
	pair := func(p *testPKI, cn string, usage x509.ExtKeyUsage) []tls.Certificate {
		certPEM, keyPEM, err := p.client(cn, usage)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "oracle", Operation: admissionv1.Create, Namespace: "games",
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps.kruise.io/v1alpha1","kind":"PodProbeMarker","metadata":{"name":"x"}}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		certs  []tls.Certificate
		status int
		body   string
	}{
		{"no certificate", nil, http.StatusForbidden, "answer only the API server: no client certificate"},
		{"another CA's", pair(other, apiServerClientName, x509.ExtKeyUsageClientAuth), http.StatusForbidden, "unknown authority"},
		{"another name", pair(testEnv.clientPKI, "system:node:n1", x509.ExtKeyUsageClientAuth), http.StatusForbidden, "is not one of"},
		{"not for client authentication", pair(testEnv.clientPKI, apiServerClientName, x509.ExtKeyUsageServerAuth), http.StatusForbidden, "incompatible key usage"},
		{"the API server's", pair(testEnv.clientPKI, apiServerClientName, x509.ExtKeyUsageClientAuth), http.StatusOK, `"uid":"oracle"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, //nolint:gosec // the client side is under test, not the server's name
				Certificates:       tc.certs}}}
			resp, err := hc.Post(testEnv.webhookURL+PathPodProbeMarker, "application/json", bytes.NewReader(review))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
				t.Fatalf("%d %s, want %d with %q", resp.StatusCode, b, tc.status, tc.body)
			}
		})
	}
}

func poolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
