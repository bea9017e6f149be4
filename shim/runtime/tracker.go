// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/prober"
)

// Change tells that what Tracker.Container(PodUID, Container) returns may
// have changed. Container is "" when the pod's sandbox changed (started,
// stopped, removed), e.g. so that its network namespace is looked up again.
type Change struct {
	PodUID    string
	Container string
}

// Tracker keeps the state of every CRI container on the node in memory,
// current within moments from containerd's task and container events: a
// probe asks it instead of the runtime. It lists everything through CRI
// once at start and again after each reconnect, when events may have been
// missed. It is a prober.ContainerSource.
//
// Created, Started, Stopped and Removed let a caller that saw the runtime
// do something (the CRI proxy, when the kubelet talks through it) tell the
// Tracker at once rather than when containerd's event arrives; the events
// stay the Tracker's source of truth and it works the same without them.
type Tracker struct {
	c        *Client
	onChange func(Change)
	log      *logrus.Entry

	mu      sync.RWMutex
	byID    map[string]*tracked
	current map[podContainer]string // newest container of each (pod, name)

	syncOnce sync.Once
	synced   chan struct{}
	healthMu sync.Mutex
	health   error
}

type podContainer struct{ podUID, name string }

type tracked struct {
	sandbox   bool
	podUID    string
	name      string // container name; "" for a sandbox
	namespace string
	podName   string
	running   bool
	startedAt time.Time
	// exited: the container (or sandbox) ran and stopped. CRI never starts
	// one again, so a start reported late (a queued event, the proxy) must
	// not make it running.
	exited bool
}

var _ prober.ContainerSource = (*Tracker)(nil)

// NewTracker makes a Tracker on c. onChange, if not nil, is called after
// each change, from the Tracker's goroutine or that of a caller of Created,
// Started, Stopped or Removed: it must not block.
func NewTracker(c *Client, onChange func(Change)) *Tracker {
	if onChange == nil {
		onChange = func(Change) {}
	}
	return &Tracker{
		c:        c,
		onChange: onChange,
		log:      c.log,
		byID:     map[string]*tracked{},
		current:  map[podContainer]string{},
		synced:   make(chan struct{}),
		health:   errors.New("container tracker not started"),
	}
}

// Container returns the newest container of that name in the pod. It never
// calls the runtime.
func (t *Tracker) Container(podUID, containerName string) (prober.ContainerStatus, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	id, ok := t.current[podContainer{podUID, containerName}]
	if !ok {
		return prober.ContainerStatus{}, false
	}
	e := t.byID[id]
	if e == nil {
		return prober.ContainerStatus{}, false
	}
	return prober.ContainerStatus{ID: id, Running: e.running, StartedAt: e.startedAt}, true
}

// Synced is closed once the first full listing is in.
func (t *Tracker) Synced() <-chan struct{} { return t.synced }

// Healthy returns nil while the event stream is up and the state in sync,
// else why not.
func (t *Tracker) Healthy() error {
	t.healthMu.Lock()
	defer t.healthMu.Unlock()
	return t.health
}

func (t *Tracker) setHealth(err error) {
	t.healthMu.Lock()
	defer t.healthMu.Unlock()
	t.health = err
}

// Run follows the runtime until ctx is done, reconnecting with backoff
// whenever the event stream breaks (containerd restarted).
func (t *Tracker) Run(ctx context.Context) {
	bo := t.newBackoff()
	warned := false // once per outage, not per retry
	for ctx.Err() == nil {
		synced, err := t.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("event stream closed")
		}
		t.setHealth(err)
		if synced {
			warned = false
			bo = t.newBackoff()
		}
		if !warned {
			t.log.WithError(err).Warn("no containerd events; retrying until containerd answers")
			warned = true
		} else {
			t.log.WithError(err).Debug("containerd still unavailable")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(bo.Step()):
		}
	}
}

func (t *Tracker) newBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 10 * time.Second}
}

// eventFilters are the containerd events the Tracker follows, in namespace ns. Every /tasks/exit,
// although most are other clients' execs (each exec probe the kubelet runs, ~0.2 ms here each):
// the service's own execs learn their exits from it, and a container's exit, which containerd's
// shim publishes just after the exits of the execs its death killed, tells such an exec that it
// died with its container (Client.exec), never as a failed probe. containerd's filters cannot
// tell a container's exit from an exec's (both IDs are random), and the task's delete comes too
// late for that.
func eventFilters(ns string) []string {
	var filters []string
	for _, topic := range []string{"/tasks/start", "/tasks/exit", "/tasks/delete", "/containers/create", "/containers/delete"} {
		filters = append(filters, fmt.Sprintf("namespace==%s,topic==%q", ns, topic))
	}
	return filters
}

// session subscribes, resyncs and applies events until the stream breaks.
// synced tells whether it got as far as a full listing.
func (t *Tracker) session(ctx context.Context) (synced bool, _ error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	filters := eventFilters(t.c.opts.namespace)
	// Our backoff paces the retries: let gRPC dial again now rather than
	// after its own backoff.
	for _, conn := range t.c.conns {
		conn.ResetConnectBackoff()
	}
	// Subscribe first and list after: an event that races with the listing
	// is queued in the stream and applied after it, never lost.
	envc, errc := t.c.ctd.Subscribe(sctx, filters...)

	lctx, lcancel := context.WithTimeout(sctx, time.Minute)
	err := t.c.Ping(lctx)
	if err == nil {
		err = t.resync(lctx)
	}
	lcancel()
	if err != nil {
		return false, err
	}
	t.setHealth(nil)
	t.log.Info("following containerd events")
	t.c.exits.streamUp()
	defer t.c.exits.streamDown()
	t.syncOnce.Do(func() { close(t.synced) })

	for {
		select {
		case <-ctx.Done():
			return true, nil
		case err := <-errc:
			return true, wrapErr(err, "containerd event stream")
		case env, ok := <-envc:
			if !ok {
				return true, errors.New("containerd event stream closed")
			}
			t.handle(sctx, env)
		}
	}
}

// resync replaces the state with a full CRI listing and reports what changed.
func (t *Tracker) resync(ctx context.Context) error {
	sbs, err := t.c.cri.ListPodSandbox(ctx, &criapi.ListPodSandboxRequest{})
	if err != nil {
		return wrapErr(err, "list sandboxes")
	}
	cs, err := t.c.listContainers(ctx, nil) // newest first
	if err != nil {
		return err
	}
	byID := make(map[string]*tracked, len(sbs.GetItems())+len(cs))
	current := make(map[podContainer]string, len(cs))
	for _, sb := range sbs.GetItems() {
		uid := sb.GetLabels()[LabelPodUID]
		if sb.GetId() == "" || uid == "" {
			continue
		}
		byID[sb.GetId()] = &tracked{
			sandbox: true, podUID: uid,
			namespace: sb.GetMetadata().GetNamespace(), podName: sb.GetMetadata().GetName(),
			running: sb.GetState() == criapi.PodSandboxState_SANDBOX_READY,
		}
	}
	for i := range cs {
		ct := &cs[i]
		key := podContainer{ct.PodUID, ct.Name}
		if _, ok := current[key]; !ok {
			current[key] = ct.ID
			// Only the newest container of a name is ever asked about.
			if ct.Running() {
				if err := t.c.fillStatus(ctx, ct); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
			}
		}
		byID[ct.ID] = &tracked{
			podUID: ct.PodUID, name: ct.Name, namespace: ct.Namespace, podName: ct.PodName,
			running: ct.Running(), startedAt: ct.StartedAt, exited: ct.State == criapi.ContainerState_CONTAINER_EXITED,
		}
	}

	t.mu.Lock()
	changes := diff(t.byID, t.current, byID, current)
	t.byID, t.current = byID, current
	t.mu.Unlock()
	t.log.WithField("containers", len(current)).Debug("container state resynced from CRI")
	t.notify(changes)
	return nil
}

// diff lists the (pod, container) pairs and pods whose state differs.
func diff(oldByID map[string]*tracked, oldCur map[podContainer]string, newByID map[string]*tracked, newCur map[podContainer]string) []Change {
	var out []Change
	seen := map[podContainer]bool{}
	status := func(byID map[string]*tracked, cur map[podContainer]string, k podContainer) (string, bool, time.Time) {
		id, ok := cur[k]
		if e := byID[id]; ok && e != nil {
			return id, e.running, e.startedAt
		}
		return "", false, time.Time{}
	}
	for _, cur := range []map[podContainer]string{oldCur, newCur} {
		for k := range cur {
			if seen[k] {
				continue
			}
			seen[k] = true
			i1, r1, s1 := status(oldByID, oldCur, k)
			i2, r2, s2 := status(newByID, newCur, k)
			if i1 != i2 || r1 != r2 || !s1.Equal(s2) {
				out = append(out, Change{PodUID: k.podUID, Container: k.name})
			}
		}
	}
	// Per pod, its sandboxes and whether each is ready.
	sandboxes := func(byID map[string]*tracked) map[string]map[string]bool {
		m := map[string]map[string]bool{}
		for id, e := range byID {
			if e.sandbox {
				if m[e.podUID] == nil {
					m[e.podUID] = map[string]bool{}
				}
				m[e.podUID][id] = e.running
			}
		}
		return m
	}
	o, n := sandboxes(oldByID), sandboxes(newByID)
	pods := map[string]bool{}
	for uid := range o {
		pods[uid] = !maps.Equal(o[uid], n[uid])
	}
	for uid := range n {
		pods[uid] = !maps.Equal(o[uid], n[uid])
	}
	for uid, changed := range pods {
		if changed {
			out = append(out, Change{PodUID: uid})
		}
	}
	return out
}

func (t *Tracker) notify(changes []Change) {
	for _, ch := range changes {
		t.onChange(ch)
	}
}

// handle applies one event. Unknown or malformed events are ignored.
func (t *Tracker) handle(ctx context.Context, env *events.Envelope) {
	if env == nil || env.Event == nil {
		return
	}
	ev, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		t.log.WithError(err).WithField("topic", env.Topic).Debug("undecodable containerd event")
		return
	}
	var changes []Change
	switch e := ev.(type) {
	case *eventtypes.ContainerCreate:
		changes = t.learn(ctx, e.GetID(), nil)
	case *eventtypes.TaskStart:
		ts := env.Timestamp
		changes = t.learn(ctx, e.GetContainerID(), func(tr *tracked) bool {
			// No change if already running (seen in the listing, with
			// CRI's own start time, or through the proxy) or exited.
			return tr.start(ts)
		})
	case *eventtypes.TaskExit:
		if e.GetID() != "" && e.GetID() != e.GetContainerID() {
			// An exec process, not the container: maybe a probe's.
			t.c.exits.exited(e.GetID(), e.GetExitStatus())
			return
		}
		changes = t.stopped(e.GetContainerID())
		t.c.exits.containerExited(e.GetContainerID())
	case *eventtypes.TaskDelete:
		if e.GetID() != "" && e.GetID() != e.GetContainerID() {
			return
		}
		changes = t.stopped(e.GetContainerID())
	case *eventtypes.ContainerDelete:
		changes = t.remove(e.GetID())
	}
	t.notify(changes)
}

// learn makes sure id is tracked (reading its labels from containerd when
// it is new) and applies update to it.
func (t *Tracker) learn(ctx context.Context, id string, update func(*tracked) bool) []Change {
	if id == "" {
		return nil
	}
	t.mu.Lock()
	e, known := t.byID[id]
	t.mu.Unlock()
	if !known {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		info, err := t.c.ctd.ContainerService().Get(t.c.nsCtx(gctx), id)
		cancel()
		if err != nil {
			t.log.WithError(err).WithField("container_id", id).Debug("new container not readable")
			return nil
		}
		l := info.Labels
		e = &tracked{podUID: l[LabelPodUID], name: l[LabelContainerName], namespace: l[LabelPodNamespace], podName: l[LabelPodName]}
		switch {
		case e.podUID == "":
			return nil // not a Kubernetes container
		case l[labelKind] == "sandbox":
			e.sandbox, e.name = true, ""
		case e.name == "":
			return nil
		}
	}

	t.mu.Lock()
	if cur, ok := t.byID[id]; ok {
		e = cur // added by a resync meanwhile
	} else {
		t.byID[id] = e
		if !e.sandbox {
			// A new container of a name replaces the previous one: the
			// kubelet creates it only after the old one exited.
			t.current[podContainer{e.podUID, e.name}] = id
		}
	}
	changed := !known
	if update != nil && update(e) {
		changed = true
	}
	t.mu.Unlock()
	if !changed {
		return nil
	}
	t.logEntry(e).WithFields(logrus.Fields{"container_id": id, "running": e.running}).Debug("container changed")
	return []Change{{PodUID: e.podUID, Container: e.name}}
}

// start marks a container running from at, unless it already is or has
// already exited, and reports whether it changed.
func (tr *tracked) start(at time.Time) bool {
	if tr.running || tr.exited {
		return false
	}
	tr.running, tr.startedAt = true, at
	return true
}

func (t *Tracker) stopped(id string) []Change {
	t.c.forgetTarget(id)
	t.mu.Lock()
	e, ok := t.byID[id]
	if ok {
		e.exited = true
	}
	if !ok || !e.running {
		t.mu.Unlock()
		return nil
	}
	e.running = false
	t.mu.Unlock()
	t.logEntry(e).WithField("container_id", id).Debug("container stopped")
	return []Change{{PodUID: e.podUID, Container: e.name}}
}

func (t *Tracker) remove(id string) []Change {
	t.c.forgetTarget(id)
	t.mu.Lock()
	e, ok := t.byID[id]
	if !ok {
		t.mu.Unlock()
		return nil
	}
	delete(t.byID, id)
	key := podContainer{e.podUID, e.name}
	wasCurrent := !e.sandbox && t.current[key] == id
	if wasCurrent {
		delete(t.current, key)
	}
	t.mu.Unlock()
	if !wasCurrent && !e.sandbox {
		return nil
	}
	return []Change{{PodUID: e.podUID, Container: e.name}}
}

func (t *Tracker) logEntry(e *tracked) *logrus.Entry {
	f := logrus.Fields{"namespace": e.namespace, "pod": e.podName}
	if !e.sandbox {
		f["container"] = e.name
	}
	return t.log.WithFields(f)
}

// Created tells the Tracker that the runtime created the container or pod
// sandbox id; it reads its labels from containerd.
func (t *Tracker) Created(ctx context.Context, id string) { t.notify(t.learn(ctx, id, nil)) }

// Started tells the Tracker that the runtime started the container or pod
// sandbox id just now, so that its probes begin without waiting for the
// event.
func (t *Tracker) Started(ctx context.Context, id string) {
	now := time.Now()
	t.notify(t.learn(ctx, id, func(tr *tracked) bool { return tr.start(now) }))
}

// Stopped tells the Tracker that the container or pod sandbox id stopped.
func (t *Tracker) Stopped(_ context.Context, id string) { t.notify(t.stopped(id)) }

// Removed tells the Tracker that the container or pod sandbox id is gone.
func (t *Tracker) Removed(_ context.Context, id string) { t.notify(t.remove(id)) }

// Owner is the pod a container or sandbox ID belongs to.
type Owner struct {
	PodUID, Namespace, PodName string
	// Container is the container's name; "" for a sandbox.
	Container string
}

// Owner returns the pod of a tracked container or sandbox ID. It never
// calls the runtime.
func (t *Tracker) Owner(id string) (Owner, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.byID[id]
	if !ok {
		return Owner{}, false
	}
	return Owner{PodUID: e.podUID, Namespace: e.namespace, PodName: e.podName, Container: e.name}, true
}
