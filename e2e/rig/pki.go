// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki is the per-run certificate authority. Every certificate of the rig is
// signed by it: serving certificates of the API server and the kubelet, and
// client certificates whose CN and O are the user and groups the API server
// sees.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "probeshim-rig-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, serial: 1}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return p, writePEM(p.path("ca.key"), "EC PRIVATE KEY", keyDER)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// certSpec describes one leaf certificate.
type certSpec struct {
	name   string // file base name: <name>.crt, <name>.key
	cn     string
	orgs   []string
	client bool
	server bool
	dns    []string
	ips    []net.IP
}

// issue writes <name>.crt and <name>.key and returns their paths.
func (p *pki) issue(s certSpec) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.mu.Lock()
	p.serial++
	serial := p.serial
	p.mu.Unlock()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     p.caCert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = p.path(s.name+".crt"), p.path(s.name+".key")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

// serviceAccountKey writes the key pair that signs and verifies service
// account tokens.
func (p *pki) serviceAccountKey() (pub, priv string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	pub, priv = p.path("sa.pub"), p.path("sa.key")
	if err := writePEM(priv, "EC PRIVATE KEY", keyDER); err != nil {
		return "", "", err
	}
	return pub, priv, writePEM(pub, "PUBLIC KEY", pubDER)
}

// kubeconfig issues a client certificate for user/groups and writes a
// kubeconfig at path that reaches server with it.
func (p *pki) kubeconfig(path, server, user string, groups ...string) error {
	certPath, keyPath, err := p.issue(certSpec{name: "client-" + fileSafe(user), cn: user, orgs: groups, client: true})
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["rig"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.path("ca.crt")}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: certPath, ClientKey: keyPath}
	cfg.Contexts["rig"] = &clientcmdapi.Context{Cluster: "rig", AuthInfo: user}
	cfg.CurrentContext = "rig"
	return clientcmd.WriteToFile(*cfg, path)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// fileSafe turns a user name such as system:node:rig-node into a file name.
func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
