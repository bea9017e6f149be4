// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// Paths the handlers are served on; the webhook configurations in cluster/deploy name them.
const (
	PathPodLiveness = "/mutate-pod-enhanced-liveness"
	// PathPodReadinessGate adds the KruisePodReady readiness gate to opted-in pods (mutating).
	PathPodReadinessGate = "/mutate-pod-readiness-gate"
	PathPodProbeMarker   = "/validate-podprobemarker"
	// PathPodProbeMarkerDefaults writes the timing defaults into markers (mutating).
	PathPodProbeMarkerDefaults = "/mutate-podprobemarker"
	PathNodePodProbe           = "/validate-nodepodprobe"

	PathContainerRecreateRequestMutate   = "/mutate-containerrecreaterequest"
	PathContainerRecreateRequestValidate = "/validate-containerrecreaterequest"

	// PathConversion converts ContainerRecreateRequests between v1alpha1 (stored) and v1beta1;
	// the CRD's spec.conversion names it.
	PathConversion = "/convert"
)

// Holds say why OpenKruise does probeshim's work now ("" when it does not; nil never holds): see
// LivenessMutator.Hold and ContainerRecreateRequestMutator.Hold.
type Holds struct {
	Probes, CRR func() string
}

// Options configure the handlers Register serves.
type Options struct {
	Holds Holds
	// MaxProbeTimeoutSeconds is the ceiling on the timeoutSeconds of the probes of markers and of
	// enhanced liveness (0: validation.DefaultMaxTimeoutSeconds; below 0: none).
	MaxProbeTimeoutSeconds int32
	// ClientAuth, when set, makes every admission handler answer only clients with its certificate
	// (the conversion handler answers anyone: see Register).
	ClientAuth *ClientAuth
	// ServedNodeAffinity is the cluster's default tie of enhanced-liveness pods to served nodes
	// (see LivenessMutator.ServedNodes); Namespaces reads the namespaces' own choice.
	ServedNodeAffinity string
	Namespaces         client.Reader
	// Scheme holds the versions the conversion webhook converts between (apis/v1alpha1, the hub,
	// and apis/v1beta1); nil serves no conversion.
	Scheme *runtime.Scheme
}

// Server is where handlers are registered; controller-runtime's webhook.Server is one.
type Server interface {
	Register(path string, hook http.Handler)
}

// Register serves every handler of this package on srv. reviewer creates the
// SubjectAccessReviews of the pods/exec and pods/portforward checks, as the deployment's own identity. pods
// reads the target pods of ContainerRecreateRequests; pass an uncached reader (the manager's
// APIReader), since a request must copy the status of the container instance running now.
func Register(srv Server, reviewer AccessReviewer, pods client.Reader, opts Options) {
	h := opts.Holds
	maxTimeout := opts.MaxProbeTimeoutSeconds
	if maxTimeout == 0 {
		maxTimeout = validation.DefaultMaxTimeoutSeconds
	}
	if opts.Scheme != nil {
		// Not behind ClientAuth: the API server presents no client certificate to conversion
		// webhooks (kubernetes/kubernetes#131810). A conversion is a pure function of the objects
		// in the request: it reads and tells nothing else.
		srv.Register(PathConversion, conversion.NewWebhookHandler(opts.Scheme, conversion.NewRegistry())) // the types' own Hub and Convertible
	}
	if opts.ClientAuth != nil {
		srv = guarded{srv, opts.ClientAuth}
	}
	srv.Register(PathPodLiveness, &admission.Webhook{Handler: LivenessMutator{Reviewer: reviewer, Hold: h.Probes, MaxTimeoutSeconds: maxTimeout,
		ServedNodes: opts.ServedNodeAffinity, Namespaces: opts.Namespaces}})
	srv.Register(PathPodReadinessGate, &admission.Webhook{Handler: ReadinessGateMutator{}})
	srv.Register(PathPodProbeMarkerDefaults, &admission.Webhook{Handler: PodProbeMarkerDefaulter{}})
	srv.Register(PathPodProbeMarker, &admission.Webhook{Handler: &PodProbeMarkerValidator{Reviewer: reviewer, MaxTimeoutSeconds: maxTimeout}})
	srv.Register(PathNodePodProbe, &admission.Webhook{Handler: NodePodProbeValidator{}})
	srv.Register(PathContainerRecreateRequestMutate, &admission.Webhook{Handler: &ContainerRecreateRequestMutator{Pods: pods, Hold: h.CRR}})
	srv.Register(PathContainerRecreateRequestValidate, &admission.Webhook{Handler: &ContainerRecreateRequestValidator{Pods: pods, Hold: h.CRR}})
}

// guarded registers every handler behind its ClientAuth.
type guarded struct {
	Server
	auth *ClientAuth
}

func (g guarded) Register(path string, hook http.Handler) { g.Server.Register(path, g.auth.Wrap(hook)) }
