// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package heartbeatapi is the wire contract of the heartbeat endpoint, shared by the node service
// (its client) and the cluster deployment (its server), which never import each other.
//
// A node service whose identity may not write its Lease (the kubelet's: NodeRestriction confines
// node users' Leases to kube-node-lease) asks the cluster deployment to renew it instead: an HTTPS
// POST of a Request to Path on the deployment's webhook Service, authenticated by the client
// certificate of the node's kubeconfig. The deployment publishes where that Service is and the CA
// its serving certificate is signed by in the ConfigMap ConfigMapName, in the Lease namespace.
package heartbeatapi

// Path is where the cluster deployment's webhook server serves the endpoint.
const Path = "/probeshim/v1/heartbeat"

// MaxBodyBytes bounds a request body; a Request is far smaller.
const MaxBodyBytes = 2048

// The ConfigMap the cluster deployment publishes in the heartbeat Lease namespace.
const (
	ConfigMapName = "probeshim-heartbeat"
	// KeyCA is the PEM bundle that signs the endpoint's serving certificate.
	KeyCA = "ca.crt"
	// KeyService is the endpoint's Service, "<namespace>/<name>:<port>".
	KeyService = "service"
	// KeyServerName is the name the serving certificate is issued for, e.g.
	// probeshim-webhook.probeshim-system.svc.
	KeyServerName = "serverName"
)

// Request asks for the renewal of the Lease of Node. Node must be the node the client
// certificate names: it makes a misconfigured node (another node's certificate) fail loudly.
//
// ProbesLate, when set, says which of the node's probes start late (the Lease's annotation
// probeshim.io/probes-late; at most 512 bytes). Endpoints older than it refuse the field as unknown
// (HTTP 400): a client then renews without it.
type Request struct {
	Node                 string `json:"node"`
	LeaseDurationSeconds int32  `json:"leaseDurationSeconds"`
	ProbesLate           string `json:"probesLate,omitempty"`
}

// Response is the renewed Lease's renewTime (RFC 3339, microseconds), as the API server stored it.
type Response struct {
	RenewTime string `json:"renewTime"`
}
