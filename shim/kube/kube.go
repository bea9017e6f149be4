// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kube builds the node service's API server clients from a kubeconfig: plain REST
// clients of the three API groups it uses (core, coordination, apps.kruise.io/v1alpha1) over a
// scheme of just those groups.
//
// Each kind of traffic has a rate budget of its own (Options.QPS and Burst each), so that one
// kind never queues another behind it: probe status writes with the pod reads, Events, and the
// ContainerRecreateRequest steps. The Lease renewal has no client-side limit at all, as the
// kubelet's heartbeat client: one write per renew interval, and a late one makes the node look
// silent. All of them share one connection pool.
package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Clients are the node service's connections to the API server.
type Clients struct {
	// Config is the kubeconfig's, for what authenticates with its credentials elsewhere (the
	// heartbeat endpoint takes its client certificate).
	Config *rest.Config
	Kube   Interface
	// Kruise talks to apps.kruise.io/v1alpha1 for NodePodProbes.
	Kruise rest.Interface
	// Recreate talks to apps.kruise.io/v1alpha1 for ContainerRecreateRequests, with a budget of its
	// own: a restart step never waits behind a burst of probe status writes.
	Recreate rest.Interface
}

// Interface is every core and coordination call the node service makes. Not client-go's typed
// clients: they register all ~56 API groups of k8s.io/client-go/kubernetes/scheme at start, whose
// code and type data the service then keeps touched in its RSS (issue 20). Its methods have
// client-go's signatures, so a typed client (or a fake clientset, see kubetest) satisfies each.
type Interface interface {
	Nodes() Getter[*corev1.Node]
	ConfigMaps(namespace string) Getter[*corev1.ConfigMap]
	Services(namespace string) Getter[*corev1.Service]
	Pods(namespace string) PodClient
	Leases(namespace string) LeaseClient
	Events(namespace string) EventClient
}

// Getter reads one object.
type Getter[T runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// PodClient lists and watches pods.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseClient reads and writes leases.
type LeaseClient interface {
	Getter[*coordinationv1.Lease]
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// EventClient writes core/v1 events.
type EventClient interface {
	Create(ctx context.Context, event *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
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

// Scheme knows the three groups' types (and metav1's options and Status), nothing else.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	// As client-go's scheme does: the unversioned options and Status under "v1".
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(Scheme); err != nil {
			panic(err)
		}
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
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	// client-go gives each REST client a token bucket of its own from QPS and Burst (unless the
	// caller set a RateLimiter, which they then share); a negative QPS means none.
	client := func(apiPath string, gv schema.GroupVersion, limit bool) (*rest.RESTClient, error) {
		c := groupConfig(cfg, apiPath, gv)
		if !limit {
			c.QPS, c.RateLimiter = -1, nil
		}
		return rest.RESTClientForConfigAndClient(c, hc)
	}
	var g groups
	if g.core, err = client("/api", corev1.SchemeGroupVersion, true); err != nil {
		return nil, err
	}
	if g.events, err = client("/api", corev1.SchemeGroupVersion, true); err != nil {
		return nil, err
	}
	if g.coordination, err = client("/apis", coordinationv1.SchemeGroupVersion, false); err != nil {
		return nil, err
	}
	out := &Clients{Config: cfg, Kube: g}
	if out.Kruise, err = client("/apis", v1alpha1.SchemeGroupVersion, true); err != nil {
		return nil, err
	}
	if out.Recreate, err = client("/apis", v1alpha1.SchemeGroupVersion, true); err != nil {
		return nil, err
	}
	return out, nil
}

// groupConfig is cfg for one group's REST client. JSON unless the caller chose otherwise: the
// kubeconfig's protobuf, if set, works for core and coordination, not for the CRDs.
func groupConfig(cfg *rest.Config, apiPath string, gv schema.GroupVersion) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	if c.ContentType == "" || gv == v1alpha1.SchemeGroupVersion {
		c.ContentType = runtime.ContentTypeJSON
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	return c
}

// groups is Interface over the core and coordination REST clients; Events have a client (and a
// budget) of their own.
type groups struct {
	core, events, coordination *rest.RESTClient
}

func (g groups) Nodes() Getter[*corev1.Node] {
	return resource[*corev1.Node]{c: g.core, resource: "nodes", new: func() *corev1.Node { return &corev1.Node{} }}
}

func (g groups) ConfigMaps(ns string) Getter[*corev1.ConfigMap] {
	return resource[*corev1.ConfigMap]{c: g.core, ns: ns, resource: "configmaps", new: func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
}

func (g groups) Services(ns string) Getter[*corev1.Service] {
	return resource[*corev1.Service]{c: g.core, ns: ns, resource: "services", new: func() *corev1.Service { return &corev1.Service{} }}
}

func (g groups) Pods(ns string) PodClient {
	return pods{resource[*corev1.Pod]{c: g.core, ns: ns, resource: "pods", new: func() *corev1.Pod { return &corev1.Pod{} }}}
}

func (g groups) Leases(ns string) LeaseClient {
	return resource[*coordinationv1.Lease]{c: g.coordination, ns: ns, resource: "leases", new: func() *coordinationv1.Lease { return &coordinationv1.Lease{} }}
}

func (g groups) Events(ns string) EventClient {
	return resource[*corev1.Event]{c: g.events, ns: ns, resource: "events", new: func() *corev1.Event { return &corev1.Event{} }}
}

// resource is one resource's calls, as client-go's gentype.Client makes them.
type resource[T runtime.Object] struct {
	c        *rest.RESTClient
	ns       string // "" for a cluster-scoped resource or all namespaces
	resource string
	new      func() T
}

func (r resource[T]) request(verb string) *rest.Request {
	return r.c.Verb(verb).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource)
}

func (r resource[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.new()
	err := r.request(http.MethodGet).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.new()
	err := r.request(http.MethodPost).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.new()
	name, err := nameOf(obj)
	if err != nil {
		return out, err
	}
	err = r.request(http.MethodPut).Name(name).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.new()
	err := r.request(http.MethodPatch).Name(name).SubResource(subresources...).VersionedParams(&opts, parameterCodec).
		SetHeader("Content-Type", string(pt)).Body(data).Do(ctx).Into(out)
	return out, err
}

func nameOf(obj runtime.Object) (string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%T has no object metadata", obj)
	}
	return m.GetName(), nil
}

// pods adds List and Watch.
type pods struct{ resource[*corev1.Pod] }

func (p pods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.request(http.MethodGet).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (p pods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.request(http.MethodGet).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

// timeout is the client side of opts.TimeoutSeconds (a reflector's watch sets it), as gentype's.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
