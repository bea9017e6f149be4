// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package recreate carries out ContainerRecreateRequests on the node: it watches the active
// requests for its node only, and for each container runs the preStop hook (exec in the
// container; httpGet and tcpSocket dialled inside the pod's network namespace) within the grace
// period, stops the container through CRI, and follows it through the kubelet's restart until it
// runs again.
//
// Requests for one pod run one after another, oldest first; the others wait as Pending. Every
// decision is taken on the request as the API server has it now, and every status write carries
// the resource version it was computed from, so nothing is written over a request the cluster
// completed meanwhile (activeDeadlineSeconds, pod gone). A container is never stopped twice for
// one request, also across restarts of the node service: isKilled is written, conditionally,
// before the stop; a request that records isKilled is never killed again, only an interrupted stop
// of the very same instance is finished.
package recreate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/events"
	"github.com/probeshim/probeshim/shim/kube"
)

// EventReasonKilling on the pod when a container is stopped for a request, as the kubelet names
// its own stops; the message names the request.
const EventReasonKilling = "Killing"

// EventReasonFailedPreStopHook on the pod when a preStop hook failed (the stop goes on), as the
// kubelet names it.
const EventReasonFailedPreStopHook = "FailedPreStopHook"

// EventReasonAlreadyRestarted on the pod when a container to recreate restarted on its own after
// the request was made: that counts as its recreation, and it is not stopped again.
const EventReasonAlreadyRestarted = "AlreadyRestarted"

const (
	defaultGrace = 30 * time.Second
	minGrace     = 2 * time.Second
	// poll bounds how long a pod with work waits without any event (a missed tracker change).
	poll = 2 * time.Second
	// podUIDIndex indexes requests by their pod-uid label.
	podUIDIndex = "podUID"
)

// Runtime is what the executor needs of the container runtime. *runtime.Client (shim/runtime)
// is one.
type Runtime interface {
	// Exec runs cmd in the container; on timeout it kills the command and returns an error
	// wrapping prober.ErrExecTimeout.
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (prober.ExecResult, error)
	// StopContainer stops the container (stop signal, then SIGKILL after grace) through CRI.
	StopContainer(ctx context.Context, containerID string, grace time.Duration) error
}

// Containers reports the newest instance of a pod's container from memory, never calling the
// runtime. *runtime.Tracker (shim/runtime) is one; if it also has Synced() <-chan struct{}, the
// executor waits for it before it acts.
type Containers interface {
	Container(podUID, containerName string) (prober.ContainerStatus, bool)
}

// Config wires an Executor.
type Config struct {
	// Node is this node's name: only requests labelled crr.apps.kruise.io/node-name=<Node> are
	// seen (and not those labelled probeshim.io/crr-executor=kruise), and only pods bound to it.
	Node string
	// Client talks to apps.kruise.io/v1alpha1 (shim/kube.Clients.Recreate, a budget of its own).
	Client rest.Interface
	// Kube reads the pods bound to the node (shim/kube.Clients.Kube).
	Kube KubeClient
	// Runtime runs exec preStop hooks and stops containers.
	Runtime Runtime
	// Containers is the runtime's view of containers (the tracker).
	Containers Containers
	// Network dials httpGet and tcpSocket preStop hooks inside the pod's network namespace: a
	// *netns.Network of its own (not the prober's), since the executor calls its Forget when a
	// pod's requests are done. Default: the host's network (tests).
	Network prober.Network
	// Events records Killing, FailedPreStopHook and AlreadyRestarted on pods. Optional.
	Events events.Interface
	Log    logrus.FieldLogger
	Clock  clock.Clock
}

// KubeClient is what the executor needs of the API server: shim/kube's clients (or
// kubetest.Adapt of a fake clientset).
type KubeClient interface {
	Pods(namespace string) kube.PodClient
}

// Executor carries out this node's ContainerRecreateRequests.
type Executor struct {
	cfg    Config
	ctx    context.Context // Run's
	log    logrus.FieldLogger
	synced atomic.Bool
	ready  chan struct{} // closed once synced

	crrInf, podInf cache.SharedIndexInformer
	crrs, pods     cache.Indexer

	mu       sync.Mutex
	workers  map[string]*podWorker // by pod UID
	stopping bool
	ops      sync.WaitGroup // kills in flight
}

// New returns an Executor; Run starts it (once).
func New(cfg Config) *Executor {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	if cfg.Network == nil {
		cfg.Network = prober.HostNetwork
	}
	e := &Executor{cfg: cfg, log: cfg.Log.WithField("node", cfg.Node), ready: make(chan struct{}), workers: map[string]*podWorker{}}

	// Requests the cluster part labelled for OpenKruise are kruise-daemon's (v1alpha1.LabelCRRExecutor).
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelCRRNodeName: cfg.Node, v1alpha1.LabelCRRActive: "true"}).String() +
		"," + v1alpha1.LabelCRRExecutor + "!=" + v1alpha1.CRRExecutorKruise
	crrLW := cache.NewFilteredListWatchFromClient(cfg.Client, "containerrecreaterequests", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	e.crrInf = cache.NewSharedIndexInformer(crrLW, &v1alpha1.ContainerRecreateRequest{}, 0, cache.Indexers{podUIDIndex: func(obj any) ([]string, error) {
		crr, ok := obj.(*v1alpha1.ContainerRecreateRequest)
		if !ok {
			return nil, nil
		}
		return []string{crr.Labels[v1alpha1.LabelCRRPodUID]}, nil
	}})
	podSel := fields.OneTermEqualSelector("spec.nodeName", cfg.Node).String()
	pods := cfg.Kube.Pods(metav1.NamespaceAll)
	podLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = podSel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = podSel
			return pods.Watch(ctx, o)
		},
	}
	e.podInf = cache.NewSharedIndexInformer(podLW, &corev1.Pod{}, 0, cache.Indexers{podUIDIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return []string{string(p.UID)}, nil
		}
		return nil, nil
	}})
	_ = e.podInf.SetTransform(transformPod)
	// Set here, not in Run: ContainerChanged may read them from the tracker's goroutine at any time.
	e.crrs, e.pods = e.crrInf.GetIndexer(), e.podInf.GetIndexer()
	return e
}

// Synced reports whether the node's requests and pods have been listed (and the container
// tracker has synced); until then nothing is acted on.
func (e *Executor) Synced() bool { return e.synced.Load() }

// ContainerChanged tells the executor that the runtime's view of a pod's container changed; call
// it from the tracker's change callback. Optional: pod status updates and a poll cover it too,
// this only makes it quicker.
func (e *Executor) ContainerChanged(podUID, _ string) { e.kickIfWorking(podUID) }

// Run watches the node's active requests and pods until ctx is done. A kill in flight when ctx
// ends is interrupted; the request's isKilled record lets the next run finish it.
func (e *Executor) Run(ctx context.Context) error {
	e.ctx = ctx
	onCRR := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if crr, ok := obj.(*v1alpha1.ContainerRecreateRequest); ok {
			e.kick(crr.Labels[v1alpha1.LabelCRRPodUID])
		}
	}
	if _, err := e.crrInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onCRR, UpdateFunc: func(_, obj any) { onCRR(obj) }, DeleteFunc: onCRR,
	}); err != nil {
		return err
	}
	onPod := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			e.kickIfWorking(string(p.UID))
		}
	}
	if _, err := e.podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }, DeleteFunc: onPod,
	}); err != nil {
		return err
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); e.crrInf.RunWithContext(ctx) }()
	go func() { defer wg.Done(); e.podInf.RunWithContext(ctx) }()
	syncs := []cache.InformerSynced{e.crrInf.HasSynced, e.podInf.HasSynced}
	if s, ok := e.cfg.Containers.(interface{ Synced() <-chan struct{} }); ok {
		ch := s.Synced()
		syncs = append(syncs, func() bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		})
	}
	if cache.WaitForCacheSync(ctx.Done(), syncs...) {
		e.synced.Store(true)
		close(e.ready)
		e.log.WithField("requests", len(e.crrs.List())).Info("ContainerRecreateRequests synced")
	}
	wg.Wait()
	e.mu.Lock()
	e.stopping = true
	workers := make([]*podWorker, 0, len(e.workers))
	for _, w := range e.workers {
		workers = append(workers, w)
	}
	e.mu.Unlock()
	for _, w := range workers {
		<-w.done
	}
	e.ops.Wait()
	return ctx.Err()
}

// kick makes the pod's worker look at its requests, starting one if none runs.
func (e *Executor) kick(podUID string) {
	if podUID == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.workers[podUID]
	if !ok {
		if e.stopping {
			return // Run is waiting for the workers it has
		}
		w = newPodWorker(e, podUID)
		e.workers[podUID] = w
		go w.run()
	}
	w.poke()
}

// kickIfWorking kicks the pod's worker only if the pod has active requests.
func (e *Executor) kickIfWorking(podUID string) {
	if objs, _ := e.crrs.ByIndex(podUIDIndex, podUID); len(objs) > 0 {
		e.kick(podUID)
	}
}

// retire removes w if nothing kicked it since it found itself idle.
func (e *Executor) retire(w *podWorker) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(w.kicks) > 0 {
		return false // kicked meanwhile: look again
	}
	delete(e.workers, w.podUID)
	if f, ok := e.cfg.Network.(interface{ Forget(podUID string) }); ok {
		f.Forget(w.podUID) // close the pod's network namespace handle, if a hook opened one
	}
	return true
}

// DeclaresPort tells whether the pod of uid, as the informer has it, declares port as a TCP
// containerPort (a netns.PortCheck).
func (e *Executor) DeclaresPort(uid string, port int32) (declared, known bool) {
	p := e.pod(uid)
	if p == nil {
		return false, false
	}
	return v1alpha1.DeclaresTCPPort(p, port), true
}

// pod returns the pod of uid from the informer, or nil.
func (e *Executor) pod(uid string) *corev1.Pod {
	objs, _ := e.pods.ByIndex(podUIDIndex, uid)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			return p
		}
	}
	return nil
}

// requestsOf returns the informer's active, not completed requests of a pod.
func (e *Executor) requestsOf(podUID string) []*v1alpha1.ContainerRecreateRequest {
	objs, _ := e.crrs.ByIndex(podUIDIndex, podUID)
	out := make([]*v1alpha1.ContainerRecreateRequest, 0, len(objs))
	for _, o := range objs {
		if crr, ok := o.(*v1alpha1.ContainerRecreateRequest); ok && crr.DeletionTimestamp == nil && !completed(crr) {
			out = append(out, crr)
		}
	}
	return out
}

func completed(crr *v1alpha1.ContainerRecreateRequest) bool {
	return crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || crr.Status.CompletionTime != nil
}

// graceOf is the stop's grace period: the request's, else the pod's, else 30 s.
func graceOf(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) time.Duration {
	if s := crr.Spec.Strategy; s != nil && s.TerminationGracePeriodSeconds != nil {
		return time.Duration(*s.TerminationGracePeriodSeconds) * time.Second
	}
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}

// errGone: the request completed, was deleted or replaced; nothing more is done for it.
var errGone = errors.New("request completed or gone")

func podRef(crr *v1alpha1.ContainerRecreateRequest) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: crr.Namespace, Name: crr.Spec.PodName,
		UID: types.UID(crr.Labels[v1alpha1.LabelCRRPodUID])}
}

func (e *Executor) event(crr *v1alpha1.ContainerRecreateRequest, typ, reason, format string, args ...any) {
	if e.cfg.Events != nil {
		e.cfg.Events.Event(podRef(crr), typ, reason, fmt.Sprintf(format, args...))
	}
}
