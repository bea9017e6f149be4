// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clientCABundle is the API server's --client-ca-file: the rig's CA followed
// by the CA of every revocable identity not revoked. Kubernetes has no
// revocation of client certificates, but the API server reloads this file
// when it changes and checks every request against it: taking a CA out of
// the bundle refuses that CA's certificates from then on, on connections
// already open too.
const clientCABundle = "client-ca.crt"

// revocableDir holds one CA per revocable identity, <user>.crt and .key.
const revocableDir = "revocable"

// writeClientCABundle writes clientCABundle from ca.crt and the revocable CAs
// on disk, atomically (the API server watches the file).
func (p *pki) writeClientCABundle() error {
	b, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	cas, _ := filepath.Glob(filepath.Join(p.dir, revocableDir, "*.ca.crt"))
	sort.Strings(cas)
	for _, f := range cas {
		c, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b = append(b, c...)
	}
	tmp := p.path(clientCABundle + ".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p.path(clientCABundle))
}

// newRevocableCA creates a self-signed CA of its own for user and adds it to
// the bundle.
func (p *pki) newRevocableCA(user string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	dir := filepath.Join(p.dir, revocableDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "probeshim-rig-revocable:" + user},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              p.caCert.NotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, fileSafe(user)+".ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	return cert, key, p.writeClientCABundle()
}

// RevocableKubeconfig writes a kubeconfig for user and groups, for use
// inside the netns like Kubeconfig, whose client certificate is signed by a
// CA of its own: RevokeCredentials makes the API server refuse it. Calling
// it again for the same user replaces the CA (and so un-revokes).
func (r *Rig) RevocableKubeconfig(user string, groups ...string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ca, caKey, err := r.pki.newRevocableCA(user)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(r.pki.dir, revocableDir)
	base := filepath.Join(dir, fileSafe(user))
	if err := writePEM(base+".crt", "CERTIFICATE", der); err != nil {
		return "", err
	}
	if err := writePEM(base+".key", "EC PRIVATE KEY", keyDER); err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["rig"] = &clientcmdapi.Cluster{Server: r.inNetNSServer(), CertificateAuthority: r.pki.path("ca.crt")}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
	cfg.Contexts["rig"] = &clientcmdapi.Context{Cluster: "rig", AuthInfo: user}
	cfg.CurrentContext = "rig"
	p := r.path("kubeconfigs", "revocable-"+fileSafe(user)+".kubeconfig")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, clientcmd.WriteToFile(*cfg, p)
}

// RevokeCredentials takes the CA of user's RevocableKubeconfig out of the API
// server's client CA bundle and returns once the API server refuses the
// credentials (they are anonymous then), which takes it up to a minute (it notices the file's
// change, or reads it again every minute).
func (r *Rig) RevokeCredentials(ctx context.Context, user string) error {
	r.mu.Lock()
	base := filepath.Join(r.pki.dir, revocableDir, fileSafe(user))
	kubeconfig := r.path("kubeconfigs", "revocable-"+fileSafe(user)+".kubeconfig")
	err := os.Remove(base + ".ca.crt")
	if err == nil {
		err = r.pki.writeClientCABundle()
	}
	r.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rig: %s has no revocable credentials", user)
	} else if err != nil {
		return err
	}
	cfg, err := r.hostRESTConfig(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		// A certificate no CA in the bundle signed is no identity: the
		// request is anonymous (or refused, without anonymous auth).
		ssr, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || err == nil && ssr.Status.UserInfo.Username != user {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rig: the API server still accepts %s's revoked credentials (last answer: %w)", user, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
