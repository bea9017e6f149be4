// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kube builds the node service's API server clients from a kubeconfig:
// typed clients of the two API groups it uses (core and coordination), and a
// REST client for the apps.kruise.io/v1alpha1 resources it reads and writes.
package kube

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Clients are the node service's connections to the API server.
type Clients struct {
	// Config is the kubeconfig's, for what authenticates with its credentials elsewhere (the
	// heartbeat endpoint takes its client certificate).
	Config *rest.Config
	Kube   Interface
	// Kruise talks to apps.kruise.io/v1alpha1 (NodePodProbe, ContainerRecreateRequest).
	Kruise rest.Interface
}

// Interface is the part of client-go's kubernetes.Interface the node service uses (a
// *kubernetes.Clientset or a fake one satisfies it). Not the whole clientset: one holding all
// of its ~56 API groups keeps every group's client code in the binary, and the pages of that
// code the service touches count in its RSS (about 17 MB more text, measured).
type Interface interface {
	CoreV1() typedcorev1.CoreV1Interface
	CoordinationV1() typedcoordinationv1.CoordinationV1Interface
}

// groups is Interface over the two typed clients.
type groups struct {
	core         *typedcorev1.CoreV1Client
	coordination *typedcoordinationv1.CoordinationV1Client
}

func (g groups) CoreV1() typedcorev1.CoreV1Interface { return g.core }
func (g groups) CoordinationV1() typedcoordinationv1.CoordinationV1Interface {
	return g.coordination
}

// Options tune the clients.
type Options struct {
	QPS       float32
	Burst     int
	UserAgent string
	Timeout   time.Duration
	// Observe, if set, sees the outcome of every request (resp nil when err
	// is not), e.g. to tell whether a watch keeps failing.
	Observe func(req *http.Request, resp *http.Response, err error)
}

// observer is a RoundTripper that shows each outcome to Options.Observe.
type observer struct {
	next    http.RoundTripper
	observe func(*http.Request, *http.Response, error)
}

func (o observer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	o.observe(req, resp, err)
	return resp, err
}

// Scheme knows the apps.kruise.io/v1alpha1 types.
var Scheme = runtime.NewScheme()

func init() {
	if err := v1alpha1.AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

// New loads kubeconfig and returns clients. The kubelet's own kubeconfig works
// (identity system:node:<name>); so does a dedicated one.
func New(kubeconfig string, o Options) (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return NewForConfig(cfg, o)
}

// NewForConfig returns clients for a rest.Config.
func NewForConfig(cfg *rest.Config, o Options) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	if o.UserAgent != "" {
		cfg.UserAgent = o.UserAgent
	}
	if o.Timeout > 0 {
		cfg.Timeout = o.Timeout
	}
	if o.Observe != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return observer{next: rt, observe: o.Observe} })
	}
	// As kubernetes.NewForConfig does: the groups share one connection pool and one rate limit
	// (the apps.kruise.io client below has its own, as before).
	gcfg := rest.CopyConfig(cfg)
	if gcfg.RateLimiter == nil && gcfg.QPS > 0 {
		burst := gcfg.Burst
		if burst <= 0 {
			burst = rest.DefaultBurst
		}
		gcfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(gcfg.QPS, burst)
	}
	hc, err := rest.HTTPClientFor(gcfg)
	if err != nil {
		return nil, err
	}
	var kc groups
	if kc.core, err = typedcorev1.NewForConfigAndClient(gcfg, hc); err != nil {
		return nil, err
	}
	if kc.coordination, err = typedcoordinationv1.NewForConfigAndClient(gcfg, hc); err != nil {
		return nil, err
	}
	kcfg := rest.CopyConfig(cfg)
	kcfg.GroupVersion = &v1alpha1.SchemeGroupVersion
	kcfg.APIPath = "/apis"
	kcfg.ContentType = runtime.ContentTypeJSON
	kcfg.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(kcfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Config: cfg, Kube: kc, Kruise: rc}, nil
}
