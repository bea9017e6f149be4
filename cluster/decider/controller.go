// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/internal/kruiseapi"
	"github.com/probeshim/probeshim/cluster/internal/readiness"
)

// ControllerName names the decider in logs, events and LabelCreatedBy.
const ControllerName = "liveness-decider"

// Event reasons on pods.
const (
	EventReasonRestart       = "LivenessRestart"       // a ContainerRecreateRequest was created
	EventReasonDryRun        = "LivenessRestartDryRun" // one would have been
	EventReasonHeld          = "LivenessRestartHeld"   // a protection holds the restart back
	EventReasonRestartFailed = "LivenessRestartFailed" // the request finished without restarting
)

// requestGrace is how long after deciding a restart a missing request counts as never created
// (the decider stopped between writing its record and creating it) rather than finished and
// deleted: far below the requests' TTL, far above any API server round trip.
const requestGrace = 2 * time.Minute

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=podunavailablebudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=nodepodprobes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=containerrecreaterequests,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options configure the decider.
type Options struct {
	// Namespace holds the ConfigMap ConfigMapName (the deployment's own namespace).
	Namespace string
	// Workers is how many workloads are decided at once (default 2).
	Workers int
	// Clock is for tests; the real clock by default.
	Clock clock.PassiveClock
	// Metrics is where the decider's metrics are registered (the deployment passes
	// controller-runtime's registry, which the manager serves); nil registers none.
	Metrics prometheus.Registerer
}

// SetupWithManager adds the decider to mgr. It runs on the elected leader only, and decides
// nothing until it has read its configuration.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if o.Namespace == "" {
		return fmt.Errorf("the liveness decider needs the namespace of its ConfigMap")
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if err := indexOwners(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing pods by workload: %w", err)
	}
	if err := indexNodes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing NodePodProbes by node: %w", err)
	}
	if err := indexRequests(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing ContainerRecreateRequests by pod: %w", err)
	}
	bucket := newBucket(DefaultSettings())
	m := newMetrics(bucket.tokens)
	if err := m.register(o.Metrics); err != nil {
		return fmt.Errorf("registering the decider's metrics: %w", err)
	}
	cfg, err := newConfigSource(mgr, o.Namespace, m.configValid)
	if err != nil {
		return err
	}
	d := &decider{
		client:    mgr.GetClient(),
		live:      mgr.GetAPIReader(),
		workloads: workloads{reader: mgr.GetClient()},
		recorder:  mgr.GetEventRecorder(ControllerName),
		clock:     o.Clock,
		config:    cfg,
		bucket:    bucket,
		metrics:   m,
		reported:  map[Workload]map[types.UID]string{},
		seen:      map[Workload]map[seenKey]sighting{},
		breakers:  map[Workload]bool{},
		heldBy:    map[Workload]map[Reason]int{},
		restarted: map[types.UID]createdRequest{},
	}
	cfg.onChange = func(ctx context.Context) { d.resync.all(d.failingWorkloads(ctx)) }
	if err := mgr.Add(cfg); err != nil {
		return err
	}
	if d.pubs, err = servesPodUnavailableBudgets(mgr); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if d.pubs {
		b = b.Watches(&kruiseapi.PodUnavailableBudget{}, pubHandler(d))
	}
	return b.
		Named(ControllerName).
		WatchesRawSource(d.resync.source()).
		Watches(&v1alpha1.NodePodProbe{}, nodePodProbeHandler(d)).
		Watches(&corev1.Node{}, nodeHandler(d)).
		Watches(&corev1.Pod{}, podHandler(d)).
		Watches(&v1alpha1.ContainerRecreateRequest{}, requestHandler(d)).
		Watches(&policyv1.PodDisruptionBudget{}, budgetHandler(d)).
		Watches(namespaceMeta(), namespaceHandler(d)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Workers}).
		Complete(d)
}

// servesPodUnavailableBudgets says whether OpenKruise's PodUnavailableBudget is served, read
// once at start (a CRD installed later is honoured from the next start, or leader change); when
// it is, the decider's scheme learns the type.
func servesPodUnavailableBudgets(mgr ctrl.Manager) (bool, error) {
	gk := schema.GroupKind{Group: kruiseapi.GroupVersion.Group, Kind: kruiseapi.PodUnavailableBudgetKind}
	_, err := mgr.GetRESTMapper().RESTMapping(gk, kruiseapi.GroupVersion.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking for OpenKruise's PodUnavailableBudget: %w", err)
	}
	if err := kruiseapi.AddToScheme(mgr.GetScheme()); err != nil {
		return false, err
	}
	mgr.GetLogger().WithName(ControllerName).Info("OpenKruise's PodUnavailableBudget is served: restarts honour it beside PodDisruptionBudgets")
	return true, nil
}

type decider struct {
	client    client.Client
	live      client.Reader // uncached, for the one read a lagging cache must not answer
	workloads workloads
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	config    *configSource
	bucket    *bucket
	metrics   *metrics
	resync    resync

	mu sync.Mutex
	// reported is the last decision reported per pod of each workload (outcome, reason and
	// failures), so a restart held for the same reason is told once, not at every reconcile.
	reported map[Workload]map[types.UID]string
	// seen is when the decider first saw each current failure of a workload's pods.
	seen     map[Workload]map[seenKey]sighting
	breakers map[Workload]bool
	// heldBy counts each workload's pods held now, by reason (probeshim_decider_held_pods).
	heldBy map[Workload]map[Reason]int

	// budgetMu is held by a reconcile with failures to decide, from counting its disruption
	// budgets through creating its requests.
	budgetMu sync.Mutex
	// restarted are the requests the decider created, by pod, until its cache shows them (under
	// mu): a disruption in flight that a count from the cache would miss.
	restarted map[types.UID]createdRequest
	// pubs: OpenKruise's PodUnavailableBudget is served, and honoured.
	pubs bool
	// totals are the liveness counts of every node, for the cluster's and the nodes' breakers.
	totals clusterCounts
}

// createdRequest is a request the decider created, and when.
type createdRequest struct {
	name string
	at   time.Time
}

// cacheLag is how long a created request the cache does not show counts as in flight: far longer
// than the cache lags behind the API server (a request deleted before the cache showed it is
// forgotten then).
const cacheLag = 30 * time.Second

// recreating says whether a restart of a pod is in flight: anyone's active request, or one the
// decider created that its cache does not show yet.
func (d *decider) recreating(now time.Time) recreatingFunc {
	return func(ctx context.Context, pod *corev1.Pod) (bool, error) {
		d.mu.Lock()
		c, ok := d.restarted[pod.UID]
		d.mu.Unlock()
		if ok && now.Sub(c.at) < cacheLag {
			err := d.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: c.name}, &v1alpha1.ContainerRecreateRequest{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
		}
		if ok {
			d.forgetCreated(pod.UID)
		}
		return d.activeRequest(ctx, pod)
	}
}

func (d *decider) forgetCreated(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.restarted, uid)
}

type seenKey struct {
	pod       types.UID
	container string
	since     time.Time
}

// sighting is when the decider first saw a failure, and the container instance it was about.
type sighting struct {
	at       time.Time
	instance Instance
}

func (d *decider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	settings, loaded, cfgErr := d.config.current()
	if !loaded {
		return reconcile.Result{RequeueAfter: time.Second}, nil // never decide before reading the switches
	}
	wl, err := workloadOf(req)
	if err != nil {
		return reconcile.Result{}, nil
	}
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("workload", wl.String()))
	pods, terminating, err := d.workloads.pods(ctx, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(pods) == 0 {
		d.forget(wl)
		return reconcile.Result{}, nil
	}
	now := d.clock.Now()
	byUID := make(map[types.UID]*corev1.Pod, len(pods))
	views := make([]Pod, 0, len(pods))
	nodes := &nodeViews{settings: settings, npps: map[string]*v1alpha1.NodePodProbe{}, notReady: map[string]string{}, suspect: map[string]string{}}
	for _, p := range pods {
		v, p, err := d.view(ctx, p, nodes, now)
		if err != nil {
			return reconcile.Result{}, err
		}
		byUID[p.UID] = p
		views = append(views, v)
	}
	d.markSeen(wl, views, now)
	var disruption []DisruptionBudget
	if hasFailures(views) {
		// Workloads that share a disruption budget are decided one at a time, from the budget
		// counted through to the requests created, so two workers never spend its last disruption
		// twice.
		d.budgetMu.Lock()
		defer d.budgetMu.Unlock()
		if disruption, err = d.workloads.disruptionBudgets(ctx, wl, pods, d.pubs, d.recreating(now)); err != nil {
			return reconcile.Result{}, err
		}
	}
	nsOff, err := d.namespaceOptedOut(ctx, wl.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	slowed, err := d.unhealthyCluster(ctx, views, nodes)
	if err != nil {
		return reconcile.Result{}, err
	}
	d.bucket.configure(now, settings, slowed != "")
	decisions, breaker := Decide(Input{
		Now: now, Settings: settings, ConfigErr: cfgErr, Workload: wl, Pods: views,
		NamespaceOptedOut: nsOff, Budget: defaultBudget(settings, len(pods)), Terminating: terminating,
		Disruption: disruption, Slowed: slowed,
	}, d.bucket)
	d.noteBreaker(ctx, wl, breaker)

	var retry time.Duration
	var errs []error
	created := map[types.UID]*v1alpha1.ContainerRecreateRequest{}
	for i := range decisions {
		dec := &decisions[i]
		switch {
		case dec.Resume && dec.Outcome == Restart:
			crr, err := d.resume(ctx, byUID[dec.Pod.UID], dec, settings, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			created[dec.Pod.UID] = crr
		case dec.Resume:
			// Held (or dry run): the recorded restart never happened; forget it, so the
			// failure is decided anew, with every check, once what holds it lets go.
			if err := d.release(ctx, byUID[dec.Pod.UID], dec); err != nil {
				errs = append(errs, err)
				continue
			}
		case dec.Outcome == Restart:
			crr, err := d.restart(ctx, byUID[dec.Pod.UID], dec, settings, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			created[dec.Pod.UID] = crr
		}
		if dec.RetryAfter > 0 && (retry == 0 || dec.RetryAfter < retry) {
			retry = dec.RetryAfter
		}
	}
	d.note(ctx, d.report(ctx, wl, byUID, created, decisions))
	if len(errs) > 0 {
		return reconcile.Result{}, fmt.Errorf("%d of %d restarts not started: %w", len(errs), len(decisions), errs[0])
	}
	return reconcile.Result{RequeueAfter: retry}, nil
}

// nodeViews is what the pods' nodes tell one reconcile: their NodePodProbes (nil: none) and why
// they are not Ready ("": they are).
type nodeViews struct {
	settings *Settings // nil when the configuration is invalid
	npps     map[string]*v1alpha1.NodePodProbe
	notReady map[string]string
	suspect  map[string]string // why a node's breaker is open, "" when not
	// failing and probed count the pods with liveness results on every node (read once, when a
	// node's own count asks for them).
	failing, probed int
	counted         bool
}

// view is what Decide needs of pod; it follows up on the request in flight first, which may
// update the pod's record.
//
// pod is the cache's own object, read only; view returns the pod to use from then on: a copy
// of it when the reconcile may write to it (a failure or a request in flight).
func (d *decider) view(ctx context.Context, pod *corev1.Pod, nodes *nodeViews, now time.Time) (Pod, *corev1.Pod, error) {
	// Anyone's request makes any pod of the workload unavailable.
	active, err := d.activeRequest(ctx, pod)
	if err != nil {
		return Pod{}, pod, err
	}
	npp, err := d.nodePodProbe(ctx, pod.Spec.NodeName, nodes.npps)
	if err != nil {
		return Pod{}, pod, err
	}
	v, recErr := podView(pod, npp)
	v.Recreating = active
	if v.NodeNotReady, err = d.nodeNotReady(ctx, pod.Spec.NodeName, nodes.notReady); err != nil {
		return Pod{}, pod, err
	}
	if v.NodeSuspect, err = d.nodeSuspect(ctx, pod.Spec.NodeName, npp, nodes); err != nil {
		return Pod{}, pod, err
	}
	if !v1alpha1.UsesEnhancedLiveness(pod) {
		return v, pod, nil // counts for the workload's size and availability only
	}
	if recErr != nil {
		// Someone edited it: acting as if nothing was done is the only reading left; say so.
		logf.FromContext(ctx).Error(recErr, "ignoring an unreadable restart record", "pod", klog.KObj(pod))
	}
	rec := v.Record
	if len(v.Failing) == 0 && rec.Request == "" {
		return v, pod, nil // nothing to decide or follow up
	}
	pod = pod.DeepCopy() // the reconcile may write to this one
	if rec.Request != "" {
		if rec, active, v.Unstarted, err = d.followUp(ctx, pod, rec, active, now); err != nil {
			return v, pod, err
		}
	}
	v.Record, v.Recreating = rec, active
	return v, pod, nil
}

// podView is what pod's cached object and its node's NodePodProbe (nil: none) tell Decide of it:
// everything but the requests in flight. err is an unreadable restart record, read as none.
func podView(pod *corev1.Pod, npp *v1alpha1.NodePodProbe) (Pod, error) {
	v := Pod{
		Name: pod.Name, UID: pod.UID, Labels: pod.Labels, Ready: readiness.Pod(pod),
		OptedOut: pod.Annotations[AnnotationRestartDisabled] == "true",
	}
	if npp != nil {
		if since, silent := v1alpha1.NodeServiceSilence(npp); silent {
			v.NodeServiceSilent = v1alpha1.SilentMessage(pod.Spec.NodeName, since)
		}
	}
	if !v1alpha1.UsesEnhancedLiveness(pod) {
		return v, nil
	}
	v.Failing = failures(pod, npp)
	if len(v.Failing) > 0 {
		v.Containers = instances(pod)
	}
	rec, err := ParseRecord(pod.Annotations)
	v.Record = rec
	return v, err
}

// markSeen stamps each failure of views with when the decider first saw it and the container
// instance running then, and forgets the failures that are gone. A failure reported by a silent
// node service is not seen: once the node is back, its observation starts then, so the node
// service has a probe period to refresh a result that may have healed meanwhile.
func (d *decider) markSeen(wl Workload, views []Pod, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.seen[wl]
	next := map[seenKey]sighting{}
	for i := range views {
		if reason, _ := views[i].nodeHold(); reason != "" {
			continue
		}
		for j := range views[i].Failing {
			f := &views[i].Failing[j]
			k := seenKey{views[i].UID, f.Container, f.Since}
			s, ok := prev[k]
			if !ok {
				s = sighting{at: now}
				if c := views[i].Containers[f.Container]; c.Running {
					s.instance = c
				}
			}
			f.Seen, f.Instance, next[k] = s.at, s.instance, s
		}
	}
	if len(next) == 0 {
		delete(d.seen, wl)
	} else {
		d.seen[wl] = next
	}
}

// nodePodProbe is the NodePodProbe of node (nil when there is none), read once per reconcile into
// npps: the cached object itself, read only, since a Get would deep-copy the node's whole
// NodePodProbe for every pod of the workload (most of a reconcile's CPU at scale).
func (d *decider) nodePodProbe(ctx context.Context, node string, npps map[string]*v1alpha1.NodePodProbe) (*v1alpha1.NodePodProbe, error) {
	if node == "" {
		return nil, nil
	}
	npp, ok := npps[node]
	if !ok {
		var list v1alpha1.NodePodProbeList
		if err := d.client.List(ctx, &list, client.MatchingFields{nodeIndex: node}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			npp = &list.Items[0]
		}
		npps[node] = npp
	}
	return npp, nil
}

// nodeNotReady says why node is not Ready, or "" when it is (or is not known: its pods' results
// then say what they say). seen keeps the answers of one reconcile.
func (d *decider) nodeNotReady(ctx context.Context, node string, seen map[string]string) (string, error) {
	if node == "" {
		return "", nil
	}
	if why, ok := seen[node]; ok {
		return why, nil
	}
	n := &corev1.Node{}
	if err := d.client.Get(ctx, client.ObjectKey{Name: node}, n); client.IgnoreNotFound(err) != nil {
		return "", err
	}
	n.Name = node // a node not found has no conditions, and is not held
	why := readiness.NodeNotReady(n)
	seen[node] = why
	return why, nil
}

// hasFailures: some pod of views has liveness failures to decide on (new or recorded unstarted).
func hasFailures(views []Pod) bool {
	return slices.ContainsFunc(views, func(p Pod) bool { return len(p.Failing) > 0 || len(p.Unstarted) > 0 })
}

// unhealthyCluster says why the cluster-wide restart rate is slowed now, or "": more than
// rateLimit.unhealthyShare of all pods with liveness results fail at once. Counted only when
// the workload has failures to decide on.
func (d *decider) unhealthyCluster(ctx context.Context, views []Pod, nodes *nodeViews) (string, error) {
	s := nodes.settings
	if s == nil || !hasFailures(views) {
		return "", nil
	}
	if err := nodes.count(ctx, &d.totals, d.client); err != nil {
		return "", err
	}
	if nodes.failing < s.UnhealthyMinFailingPods || !overShare(nodes.failing, nodes.probed, s.UnhealthyShare) {
		return "", nil
	}
	return fmt.Sprintf("%d of the %d pods with liveness results in the cluster fail at once (more than %s)",
		nodes.failing, nodes.probed, s.UnhealthyShare.String()), nil
}

// count reads, once per reconcile, the liveness counts of every node.
func (n *nodeViews) count(ctx context.Context, totals *clusterCounts, c client.Reader) error {
	if n.counted {
		return nil
	}
	var err error
	if n.failing, n.probed, err = totals.get(ctx, c); err != nil {
		return err
	}
	n.counted = true
	return nil
}

// clusterCounts are the liveness counts of every node, read from the cache once per change of a
// NodePodProbe (and at least every countsMaxAge): in a mass failure, just when they matter, one
// NodePodProbe's change sends many workloads to be decided, and each read walks every node's
// NodePodProbe.
type clusterCounts struct {
	mu              sync.Mutex
	read            time.Time // by the machine's monotonic clock, whatever clock decides
	failing, probed int
}

const countsMaxAge = 10 * time.Second

func (t *clusterCounts) get(ctx context.Context, c client.Reader) (failing, probed int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.read.IsZero() && time.Since(t.read) < countsMaxAge {
		return t.failing, t.probed, nil
	}
	var list v1alpha1.NodePodProbeList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	t.failing, t.probed = 0, 0
	for i := range list.Items {
		f, p := livenessCounts(&list.Items[i])
		t.failing, t.probed = t.failing+f, t.probed+p
	}
	t.read = time.Now()
	return t.failing, t.probed, nil
}

// changed forgets the counts: a NodePodProbe changed.
func (t *clusterCounts) changed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.read = time.Time{}
}

// nodeSuspect says why node's circuit breaker is open (CircuitBreaker.Node), or "": more than
// its share of the node's pods with liveness results fail, at least its minimum, while on the
// other nodes together (some pods with results there) they do not. A node whose service is
// silent has no current results.
func (d *decider) nodeSuspect(ctx context.Context, node string, npp *v1alpha1.NodePodProbe, nodes *nodeViews) (string, error) {
	s := nodes.settings
	if node == "" || npp == nil || s == nil {
		return "", nil
	}
	if why, ok := nodes.suspect[node]; ok {
		return why, nil
	}
	failing, probed := livenessCounts(npp)
	why := ""
	if failing >= s.NodeMinFailingPods && overShare(failing, probed, s.NodeFailingShare) {
		if err := nodes.count(ctx, &d.totals, d.client); err != nil {
			return "", err
		}
		// The totals may be a second older than npp: never below none.
		elsewhereFailing, elsewhere := max(nodes.failing-failing, 0), max(nodes.probed-probed, 0)
		// Only against other nodes' results: alone, a node cannot be told from its workloads.
		if elsewhere > 0 && !overShare(elsewhereFailing, elsewhere, s.NodeFailingShare) {
			why = fmt.Sprintf("%d of the %d pods with liveness results on node %s fail at once (%d of %d on the other nodes)",
				failing, probed, node, elsewhereFailing, elsewhere)
		}
	}
	nodes.suspect[node] = why
	return why, nil
}

// livenessCounts counts the pods of npp's status with liveness results, and those with a
// liveness probe Failed; none while its node service is silent.
func livenessCounts(npp *v1alpha1.NodePodProbe) (failing, probed int) {
	if _, silent := v1alpha1.NodeServiceSilence(npp); silent {
		return 0, 0
	}
	for i := range npp.Status.PodProbeStatuses {
		has, fails := false, false
		for _, ps := range npp.Status.PodProbeStatuses[i].ProbeStates {
			if _, ok := v1alpha1.ParseLivenessProbeName(ps.Name); ok {
				has = true
				fails = fails || ps.State == v1alpha1.ProbeFailed
			}
		}
		if has {
			probed++
		}
		if fails {
			failing++
		}
	}
	return failing, probed
}

// failures are pod's enhanced liveness probes reported Failed in its node's NodePodProbe.
func failures(pod *corev1.Pod, npp *v1alpha1.NodePodProbe) []Failure {
	if npp == nil {
		return nil
	}
	var periods map[string]time.Duration // parsed only for a pod with a failure
	var out []Failure
	for i := range npp.Status.PodProbeStatuses {
		st := &npp.Status.PodProbeStatuses[i]
		if st.UID != string(pod.UID) {
			continue
		}
		for _, ps := range st.ProbeStates {
			if c, ok := v1alpha1.ParseLivenessProbeName(ps.Name); ok && ps.State == v1alpha1.ProbeFailed {
				if periods == nil {
					periods = probePeriods(pod)
				}
				out = append(out, Failure{Container: c, Since: ps.LastTransitionTime.Time, Period: periods[c]})
			}
		}
	}
	return out
}

// instances are the pod's containers and sidecars as the kubelet last reported them.
func instances(pod *corev1.Pod) map[string]Instance {
	out := make(map[string]Instance, len(pod.Status.ContainerStatuses))
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			inst := Instance{ID: cs.ContainerID, RestartCount: cs.RestartCount}
			if r := cs.State.Running; r != nil {
				inst.Running, inst.StartedAt = true, r.StartedAt.Time
			}
			out[cs.Name] = inst
		}
	}
	return out
}

// probePeriods are the periods of pod's liveness probes by container (the API's default of 10s
// where unset).
func probePeriods(pod *corev1.Pod) map[string]time.Duration {
	out := map[string]time.Duration{}
	probes, err := v1alpha1.ParseContainerProbeContext(pod.Annotations[v1alpha1.AnnotationContainerProbeContext])
	if err != nil {
		return out
	}
	for _, p := range probes {
		period := time.Duration(p.LivenessProbe.PeriodSeconds) * time.Second
		if period <= 0 {
			period = 10 * time.Second
		}
		out[p.Name] = period
	}
	return out
}

// activeRequest reports whether any ContainerRecreateRequest for pod is still active: the pod
// is then unavailable, and gets no second one.
func (d *decider) activeRequest(ctx context.Context, pod *corev1.Pod) (bool, error) {
	var list v1alpha1.ContainerRecreateRequestList
	if err := d.client.List(ctx, &list, client.InNamespace(pod.Namespace),
		client.MatchingFields{requestPodIndex: string(pod.UID)}); err != nil {
		return false, fmt.Errorf("listing the ContainerRecreateRequests of pod %s: %w", klog.KObj(pod), err)
	}
	for i := range list.Items {
		if !finished(&list.Items[i]) {
			return true, nil
		}
	}
	return false, nil
}

func finished(crr *v1alpha1.ContainerRecreateRequest) bool {
	return crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || crr.Status.CompletionTime != nil
}

// followUp settles the request in pod's record: still running, never created (its failures come
// back as unstarted, for Decide to check like any new restart), or finished (note which
// containers it did not restart, then delete it).
//
// Only the cluster deployment can write the record (the probeshim-pod-records admission policy),
// and even so nothing in it is created without Decide's checks: the switches, opt-outs,
// blacklist, breaker, budget and rate limit as they are now.
func (d *decider) followUp(ctx context.Context, pod *corev1.Pod, rec Record, active bool, now time.Time) (Record, bool, []Failure, error) {
	logger := logf.FromContext(ctx).WithValues("pod", klog.KObj(pod), "crr", rec.Request)
	crr := &v1alpha1.ContainerRecreateRequest{}
	err := d.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: rec.Request}, crr)
	switch {
	case apierrors.IsNotFound(err) && rec.Requested != nil && now.Sub(rec.Requested.Time) < requestGrace:
		// Recorded but not (yet, in our cache) created: create it; AlreadyExists means it was.
		// The pod and request caches lag independently: a request finished and deleted after
		// its record was cleared would look just like this with a stale pod, so only the live
		// record may send us on.
		live := &corev1.Pod{}
		if err := d.live.Get(ctx, client.ObjectKeyFromObject(pod), live); err != nil {
			return rec, active, nil, client.IgnoreNotFound(err)
		}
		if liveRec, _ := ParseRecord(live.Annotations); liveRec.Request != rec.Request {
			return liveRec, active, nil, nil
		}
		var failing []Failure
		for c, cr := range rec.Containers {
			if cr.LastRestart.Equal(rec.Requested) {
				failing = append(failing, Failure{Container: c, Since: cr.Failure.Time})
			}
		}
		slices.SortFunc(failing, func(a, b Failure) int { return strings.Compare(a.Container, b.Container) })
		if len(failing) > 0 {
			// The request cache may lag behind a create a moment ago: only a request the API
			// server does not have is unstarted (a held one is dropped from the record, which
			// must never forget a request that exists).
			err := d.live.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: rec.Request}, &v1alpha1.ContainerRecreateRequest{})
			if err == nil {
				return rec, true, nil, nil
			}
			if !apierrors.IsNotFound(err) {
				return rec, active, nil, err
			}
			return rec, active, failing, nil
		}
		fallthrough
	case apierrors.IsNotFound(err):
		logger.Info("the restart request is gone; taking it as finished")
		rec = rec.finished(nil)
		return rec, active, nil, d.patchRecord(ctx, pod, rec)
	case err != nil:
		return rec, active, nil, err
	case !finished(crr):
		return rec, true, nil, nil
	}
	var notRestarted []string
	for _, st := range crr.Status.ContainerRecreateStates {
		if st.Phase != v1alpha1.ContainerRecreateRequestSucceeded {
			notRestarted = append(notRestarted, st.Name)
		}
	}
	rec = rec.finished(notRestarted)
	if err := d.patchRecord(ctx, pod, rec); err != nil {
		return rec, active, nil, err
	}
	if len(notRestarted) > 0 {
		d.recorder.Eventf(pod, crr, corev1.EventTypeWarning, EventReasonRestartFailed, "Restart",
			"ContainerRecreateRequest %s did not restart %s: %s; the failure will be decided again after the backoff",
			crr.Name, strings.Join(notRestarted, ", "), crr.Status.Message)
	}
	logger.Info("restart request finished", "notRestarted", notRestarted)
	d.forgetCreated(pod.UID)
	if crr.Labels[LabelCreatedBy] == ControllerName {
		err := d.client.Delete(ctx, crr, client.Preconditions{UID: &crr.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return rec, active, nil, fmt.Errorf("deleting the finished ContainerRecreateRequest %s: %w", crr.Name, err)
		}
	}
	return rec, active, nil, nil
}

// resume creates the request a decision recorded but never created, under its recorded name,
// once Decide let it through again.
func (d *decider) resume(ctx context.Context, pod *corev1.Pod, dec *Decision, s *Settings, now time.Time) (*v1alpha1.ContainerRecreateRequest, error) {
	name := dec.Pod.Record.Request
	return d.create(ctx, pod, name, dec, s, now)
}

// release forgets a recorded restart that was never created and is held now: the request is
// dropped from the record and its failures are forgotten, so they are decided again.
func (d *decider) release(ctx context.Context, pod *corev1.Pod, dec *Decision) error {
	containers := make([]string, len(dec.Failing))
	for i, f := range dec.Failing {
		containers[i] = f.Container
	}
	logf.FromContext(ctx).Info("a recorded restart that was never created is held; forgetting it",
		"pod", klog.KObj(pod), "crr", dec.Pod.Record.Request, "outcome", dec.Outcome, "reason", dec.Reason)
	return d.patchRecord(ctx, pod, dec.Pod.Record.finished(containers))
}

// restart records the decision on the pod, then creates the request. The record comes first
// and is written with an optimistic lock: a stale cache or a second replica loses the race
// there, and the request's name (from the failures) makes a repeated create a no-op.
func (d *decider) restart(ctx context.Context, pod *corev1.Pod, dec *Decision, s *Settings, now time.Time) (*v1alpha1.ContainerRecreateRequest, error) {
	attempt := 0
	for _, f := range dec.Failing {
		attempt = max(attempt, restartsAfter(s, dec.Pod.Record, f))
	}
	name := RequestName(pod.Name, pod.UID, dec.Failing, attempt)
	rec := dec.Pod.Record.withRestart(s, dec.Failing, now, name)
	if err := d.patchRecord(ctx, pod, rec); err != nil {
		return nil, err
	}
	return d.create(ctx, pod, name, dec, s, now)
}

// create creates the request of a decision under name and observes the reaction time.
func (d *decider) create(ctx context.Context, pod *corev1.Pod, name string, dec *Decision, s *Settings, now time.Time) (*v1alpha1.ContainerRecreateRequest, error) {
	d.mu.Lock()
	for uid, c := range d.restarted {
		if now.Sub(c.at) >= cacheLag {
			delete(d.restarted, uid)
		}
	}
	d.restarted[pod.UID] = createdRequest{name: name, at: now} // whether or not the create answers: it may have landed
	d.mu.Unlock()
	crr, err := d.createRequest(ctx, pod, name, dec, s)
	if err != nil {
		return nil, err
	}
	for _, f := range dec.Failing {
		if !f.Since.IsZero() {
			d.metrics.reaction.Observe(now.Sub(f.Since).Seconds())
		}
	}
	dec.Message = fmt.Sprintf("%s; ContainerRecreateRequest %s", dec.Message, name)
	return crr, nil
}

func (d *decider) patchRecord(ctx context.Context, pod *corev1.Pod, rec Record) error {
	orig := pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if rec.Request == "" && len(rec.Containers) == 0 {
		delete(pod.Annotations, AnnotationRestarts)
	} else {
		pod.Annotations[AnnotationRestarts] = rec.format()
	}
	if err := d.client.Patch(ctx, pod, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the restart on pod %s: %w", klog.KObj(pod), err)
	}
	return nil
}

// createRequest creates the request; one that exists already (the same decision, made before)
// is no error and comes back nil.
func (d *decider) createRequest(ctx context.Context, pod *corev1.Pod, name string, dec *Decision, s *Settings) (*v1alpha1.ContainerRecreateRequest, error) {
	failing := dec.Failing
	reason := "failed liveness probe, will be restarted; decider: " + strings.TrimPrefix(dec.Message, "liveness probe failed: "+containerList(failing)+"; ")
	if len(reason) > v1alpha1.MaxCRRReasonBytes {
		reason = strings.ToValidUTF8(reason[:v1alpha1.MaxCRRReasonBytes-3], "") + "..."
	}
	containers := make([]v1alpha1.ContainerRecreateRequestContainer, len(failing))
	for i, f := range failing {
		containers[i] = v1alpha1.ContainerRecreateRequestContainer{Name: f.Container}
	}
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: pod.Namespace,
			// The pod labels are the mutating webhook's too; set here, the decider's own
			// bookkeeping does not depend on the webhook.
			Labels: map[string]string{LabelCreatedBy: ControllerName,
				v1alpha1.LabelCRRPodUID: string(pod.UID), v1alpha1.LabelCRRNodeName: pod.Spec.NodeName},
			Annotations: map[string]string{v1alpha1.AnnotationCRRReason: reason},
			// Garbage collected with the pod.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: v1alpha1.ContainerRecreateRequestSpec{
			PodName:    pod.Name,
			Containers: containers,
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{
				FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyFail,
				TerminationGracePeriodSeconds: grace(pod, failing),
			},
			TTLSecondsAfterFinished: ptr.To(int32(s.RequestTTL / time.Second)),
		},
	}
	err := d.client.Create(ctx, crr)
	if apierrors.IsAlreadyExists(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating ContainerRecreateRequest %s/%s: %w", pod.Namespace, name, err)
	}
	logf.FromContext(ctx).Info("restarting containers whose liveness probe failed", "pod", klog.KObj(pod), "crr", name,
		"containers", containerList(failing))
	return crr, nil
}

// grace is the longest terminationGracePeriodSeconds of the failing containers' liveness
// probes, as the kubelet uses the probe's value when it kills for liveness; the pod's when no
// probe sets one.
func grace(pod *corev1.Pod, failing []Failure) *int64 {
	var g *int64
	if probes, err := v1alpha1.ParseContainerProbeContext(pod.Annotations[v1alpha1.AnnotationContainerProbeContext]); err == nil {
		for _, p := range probes {
			for _, f := range failing {
				if p.Name == f.Container && p.LivenessProbe.TerminationGracePeriodSeconds != nil &&
					(g == nil || *p.LivenessProbe.TerminationGracePeriodSeconds > *g) {
					g = ptr.To(*p.LivenessProbe.TerminationGracePeriodSeconds)
				}
			}
		}
	}
	if g == nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		g = ptr.To(*pod.Spec.TerminationGracePeriodSeconds)
	}
	if g != nil && *g > validation.MaxDurationSeconds {
		g = ptr.To(validation.MaxDurationSeconds) // what a request may say; the pod may say more
	}
	return g
}

// report tells each decision on its pod and in the metrics, once per change of outcome, reason
// or failures. Events that differ only in their note would be folded into one series by the
// event recorder, so a restart names its request as the related object and a hold its reason as
// the action.
func (d *decider) report(ctx context.Context, wl Workload, pods map[types.UID]*corev1.Pod,
	created map[types.UID]*v1alpha1.ContainerRecreateRequest, decisions []Decision) []lastDecision {
	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.reported[wl]
	next := make(map[types.UID]string, len(decisions))
	var told []lastDecision
	for i := range decisions {
		dec := &decisions[i]
		key := fmt.Sprintf("%s/%s/%v", dec.Outcome, dec.Reason, dec.Failing)
		next[dec.Pod.UID] = key
		crr := created[dec.Pod.UID]
		if dec.Outcome == Restart && crr == nil {
			continue // not started (the error is retried), or started before by an earlier decision
		}
		if dec.Outcome != Restart && prev[dec.Pod.UID] == key {
			continue
		}
		if dec.Reason == ReasonObserving {
			logf.FromContext(ctx).V(1).Info("watching a new liveness failure", "pod", klog.KObj(pods[dec.Pod.UID]), "message", dec.Message)
			continue
		}
		if Quiet(dec.Reason) {
			// An exit: the kubelet's business, so no event that could read as a liveness failure.
			d.metrics.decisions.WithLabelValues(string(dec.Outcome), string(dec.Reason)).Inc()
			logf.FromContext(ctx).Info("not restarting: the Failed liveness state is not the running container's",
				"pod", klog.KObj(pods[dec.Pod.UID]), "reason", dec.Reason, "message", dec.Message)
			continue
		}
		d.metrics.decisions.WithLabelValues(string(dec.Outcome), string(dec.Reason)).Inc()
		pod := pods[dec.Pod.UID]
		switch dec.Outcome {
		case Restart:
			d.recorder.Eventf(pod, crr, corev1.EventTypeNormal, EventReasonRestart, "Restart", "%s", dec.Message)
		case DryRun:
			d.recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventReasonDryRun, "DryRun", "%s", dec.Message)
		default:
			d.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonHeld, string(dec.Reason),
				"restart of %s held back (%s): %s", containerList(dec.Failing), dec.Reason, dec.Message)
		}
		logf.FromContext(ctx).Info("liveness restart decision", "pod", klog.KObj(pod), "outcome", dec.Outcome,
			"reason", dec.Reason, "message", dec.Message)
		told = append(told, lastDecision{pod: pod, cond: decisionCondition(dec, d.clock.Now())})
	}
	if len(next) == 0 {
		delete(d.reported, wl)
	} else {
		d.reported[wl] = next
	}
	held := map[Reason]int{}
	for i := range decisions {
		if dec := &decisions[i]; dec.Outcome == Held && !Quiet(dec.Reason) && dec.Reason != ReasonObserving {
			held[dec.Reason]++
		}
	}
	d.setHeld(wl, held)
	return told
}

// setHeld replaces the workload's part of probeshim_decider_held_pods (under mu).
func (d *decider) setHeld(wl Workload, held map[Reason]int) {
	for r, n := range d.heldBy[wl] {
		d.metrics.held.WithLabelValues(string(r)).Sub(float64(n))
	}
	for r, n := range held {
		d.metrics.held.WithLabelValues(string(r)).Add(float64(n))
	}
	if len(held) == 0 {
		delete(d.heldBy, wl)
	} else {
		d.heldBy[wl] = held
	}
}

// ConditionLivenessRestart is the pod condition that holds the decider's last decision about the
// pod, told when it changes (as the events are): True when it restarted the pod's containers,
// False when a restart is held back (the reason says why) or would be made but the decider runs
// dry (reason DryRun). Its lastTransitionTime is when the decision was made. It outlives the
// events, which expire.
const ConditionLivenessRestart corev1.PodConditionType = "probeshim.io/LivenessRestart"

// maxDecisionMessage bounds the condition's message, as the pod is every tenant's object to read.
const maxDecisionMessage = 1024

// lastDecision is a decision to note on its pod.
type lastDecision struct {
	pod  *corev1.Pod
	cond corev1.PodCondition
}

func decisionCondition(dec *Decision, now time.Time) corev1.PodCondition {
	c := corev1.PodCondition{Type: ConditionLivenessRestart, Status: corev1.ConditionFalse, Reason: string(dec.Reason),
		LastTransitionTime: metav1.NewTime(now)}
	c.Message = fmt.Sprintf("%s of %s: %s", dec.Outcome, containerList(dec.Failing), dec.Message)
	switch dec.Outcome {
	case Restart:
		c.Status = corev1.ConditionTrue
	case DryRun:
		c.Reason = "DryRun"
	}
	if len(c.Message) > maxDecisionMessage {
		c.Message = strings.ToValidUTF8(c.Message[:maxDecisionMessage-3], "") + "..."
	}
	return c
}

// note writes each decision's condition on its pod. A pod gone or a write refused loses only the
// note (the event and the log have it): it is logged, not retried.
func (d *decider) note(ctx context.Context, told []lastDecision) {
	for _, t := range told {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": t.pod.UID},
			"status": map[string]any{"conditions": []corev1.PodCondition{t.cond}}})
		if err != nil {
			continue
		}
		target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.pod.Namespace, Name: t.pod.Name}}
		if err := d.client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body)); client.IgnoreNotFound(err) != nil {
			logf.FromContext(ctx).Error(err, "noting the decision on the pod", "pod", klog.KObj(t.pod), "reason", t.cond.Reason)
		}
	}
}

func (d *decider) noteBreaker(ctx context.Context, wl Workload, b Breaker) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.breakers[wl] == b.Open {
		return
	}
	if b.Open {
		d.breakers[wl] = true
		logf.FromContext(ctx).Info("circuit breaker opened: holding every liveness restart of the workload",
			"failing", b.Failing, "pods", b.Total)
	} else {
		delete(d.breakers, wl)
		logf.FromContext(ctx).Info("circuit breaker closed", "failing", b.Failing, "pods", b.Total)
	}
	d.metrics.breakersOpen.Set(float64(len(d.breakers)))
}

// forget drops what the decider remembers of a workload that has no pods left.
func (d *decider) forget(wl Workload) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.reported, wl)
	delete(d.seen, wl)
	d.setHeld(wl, nil)
	if d.breakers[wl] {
		delete(d.breakers, wl)
		d.metrics.breakersOpen.Set(float64(len(d.breakers)))
	}
}

func (d *decider) namespaceOptedOut(ctx context.Context, ns string) (bool, error) {
	m := namespaceMeta()
	if err := d.client.Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return m.Annotations[AnnotationRestartDisabled] == "true", nil
}
