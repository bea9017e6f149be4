// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package leaserelay

import (
	"context"
	"crypto/x509"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Where Kubernetes publishes the CA that signs the client certificates it accepts, for servers
// that authenticate its users themselves (every aggregated API server reads it). kube-apiserver
// keeps it current from its --client-ca-file; reading it takes the Role
// extension-apiserver-authentication-reader in kube-system, which kube-apiserver creates.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
	authConfigMapKey       = "client-ca-file"
)

// ClientCA is the API server's client CA, watched and reloaded when it changes (a CA rotated or
// a CA removed from the API server's bundle is followed within moments).
type ClientCA struct {
	c *dynamiccertificates.ConfigMapCAController
}

// NewClientCA watches the one ConfigMap through client.
func NewClientCA(client kubernetes.Interface) (*ClientCA, error) {
	c, err := dynamiccertificates.NewDynamicCAFromConfigMapController("probeshim-heartbeat-relay",
		authConfigMapNamespace, authConfigMapName, authConfigMapKey, client)
	if err != nil {
		return nil, err
	}
	return &ClientCA{c: c}, nil
}

// Start watches until ctx ends (a controller-runtime Runnable, on every replica).
func (c *ClientCA) Start(ctx context.Context) error {
	c.c.Run(ctx, 1)
	return nil
}

// NeedLeaderElection is false: every replica serves the relay.
func (c *ClientCA) NeedLeaderElection() bool { return false }

// VerifyOptions are for Options.ClientCA.
func (c *ClientCA) VerifyOptions() (x509.VerifyOptions, bool) { return c.c.VerifyOptions() }
