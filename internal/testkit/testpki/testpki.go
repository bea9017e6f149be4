// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package testpki issues throwaway certificates for tests: a CA, and client or server certificates
// it signs, in the shapes the API server's client CA and the webhook's serving CA produce; and
// OpenPGP keys, as a release is signed with.
package testpki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// CA is a certificate authority valid for an hour either side of its creation.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // Cert, PEM-encoded
}

// Leaf describes a certificate to issue: a client certificate for CN in Orgs, or a server
// certificate when DNS is set. A zero NotBefore/NotAfter means valid from a minute ago for an hour.
type Leaf struct {
	CN                  string
	Orgs                []string
	DNS                 []string
	NotBefore, NotAfter time.Time
}

// Issued is a signed certificate with its key, parsed and PEM-encoded.
type Issued struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	cert, der := sign(t, tmpl, tmpl, key, key)
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue signs l.
func (c *CA) Issue(t testing.TB, l Leaf) Issued {
	t.Helper()
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Minute)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(time.Hour)
	}
	usage := x509.ExtKeyUsageClientAuth
	if len(l.DNS) > 0 {
		usage = x509.ExtKeyUsageServerAuth
	}
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: l.CN, Organization: l.Orgs},
		NotBefore: l.NotBefore, NotAfter: l.NotAfter, DNSNames: l.DNS,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	cert, der := sign(t, tmpl, c.Cert, key, c.Key)
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, der
}

// OpenPGPKey returns an armored private Ed25519 OpenPGP key created at created, in the form
// hack/release takes its release key (PROBESHIM_RELEASE_KEY).
func OpenPGPKey(t testing.TB, created time.Time) []byte {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return created }}
	e, err := openpgp.NewEntity("probeshim test", "", "test@example.invalid", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SerializePrivate(w, cfg); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
