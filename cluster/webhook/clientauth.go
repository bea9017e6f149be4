// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
)

// ClientAuth lets only the API server use the admission webhooks: a request must come with a
// client certificate that CAs signed for client authentication, and, when Names is set, whose
// subject common name or a DNS name is one of Names. The API server presents such a certificate
// when its AdmissionConfiguration gives the webhooks a kubeConfigFile with one. Without it, any
// pod that reaches the Service can send AdmissionReviews and read the answers (what a marker or
// a pod would be refused for), as an oracle.
//
// The server must ask for client certificates (tls.RequestClientCert): the heartbeat relay on the
// same port verifies the node services' certificates against another CA, so the TLS layer accepts
// any and each handler checks its own.
type ClientAuth struct {
	CAs   *x509.CertPool
	Names []string
}

// LoadClientAuth reads the PEM CA bundle of caFile.
func LoadClientAuth(caFile string, names []string) (*ClientAuth, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &ClientAuth{CAs: pool, Names: names}, nil
}

// Wrap answers 403 to a request without an acceptable client certificate and passes the others
// to next.
func (a *ClientAuth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.verify(r); err != nil {
			http.Error(w, "admission webhooks answer only the API server: "+err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *ClientAuth) verify(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return errors.New("no client certificate")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.CAs, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if len(a.Names) > 0 && !slices.Contains(a.Names, leaf.Subject.CommonName) &&
		!slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(a.Names, n) }) {
		return fmt.Errorf("client certificate %q is not one of %v", leaf.Subject.CommonName, a.Names)
	}
	return nil
}
