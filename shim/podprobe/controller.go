// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/events"
)

// Engine is the part of the probe engine the controller drives.
type Engine interface {
	Sync(desired []prober.Desired)
	Updates() <-chan prober.Update
	Snapshot() []prober.Update
}

// Metrics counts the controller's API writes.
type Metrics interface {
	StatusWrite(err error)
}

// Config wires a Controller.
type Config struct {
	Node   string
	Client rest.Interface // apps.kruise.io/v1alpha1
	Engine Engine
	// Events records KruiseProbeSucceeded / KruiseProbeFailed on pods.
	Events  events.Interface
	Metrics Metrics
	Log     logrus.FieldLogger
	Clock   clock.WithTicker
	// WriteInterval is the least time between two status writes (default 1 s).
	WriteInterval time.Duration
	// RefreshInterval is how often lastProbeTime is refreshed when nothing
	// else changed (default 1 min).
	RefreshInterval time.Duration
	// MessageInterval is the least time between two writes that only
	// publish new messages (default DefaultMessageInterval; negative: no
	// bound). An exec probe printing a timestamp changes its message every
	// period; each write also rewrites the pods' conditions in the cluster.
	MessageInterval time.Duration
}

// DefaultMessageInterval bounds message-only writes to one per 10 s per node.
const DefaultMessageInterval = 10 * time.Second

// Controller keeps the engine's probes equal to this node's NodePodProbe spec
// and writes the results to its status.
type Controller struct {
	cfg    Config
	synced atomic.Bool
	kick   chan struct{}

	mu         sync.Mutex
	book       *book
	seeded     bool
	generation int64
	exists     bool
	pods       map[string]podMeta    // pods of the spec, by UID
	probes     map[prober.Key]string // probes being run, with their handler kind
	dirty      bool
	lastWrite  time.Time // when the last write started
	// Message-only changes: the book holds them at once, but they make the
	// status dirty only MessageInterval after the last write that carried
	// such changes (messagesWritten); meanwhile any other write carries them,
	// and at messagesDue at the latest they are written.
	messagesPending bool
	messagesWritten time.Time
	messagesDue     time.Time

	stateLogs logBudget
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.WriteInterval <= 0 {
		cfg.WriteInterval = time.Second
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Minute
	}
	if cfg.MessageInterval == 0 {
		cfg.MessageInterval = DefaultMessageInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	cfg.Log = cfg.Log.WithField("node", cfg.Node)
	return &Controller{cfg: cfg, kick: make(chan struct{}, 1), book: newBook(), pods: map[string]podMeta{}, probes: map[prober.Key]string{},
		stateLogs: logBudget{clock: cfg.Clock, limit: stateLogsPerMinute}}
}

// Synced reports whether the first list of the NodePodProbe has been applied.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Run watches the node's NodePodProbe until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	lw := cache.NewListWatchFromClient(c.cfg.Client, "nodepodprobes", "",
		fields.OneTermEqualSelector("metadata.name", c.cfg.Node))
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &v1alpha1.NodePodProbe{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onObject(obj) },
			UpdateFunc: func(_, obj any) { c.onObject(obj) },
			DeleteFunc: func(any) { c.onDelete() },
		},
	})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); informer.RunWithContext(ctx) }()
	go func() { defer wg.Done(); c.consume(ctx) }()
	go func() { defer wg.Done(); c.write(ctx) }()
	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		c.synced.Store(true)
		c.cfg.Log.Info("NodePodProbe synced")
	}
	wg.Wait()
	return ctx.Err()
}

func (c *Controller) onObject(obj any) {
	npp, ok := obj.(*v1alpha1.NodePodProbe)
	if !ok || npp.Name != c.cfg.Node {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seeded {
		c.book.seed(&npp.Status)
		c.seeded = true
	}
	c.exists = true
	if npp.Generation == c.generation && npp.Generation != 0 {
		// Our own status write, or a relist after the API server was away:
		// the spec is unchanged, but a pending write may go now.
		if c.dirty {
			c.markDirtyLocked()
		}
		return
	}
	c.generation = npp.Generation
	run, refused := desiredFromSpec(&npp.Spec)
	c.pods, c.probes = map[string]podMeta{}, map[prober.Key]string{}
	for _, pp := range npp.Spec.PodProbes {
		c.pods[pp.UID] = podMeta{uid: pp.UID, namespace: pp.Namespace, name: pp.Name}
	}
	for _, d := range run {
		c.probes[d.Key] = handlerKind(&d.Spec.ProbeHandler)
	}
	for _, r := range refused {
		c.cfg.Log.WithFields(logrus.Fields{"namespace": r.pod.namespace, "pod": r.pod.name,
			"container": r.key.Container, "probe": r.key.Probe}).Warn(r.reason)
	}
	c.cfg.Engine.Sync(run)
	if c.book.retain(&npp.Spec, refused, c.cfg.Clock.Now()) {
		c.markDirtyLocked()
	}
	c.cfg.Log.WithFields(logrus.Fields{"generation": npp.Generation, "probes": len(run), "refused": len(refused)}).Info("NodePodProbe spec applied")
}

func (c *Controller) onDelete() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exists, c.generation = false, 0
	c.pods, c.probes = map[string]podMeta{}, map[prober.Key]string{}
	c.book = newBook()
	c.cfg.Engine.Sync(nil)
	c.cfg.Log.Info("NodePodProbe deleted: stopped all probes")
}

// consume moves engine results into the book.
func (c *Controller) consume(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-c.cfg.Engine.Updates():
			if !ok {
				return
			}
			c.apply(u)
		}
	}
}

func (c *Controller) apply(u prober.Update) {
	c.mu.Lock()
	pod, known := c.pods[u.Key.PodUID]
	if _, running := c.probes[u.Key]; !known || !running {
		c.mu.Unlock()
		return // a result that raced with the probe's removal
	}
	changed, messageOnly, t := c.book.apply(pod, u)
	switch {
	case changed && messageOnly:
		c.holdMessageLocked()
	case changed:
		c.markDirtyLocked()
	}
	c.mu.Unlock()
	if t != nil {
		c.event(t)
	}
}

// logMessageBytes bounds the probe message in a state change's log line, which the log budget
// allows 30 of a minute.
const logMessageBytes = 160

// EventReasonUnhealthy is the kubelet's reason for a failing probe, used for enhanced liveness.
const EventReasonUnhealthy = "Unhealthy"

// event logs a state change and tells it in an Event where a person acts on it. Enhanced liveness
// speaks the kubelet's language: Unhealthy "Liveness probe failed: ...", and nothing when it
// succeeds. A marker probe's change is told with OpenKruise's reasons, but not its first success
// (nor a success after Unknown): the status and the pod condition say it, and a node service
// starting with 100 pods would otherwise write hundreds of Events. A probe that became Unknown
// because it could not run is a ProbeError, worded as the kubelet's "Liveness probe errored: ...",
// with the reason the status gives.
func (c *Controller) event(t *transition) {
	container, liveness := v1alpha1.ParseLivenessProbeName(t.probe)
	msg := strings.TrimSpace(t.message)
	fields := logrus.Fields{"namespace": t.pod.namespace, "pod": t.pod.name, "probe": t.probe, "state": t.state}
	if t.reason != "" {
		fields["reason"] = t.reason
	}
	if msg != "" {
		// Why it failed (or what it printed), short: the status and the Event carry it whole.
		fields["message"] = validation.TruncateMessage(msg, logMessageBytes)
	}
	c.stateLogs.log(c.cfg.Log.WithFields(fields), c.cfg.Log, "probe state changed")
	if c.cfg.Events == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: t.pod.namespace,
		Name: t.pod.name, UID: types.UID(t.pod.uid)}
	var typ, reason, text string
	switch {
	case t.reason != "":
		name := t.probe
		if liveness {
			ref.FieldPath = "spec.containers{" + container + "}"
			name = "Liveness"
		}
		typ, reason, text = corev1.EventTypeWarning, v1alpha1.EventReasonProbeError, fmt.Sprintf("%s probe errored (%s)", name, t.reason)
	case liveness && t.state == v1alpha1.ProbeSucceeded:
		return
	case liveness:
		ref.FieldPath = "spec.containers{" + container + "}"
		typ, reason, text = corev1.EventTypeWarning, EventReasonUnhealthy, "Liveness probe failed: "+msg
	case t.state == v1alpha1.ProbeSucceeded && (t.prev == "" || t.prev == v1alpha1.ProbeUnknown):
		return
	case t.state == v1alpha1.ProbeSucceeded:
		typ, reason, text = corev1.EventTypeNormal, v1alpha1.EventReasonProbeSucceeded, fmt.Sprintf("probe %s: %s", t.probe, t.state)
	default:
		typ, reason, text = corev1.EventTypeWarning, v1alpha1.EventReasonProbeFailed, fmt.Sprintf("probe %s: %s", t.probe, t.state)
	}
	if msg != "" && (!liveness || t.reason != "") {
		text += ": " + msg
	}
	c.cfg.Events.Event(ref, typ, reason, validation.TruncateMessage(text, validation.MaxProbeMessageBytes))
}

// holdMessageLocked notes a message-only change: written at once when no such
// change was written within MessageInterval, else with the next write or at
// the end of the interval.
func (c *Controller) holdMessageLocked() {
	c.messagesPending = true
	if c.dirty {
		return // the pending write carries it
	}
	due := c.messagesWritten.Add(c.cfg.MessageInterval)
	if c.cfg.MessageInterval < 0 || !c.cfg.Clock.Now().Before(due) {
		c.markDirtyLocked()
		return
	}
	if c.messagesDue.IsZero() {
		c.messagesDue = due
		c.wakeLocked() // the writer sets its timer
	}
}

// releaseMessages makes held messages dirty once they are due.
func (c *Controller) releaseMessages() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.messagesDue.IsZero() || c.cfg.Clock.Now().Before(c.messagesDue) {
		return
	}
	c.messagesDue = time.Time{}
	if c.messagesPending {
		c.markDirtyLocked()
	}
}

func (c *Controller) lastWriteAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastWrite
}

// messagesDueAt is when held messages are due (zero: none are held).
func (c *Controller) messagesDueAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.messagesDue
}

func (c *Controller) wakeLocked() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Controller) markDirtyLocked() {
	c.dirty = true
	c.wakeLocked()
}

// write sends the status whenever it changed, at most once per
// WriteInterval, and refreshes lastProbeTime every RefreshInterval. A failed
// write is retried with backoff; nothing is dropped, since each write carries
// the whole current status.
func (c *Controller) write(ctx context.Context) {
	refresh := c.cfg.Clock.NewTicker(c.cfg.RefreshInterval)
	defer refresh.Stop()
	backoff := wait.Backoff{Duration: c.cfg.WriteInterval, Factor: 2, Steps: 1 << 30, Cap: 10 * time.Second, Jitter: 0.1}
	retry := backoff
	// The timer of held messages (holdMessageLocked), set while some are held.
	var messages clock.Timer
	defer func() {
		if messages != nil {
			messages.Stop()
		}
	}()
	for {
		var messagesC <-chan time.Time
		if due := c.messagesDueAt(); !due.IsZero() {
			if messages == nil {
				messages = c.cfg.Clock.NewTimer(due.Sub(c.cfg.Clock.Now()))
			}
			messagesC = messages.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-refresh.C():
			c.refreshProbeTimes()
		case <-messagesC:
			messages = nil
			c.releaseMessages()
		}
		if wait := c.cfg.WriteInterval - c.cfg.Clock.Since(c.lastWriteAt()); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(wait): // coalesce what arrives meanwhile
			}
		}
		for {
			_, err := c.flush(ctx)
			if err == nil {
				retry = backoff
				break
			}
			d := retry.Step()
			c.cfg.Log.WithError(err).WithField("retry", d.Round(time.Millisecond)).Warn("writing NodePodProbe status failed")
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(d):
			case <-c.kick: // the API server answered the watch again, or news arrived
			}
		}
	}
}

func (c *Controller) refreshProbeTimes() {
	running := map[prober.Key]bool{}
	for _, u := range c.cfg.Engine.Snapshot() {
		running[u.Key] = true
	}
	byName := map[[2]string]bool{}
	for k := range running {
		byName[[2]string{k.PodUID, k.Probe}] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.book.touch(c.cfg.Clock.Now(), func(uid, probe string) bool { return byName[[2]string{uid, probe}] }) {
		c.markDirtyLocked()
	}
}

// flush patches the status if it is dirty. The node service is the only
// writer of this status, so a merge patch without a resourceVersion is safe
// and never conflicts.
func (c *Controller) flush(ctx context.Context) (wrote bool, err error) {
	c.mu.Lock()
	if !c.dirty || !c.exists {
		c.mu.Unlock()
		return false, nil
	}
	c.dirty = false
	c.lastWrite = c.cfg.Clock.Now()
	if c.messagesPending { // this write carries them
		c.messagesPending, c.messagesWritten, c.messagesDue = false, c.cfg.Clock.Now(), time.Time{}
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"podProbeStatuses": c.book.status()}})
	c.mu.Unlock()
	if err != nil {
		return false, err
	}
	err = c.cfg.Client.Patch(types.MergePatchType).Resource("nodepodprobes").Name(c.cfg.Node).
		SubResource("status").Body(body).Do(ctx).Error()
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.StatusWrite(err)
	}
	if err != nil {
		c.mu.Lock()
		if apierrors.IsNotFound(err) {
			c.exists = false // written again when the object comes back
		} else {
			c.dirty = true
		}
		c.mu.Unlock()
		if apierrors.IsNotFound(err) {
			return true, nil
		}
	}
	return true, err
}

// ProbeState is one probe of the spec and its last state, for a person
// asking what the node is probing.
type ProbeState struct {
	Namespace, Pod, PodUID, Container, Probe string
	// Handler is exec, httpGet, tcpSocket or grpc; empty for a refused probe.
	Handler string
	v1alpha1.ContainerProbeState
}

// States lists every probe of the spec with its last state, including those
// without a result yet and those refused.
func (c *Controller) States() []ProbeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ProbeState
	listed := map[[2]string]bool{}
	for k, handler := range c.probes {
		pod := c.pods[k.PodUID]
		st := v1alpha1.ContainerProbeState{Name: k.Probe, State: v1alpha1.ProbeUnknown}
		if e, ok := c.book.pods[k.PodUID]; ok && e.probes[k.Probe] != nil {
			st = *e.probes[k.Probe]
		}
		listed[[2]string{k.PodUID, k.Probe}] = true
		out = append(out, ProbeState{Namespace: pod.namespace, Pod: pod.name, PodUID: k.PodUID, Container: k.Container,
			Probe: k.Probe, Handler: handler, ContainerProbeState: st})
	}
	for _, e := range c.book.pods {
		for name, st := range e.probes {
			if !listed[[2]string{e.meta.uid, name}] {
				out = append(out, ProbeState{Namespace: e.meta.namespace, Pod: e.meta.name, PodUID: e.meta.uid,
					Probe: name, ContainerProbeState: *st})
			}
		}
	}
	return out
}

func handlerKind(h *corev1.ProbeHandler) string {
	switch {
	case h.Exec != nil:
		return "exec"
	case h.HTTPGet != nil:
		return "httpGet"
	case h.TCPSocket != nil:
		return "tcpSocket"
	case h.GRPC != nil:
		return "grpc"
	}
	return ""
}
