// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1beta1"
	"github.com/probeshim/probeshim/cluster/certs"
	"github.com/probeshim/probeshim/cluster/controller"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/cluster/leaserelay"
	probeshimwebhook "github.com/probeshim/probeshim/cluster/webhook"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
	buildversion "github.com/probeshim/probeshim/internal/version"
)

// run builds the manager from o and runs it until ctx ends.
//
// Every replica serves the webhooks and keeps its certificate files; only the leader runs the
// controllers. A replica becomes ready once its webhook server serves its certificate.
func run(ctx context.Context, cfg *rest.Config, o options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1beta1.AddToScheme(scheme); err != nil { // served through the conversion webhook
		return err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil { // Kruise's CRR storage version
		return err
	}

	// The webhook server starts only after prepare has put the certificate files in place (the
	// server reads them when it starts) and written the admission policy parameters.
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	clientAuth, err := o.clientAuth()
	if err != nil {
		return err
	}
	webhookTLSOpts := tlsOpts
	if o.heartbeatRelay || clientAuth != nil {
		// The heartbeat relay authenticates nodes by their client certificates, and with
		// --webhook-client-ca-file the admission handlers the API server by its: ask for one.
		// Each verifies it against its own CA (the relay's, the API server's client CA, changes
		// at run time), so the TLS layer takes any.
		webhookTLSOpts = append(slices.Clone(tlsOpts), func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert })
	}
	server := &preparedServer{Server: webhook.NewServer(webhook.Options{
		Host:    o.webhookHost,
		Port:    o.webhookPort,
		CertDir: o.certDir,
		TLSOpts: webhookTLSOpts,
	})}

	// The metrics tell which pods fail and how the decider acts on them: not for anyone who
	// can reach the pod. Secure serving checks each scrape's bearer token with the API server.
	metrics := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
		metrics.TLSOpts = tlsOpts // a self-signed certificate: scrapers verify the token, not the server
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true, // a rollout hands over at once instead of after the lease expires
		WebhookServer:                 server,
		// Pods are cached cluster-wide: only the fields the controllers read, packed by the pod
		// informer (podcache), and no object's managed fields. Leases only of the node services' namespace, the one the
		// deployment may read them in.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), NewInformer: podcache.NewInformer,
			ByObject: map[client.Object]cache.ByObject{&coordinationv1.Lease{}: heartbeat.CacheOptions(), &corev1.Pod{}: podcache.ByObject()}},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	if err := ctrlmetrics.Registry.Register(buildversion.BuildInfo(version)); err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(certs.NewExpiryCollector(o.certDir)); err != nil {
		return err
	}

	// Secrets and webhook configurations are read through the uncached reader: a cached read
	// would start a cluster-wide watch, for which the deployment has no permission (and wants none).
	cm, err := certs.New(mgr.GetAPIReader(), mgr.GetClient(), certs.Options{
		Namespace:                       o.namespace,
		SecretName:                      o.secretName,
		ServiceName:                     o.serviceName,
		ExtraNames:                      o.extraNames(),
		CertDir:                         o.certDir,
		MutatingWebhookConfigurations:   []string{o.webhookConfigName},
		ValidatingWebhookConfigurations: []string{o.webhookConfigName},
		ConversionCRDs:                  []string{v1alpha1.Resource("containerrecreaterequests").String()},
		Mode:                            certs.Mode(o.certMode),
	})
	if err != nil {
		return err
	}
	params := probeshimwebhook.PolicyParams{
		ClusterUsername: o.serviceAccountUsername,
		NodeGroup:       o.nodeGroup,
		NodeUserPrefix:  o.nodeUserPrefix,
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("admission policy parameters: %w", err)
	}
	server.prepare = []step{
		{"webhook certificate", cm.Ensure},
		{"admission policy parameters", func(ctx context.Context) error {
			return probeshimwebhook.EnsurePolicyParams(ctx, mgr.GetClient(), o.namespace, params)
		}},
	}
	if err := mgr.Add(cm); err != nil { // renewals and the other replica's rotations, every minute
		return err
	}

	// OpenKruise: detected on every replica (the webhooks ask it) before the webhook server
	// starts, then every period; the controllers and the CRR webhooks hold off what Kruise does.
	var holdProbes, holdCRR func() string
	if o.kruiseDetectPeriod > 0 {
		// Uncached: a cached read of these few named objects would start cluster-wide watches
		// the deployment has no permission for (and would wait for them forever).
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		det := &kruise.Detector{Reader: direct, Writer: direct, Recorder: mgr.GetEventRecorder("kruise-detector"),
			Namespace: o.namespace, KruiseNamespace: o.kruiseNamespace, Period: o.kruiseDetectPeriod, Elected: mgr.Elected()}
		if err := det.NewGauge(ctrlmetrics.Registry); err != nil {
			return err
		}
		server.prepare = append(server.prepare, step{"OpenKruise detection", func(ctx context.Context) error { det.Look(ctx); return nil }})
		if err := mgr.Add(det); err != nil {
			return err
		}
		holdProbes = func() string { return det.Holds(kruise.WorkProbes) }
		holdCRR = func() string { return det.Holds(kruise.WorkCRR) }
		if err := mgr.Add(&kruise.Keeper{Client: direct, Namespace: o.namespace, Period: o.kruiseKeepPeriod,
			Recorder: mgr.GetEventRecorder("kruise-keeper")}); err != nil {
			return err
		}
	}
	probeshimwebhook.Register(mgr.GetWebhookServer(), mgr.GetClient(), mgr.GetAPIReader(), probeshimwebhook.Options{
		Holds: probeshimwebhook.Holds{Probes: holdProbes, CRR: holdCRR}, MaxProbeTimeoutSeconds: int32(o.maxProbeTimeout),
		ClientAuth: clientAuth, ServedNodeAffinity: o.servedNodes, Namespaces: mgr.GetClient(), Scheme: scheme})
	policies, err := probeshimwebhook.NewPolicyChecker(mgr.GetAPIReader(), ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	if err := mgr.Add(policies); err != nil {
		return err
	}

	if o.heartbeatRelay {
		if err := setupHeartbeatRelay(mgr, cfg, o); err != nil {
			return err
		}
	}

	if err := controller.SetupWithManager(mgr, controller.WithNodeBudget(o.nodeProbeBudget), controller.WithHolds(holdProbes, holdCRR),
		controller.WithHeartbeat(heartbeat.Options{Grace: o.nodeServiceGrace})); err != nil {
		return err
	}
	if err := decider.SetupWithManager(mgr, decider.Options{Namespace: o.namespace, Metrics: ctrlmetrics.Registry}); err != nil {
		return fmt.Errorf("setting up the liveness decider: %w", err)
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("certificate", cm.ReadyCheck); err != nil {
		return err
	}
	// A TLS handshake with our own webhook server: ready means admission requests can be served.
	if err := mgr.AddReadyzCheck("webhook", server.StartedChecker()); err != nil {
		return err
	}

	logf.FromContext(ctx).Info("starting", "namespace", o.namespace, "leaderElection", o.leaderElect)
	return mgr.Start(ctx)
}

// setupHeartbeatRelay serves the heartbeat endpoint on every replica's webhook server, watches the
// API server's client CA it authenticates nodes with, and publishes (on the leader) where the
// nodes find it.
func setupHeartbeatRelay(mgr ctrl.Manager, cfg *rest.Config, o options) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ca, err := leaserelay.NewClientCA(cs)
	if err != nil {
		return err
	}
	if err := mgr.Add(ca); err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("heartbeat-relay")
	mgr.GetWebhookServer().Register(heartbeatapi.Path, leaserelay.New(leaserelay.Options{
		Client:         cs,
		Namespace:      heartbeat.LeaseNamespace,
		ClientCA:       ca.VerifyOptions,
		NodeUserPrefix: o.nodeUserPrefix,
		NodeGroup:      o.nodeGroup,
		Registry:       ctrlmetrics.Registry,
		Log:            log,
	}))
	return mgr.Add(&leaserelay.Publisher{
		Client:               cs,
		Namespace:            heartbeat.LeaseNamespace,
		ServiceNamespace:     o.namespace,
		ServiceName:          o.serviceName,
		Port:                 int32(o.servicePort),
		WebhookConfiguration: o.webhookConfigName,
		Log:                  log,
	})
}

// step is one thing to do before the webhook server starts.
type step struct {
	name string
	do   func(context.Context) error
}

// preparedServer is a webhook server that first runs its prepare steps, each retried with
// backoff until it succeeds. It starts with the manager's other webhook servers, after the health
// endpoints, so /healthz answers while it waits and /readyz reports it not ready.
type preparedServer struct {
	webhook.Server
	prepare []step
}

func (s *preparedServer) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook")
	for _, st := range s.prepare {
		backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 30 * time.Second, Steps: 1 << 30}
		err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := st.do(ctx); err != nil {
				log.Error(err, "preparing the webhook server, retrying", "step", st.name)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting
			}
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return s.Server.Start(ctx)
}
