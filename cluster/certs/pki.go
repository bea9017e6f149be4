// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// backdate covers clock skew between this pod and the API server that verifies the certificate.
const backdate = 5 * time.Minute

// keyPair is a certificate and its private key, parsed and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// newCA creates a self-signed CA valid for validity from now.
func newCA(now time.Time, validity time.Duration) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("probeshim-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return parsedPair(der, key, keyPEM)
}

// newServingCert creates a serving certificate for names (DNS names or IP addresses) signed by ca.
func newServingCert(ca *keyPair, names []string, now time.Time, validity time.Duration) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter // never outlive the CA that vouches for it
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	tmpl.DNSNames, tmpl.IPAddresses = splitNames(names)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	return parsedPair(der, key, keyPEM)
}

func splitNames(names []string) (dns []string, ips []net.IP) {
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	return dns, ips
}

func parsedPair(der []byte, key crypto.Signer, keyPEM []byte) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// parsePair reads a PEM certificate (the first of a bundle) and its PEM private key and checks
// that they belong together.
func parsePair(certPEM, keyPEM []byte) (*keyPair, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		err = fmt.Errorf("unsupported private key type %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key cannot sign")
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return nil, errors.New("private key does not match the certificate")
	}
	first := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw})
	return &keyPair{cert: certs[0], key: signer, certPEM: first, keyPEM: keyPEM}, nil
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// bundle is the CA bundle the webhook configurations trust: the current CA first, then earlier
// CAs that have not expired. Keeping the earlier ones is what lets a replica that still serves a
// certificate of the previous CA be trusted while it catches up with a rotation.
func bundle(current *x509.Certificate, previousPEM []byte, now time.Time) []byte {
	var buf bytes.Buffer
	buf.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: current.Raw}))
	previous, _ := parseCerts(previousPEM) // unreadable leftovers are dropped, not fatal
	for _, c := range previous {
		if c.Equal(current) || !now.Before(c.NotAfter) {
			continue
		}
		buf.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	return buf.Bytes()
}

// renewalDue reports whether a certificate has used up two thirds of its lifetime, the point at
// which it is replaced (cert-manager's default too): early enough that a missed check or two
// never lets it expire.
func renewalDue(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return !now.Before(c.NotAfter.Add(-life / 3))
}

// servingCertProblem says why cert cannot keep serving names under ca, or "" when it can.
func servingCertProblem(cert *x509.Certificate, ca *x509.Certificate, names []string, now time.Time) string {
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return "not signed by the current CA"
	}
	dns, ips := splitNames(names)
	if !slices.Equal(slices.Sorted(slices.Values(cert.DNSNames)), slices.Sorted(slices.Values(dns))) ||
		len(cert.IPAddresses) != len(ips) {
		return "its names differ from " + fmt.Sprint(names)
	}
	for i := range ips {
		if !cert.IPAddresses[i].Equal(ips[i]) {
			return "its IP addresses differ from " + fmt.Sprint(names)
		}
	}
	if now.Before(cert.NotBefore) {
		return "not valid yet"
	}
	if renewalDue(cert, now) {
		return "due for renewal (expires " + cert.NotAfter.UTC().Format(time.RFC3339) + ")"
	}
	return ""
}
