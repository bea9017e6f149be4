// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/probeshim/probeshim/internal/heartbeatapi"
)

// Relay renews the lease through the cluster deployment's heartbeat endpoint, for an identity the
// API server does not let write it (the kubelet's: NodeRestriction).
type Relay interface {
	// Renew asks the endpoint to renew a node's lease as req says.
	Renew(ctx context.Context, req heartbeatapi.Request) error
	// Endpoint says where the last renewal went, for the status.
	Endpoint() string
}

// RelayConfig wires a RelayClient.
type RelayConfig struct {
	// Kube reads the ConfigMap heartbeatapi.ConfigMapName in Namespace and the Service it names.
	Kube      KubeClient
	Namespace string
	// URL is the endpoint's base URL (https://host:port) when configured; else the published
	// Service's ClusterIP and port, reached through kube-proxy as any Service is from a node.
	URL string
	// CAFile verifies the endpoint when set; else the published CA.
	CAFile string
	// ClientCert is the client certificate the endpoint authenticates the node by: the one of
	// the kubeconfig, read again for every connection (the kubelet rotates its certificate file).
	ClientCert func() (*tls.Certificate, error)
}

// RelayClient is the Relay over HTTPS.
type RelayClient struct {
	cfg RelayConfig

	mu       sync.Mutex
	target   *target // the endpoint as last discovered; nil: discover again
	endpoint string
	// oldEndpoint: the endpoint refused a field as unknown (a cluster deployment older than
	// this node service); renewals go without the newer fields from then on.
	oldEndpoint bool
}

// target is where to send heartbeats and how to verify the server.
type target struct {
	url        string
	serverName string
	roots      *x509.CertPool
}

// NewRelayClient returns a RelayClient.
func NewRelayClient(cfg RelayConfig) *RelayClient { return &RelayClient{cfg: cfg} }

// ClientCertFromConfig is the client certificate of a kubeconfig's REST config, read from its
// files on every call (the kubelet's kubelet-client-current.pem is replaced as it rotates), or
// an error when the kubeconfig authenticates otherwise (a token, an exec plugin).
func ClientCertFromConfig(cfg *rest.Config) (func() (*tls.Certificate, error), error) {
	tc := cfg.TLSClientConfig
	switch {
	case len(tc.CertData) > 0 && len(tc.KeyData) > 0:
		cert, err := tls.X509KeyPair(tc.CertData, tc.KeyData)
		if err != nil {
			return nil, fmt.Errorf("the kubeconfig's client certificate: %w", err)
		}
		return func() (*tls.Certificate, error) { return &cert, nil }, nil
	case tc.CertFile != "" && tc.KeyFile != "":
		return func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(tc.CertFile, tc.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("the kubeconfig's client certificate %s: %w", tc.CertFile, err)
			}
			return &cert, nil
		}, nil
	}
	return nil, errors.New("the kubeconfig has no client certificate (the heartbeat endpoint authenticates nodes by theirs)")
}

// Endpoint is where the last renewal went.
func (c *RelayClient) Endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpoint
}

// Renew posts one heartbeat. The endpoint is discovered again after any failure, so a moved
// Service or a rotated CA is followed.
func (c *RelayClient) Renew(ctx context.Context, r heartbeatapi.Request) error {
	c.mu.Lock()
	t, old := c.target, c.oldEndpoint
	c.mu.Unlock()
	if old {
		r.ProbesLate = ""
	}
	if t == nil {
		var err error
		if t, err = c.discover(ctx); err != nil {
			return fmt.Errorf("finding the heartbeat endpoint: %w", err)
		}
	}
	err := c.post(ctx, t, r)
	var refused *RelayError
	if r.ProbesLate != "" && errors.As(err, &refused) && refused.Code == http.StatusBadRequest && strings.Contains(refused.Message, "unknown field") {
		// Skew: the heartbeat matters more than the note; the note still reaches `probeshim status`.
		r.ProbesLate = ""
		err = c.post(ctx, t, r)
		c.mu.Lock()
		c.oldEndpoint = true
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endpoint = t.url
	if err != nil {
		c.target = nil
		return fmt.Errorf("the heartbeat endpoint %s: %w", t.url, err)
	}
	c.target = t
	return nil
}

func (c *RelayClient) post(ctx context.Context, t *target, r heartbeatapi.Request) error {
	hc := &http.Client{Transport: &http.Transport{
		// One connection per heartbeat: every one presents the certificate as it is now, and
		// the Service spreads them over the deployment's replicas.
		DisableKeepAlives: true,
		Proxy:             nil,
		TLSClientConfig: &tls.Config{
			RootCAs:    t.roots,
			ServerName: t.serverName,
			MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return c.cfg.ClientCert()
			},
		},
	}}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+heartbeatapi.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024)) // a short message is still a message
	if resp.StatusCode != http.StatusOK {
		return &RelayError{Code: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
	}
	return nil
}

// RelayError is the endpoint's refusal.
type RelayError struct {
	Code    int
	Message string
}

func (e *RelayError) Error() string {
	return fmt.Sprintf("answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// discover finds the endpoint: the ConfigMap the cluster deployment publishes names its Service
// and CA; a configured URL or CA file takes precedence.
func (c *RelayClient) discover(ctx context.Context) (*target, error) {
	var published map[string]string
	cm, err := c.cfg.Kube.ConfigMaps(c.cfg.Namespace).Get(ctx, heartbeatapi.ConfigMapName, metav1.GetOptions{})
	switch {
	case err == nil:
		published = cm.Data
	case c.cfg.URL == "" || c.cfg.CAFile == "":
		return nil, fmt.Errorf("reading ConfigMap %s/%s (published by the cluster deployment): %w", c.cfg.Namespace, heartbeatapi.ConfigMapName, err)
	}
	t := &target{url: strings.TrimSuffix(c.cfg.URL, "/"), serverName: published[heartbeatapi.KeyServerName]}
	var ca []byte
	if c.cfg.CAFile != "" {
		if ca, err = os.ReadFile(c.cfg.CAFile); err != nil {
			return nil, err
		}
	} else {
		ca = []byte(published[heartbeatapi.KeyCA])
	}
	t.roots = x509.NewCertPool()
	if !t.roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("no CA certificate to verify the endpoint with")
	}
	if t.url == "" {
		if t.url, err = c.serviceURL(ctx, published[heartbeatapi.KeyService]); err != nil {
			return nil, err
		}
	}
	if t.serverName == "" {
		u, err := url.Parse(t.url)
		if err != nil {
			return nil, err
		}
		t.serverName = u.Hostname()
	}
	return t, nil
}

// serviceURL is https://<ClusterIP>:<port> of "<namespace>/<name>:<port>".
func (c *RelayClient) serviceURL(ctx context.Context, svc string) (string, error) {
	ref, portText, ok := strings.Cut(svc, ":")
	ns, name, ok2 := strings.Cut(ref, "/")
	port, err := strconv.Atoi(portText)
	if !ok || !ok2 || err != nil || port <= 0 || port > 65535 {
		return "", fmt.Errorf("the published service %q is not <namespace>/<name>:<port>", svc)
	}
	s, err := c.cfg.Kube.Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
	}
	if ip := net.ParseIP(s.Spec.ClusterIP); ip == nil {
		return "", fmt.Errorf("the Service %s/%s has no cluster IP (%q)", ns, name, s.Spec.ClusterIP)
	}
	return "https://" + net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(port)), nil
}
