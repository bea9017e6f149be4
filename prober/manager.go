// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Option configures a Manager.
type Option func(*Manager)

// WithExecer sets the runner for exec probes. Without one, exec probes fail
// with a message saying so.
func WithExecer(e Execer) Option { return func(m *Manager) { m.exec = e } }

// WithFileReader sets the reader of exec-free probes (Desired.ReadFile).
// Without one, those probes run their command.
func WithFileReader(r FileReader) Option { return func(m *Manager) { m.files = r } }

// WithNetwork sets where network probes dial from. The default is HostNetwork.
func WithNetwork(n Network) Option { return func(m *Manager) { m.network = n } }

// WithClock replaces the real clock, for tests.
func WithClock(c clock.Clock) Option { return func(m *Manager) { m.clock = c } }

// WithRegisterer registers the engine's own metrics on r: its pools and its probes' total by type
// and result (probeshim_probes_total), whose series do not grow with the pods. Without it they are
// kept but not exported.
func WithRegisterer(r prometheus.Registerer) Option { return func(m *Manager) { m.registerer = r } }

// WithProbeTypes names the probe types (Desired.ProbeType) the engine is to run, so that
// probeshim_probes_total has each one's series of every result, and probeshim_probe_errors_total
// of every reason, at zero from the start: a rate or an alert then sees the first run or error.
// Other types get a series at their first run or error.
func WithProbeTypes(types ...string) Option {
	return func(m *Manager) { m.probeTypes = append(m.probeTypes, types...) }
}

// WithPodRegisterer registers the per-container series on r, with the kubelet's names and labels
// (prober_probe_total, prober_probe_duration_seconds): one per container and probe type, for a
// registry of their own, as the kubelet serves them on /metrics/probes.
func WithPodRegisterer(r prometheus.Registerer) Option {
	return func(m *Manager) { m.podRegisterer = r }
}

// WithLogger sets the logger. The engine logs only at Debug level, with the
// fields namespace, pod, container and probe; without WithLogger it logs
// nothing. It takes a *slog.Logger so that the engine, a library, imposes no
// logging package on its users (the node service adapts it to logrus).
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// Default concurrency limits: how many exec probes, and how many network
// probes, run at once.
const (
	DefaultExecConcurrency    = 32
	DefaultNetworkConcurrency = 256
)

// DefaultNamespaceShare is the default per-namespace limit: a quarter of a
// pool (8 execs, 64 network probes), so that up to three namespaces whose
// probes all hang until their timeout still leave every other namespace a
// quarter of each pool.
func DefaultNamespaceShare(poolLimit int) int { return max(1, poolLimit/4) }

// WithConcurrency bounds how many exec and network (HTTP, TCP, gRPC) probes
// run at once; a value below 1 keeps the default. A due probe that finds its
// pool full waits its turn (the namespace running fewest goes first), and is
// counted late if it starts more than LateAfter after its time.
func WithConcurrency(exec, network int) Option {
	return func(m *Manager) {
		if exec > 0 {
			m.execPool.limit = exec
		}
		if network > 0 {
			m.netPool.limit = network
		}
	}
}

// WithMaxTimeout caps every probe's timeout at d (0: no cap), whatever its
// spec says: a running probe holds a runner of its pool until its timeout.
func WithMaxTimeout(d time.Duration) Option { return func(m *Manager) { m.maxTimeout = d } }

// WithNamespaceConcurrency bounds how many exec and network probes of one
// namespace run at once, so that one tenant's probes that hang until their
// timeout cannot hold every runner of the node; a namespace at its limit waits
// while others' probes run. A value below 1 keeps the default
// (DefaultNamespaceShare of the pool); one above the pool's limit is the pool's.
func WithNamespaceConcurrency(exec, network int) Option {
	return func(m *Manager) {
		if exec > 0 {
			m.execPool.nsLimit = exec
		}
		if network > 0 {
			m.netPool.nsLimit = network
		}
	}
}

// Manager owns one worker per desired probe and schedules them. Its methods
// are safe for concurrent use.
//
// Workers are plain state: one scheduler goroutine keeps them in a heap
// ordered by their next probe time and hands due ones to a pool of runner
// goroutines, so an idle worker costs no goroutine stack (about 1 KiB of heap
// in all). There are two pools, for execs and for network probes, each with
// a bounded number of runners, so that targets that hang until their timeout
// cannot make the node service run thousands of probes at once.
type Manager struct {
	clock                     clock.Clock
	containers                ContainerSource
	exec                      Execer
	files                     FileReader
	execGrace                 time.Duration // defaultExecGrace; shorter in tests
	maxTimeout                time.Duration // 0: none
	network                   Network
	registerer, podRegisterer prometheus.Registerer
	runs                      sync.Map // runKey -> *atomic.Uint64, probeshim_probes_total
	errs                      sync.Map // errKey -> *atomic.Uint64, probeshim_probe_errors_total
	probeTypes                []string
	log                       *slog.Logger
	results                   *resultStore
	jitter                    func() float64 // in [0,1); replaced in tests
	// errorLogs bounds the warnings of probe errors: with the runtime away every probe of
	// the node errs at once, and one line each would flood the journal.
	errorLogs *rate.Limiter

	// onStart, if set, sees how late each probe started and whether the
	// previous run of its worker overran the slot; for the benchmark.
	onStart func(late time.Duration, overran bool)

	baseCtx    context.Context
	baseCancel context.CancelFunc
	epoch      time.Time // workers' heap keys are offsets from it
	inflight   sync.WaitGroup
	wake       chan struct{}
	execPool   pool
	netPool    pool

	mu          sync.Mutex
	workers     map[Key]*worker
	byContainer map[containerRef][]*worker
	queue       workerHeap
	synced      bool // a Sync happened; later workers get no jitter
	started     bool
	stopped     bool
}

type containerRef struct{ podUID, container string }

// The warnings of probe errors: up to errorLogBurst at once, then one per errorLogEvery; the
// rest at debug level.
const (
	errorLogBurst = 20
	errorLogEvery = 3 * time.Second
)

// NewManager returns a manager that reads container state from containers.
// Call Run to start probing.
func NewManager(containers ContainerSource, opts ...Option) (*Manager, error) {
	if containers == nil {
		return nil, errors.New("prober: a ContainerSource is required")
	}
	m := &Manager{
		clock:       clock.RealClock{},
		containers:  containers,
		network:     HostNetwork,
		log:         slog.New(slog.DiscardHandler),
		jitter:      rand.Float64,
		execGrace:   defaultExecGrace,
		errorLogs:   rate.NewLimiter(rate.Every(errorLogEvery), errorLogBurst),
		wake:        make(chan struct{}, 1),
		execPool:    pool{name: "exec", limit: DefaultExecConcurrency},
		netPool:     pool{name: "network", limit: DefaultNetworkConcurrency},
		workers:     map[Key]*worker{},
		byContainer: map[containerRef][]*worker{},
	}
	for _, o := range opts {
		o(m)
	}
	for _, t := range m.probeTypes {
		for _, r := range errorReasons {
			m.errs.LoadOrStore(errKey{t, r}, new(atomic.Uint64))
		}
		for _, r := range []Result{Success, Failure, Unknown} {
			m.runs.LoadOrStore(runKey{t, r}, new(atomic.Uint64))
		}
	}
	for _, p := range []*pool{&m.execPool, &m.netPool} {
		p.jobs = make(chan job, p.limit)
		p.queue.byNS = map[string][]job{}
		p.running = map[string]int{}
		if p.nsLimit < 1 {
			p.nsLimit = DefaultNamespaceShare(p.limit)
		}
		p.nsLimit = min(p.nsLimit, p.limit)
	}
	if m.registerer != nil {
		if err := m.registerer.Register(collector{m}); err != nil {
			return nil, err
		}
	}
	if m.podRegisterer != nil {
		if err := m.podRegisterer.Register(podCollector{m}); err != nil {
			return nil, err
		}
	}
	m.results = newResultStore()
	m.baseCtx, m.baseCancel = context.WithCancel(context.Background())
	m.epoch = m.clock.Now()
	return m, nil
}

// Updates delivers published results when their Result, Message or Reason changes.
// It never blocks the workers: if the reader falls behind, it receives the
// latest result of each changed key rather than every intermediate one. A
// probe removed by Sync sends nothing more and leaves Snapshot. The channel is
// closed when Run returns.
func (m *Manager) Updates() <-chan Update { return m.results.out }

// Snapshot returns the latest published result of every probe, sorted by key.
func (m *Manager) Snapshot() []Update { return m.results.snapshot() }

// Sync makes the set of workers equal to desired: it starts new probes,
// applies spec changes to running ones in place and stops the rest. The first
// Sync spreads its probes randomly over one period, so a service restart does
// not probe everything at once; probes added later run at once.
func (m *Manager) Sync(desired []Desired) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()

	first := !m.synced
	m.synced = true
	seen := make(map[Key]struct{}, len(desired))
	for i := range desired {
		d := &desired[i]
		if _, dup := seen[d.Key]; dup {
			m.log.Debug("duplicate probe key in desired set, ignoring the later one",
				"namespace", d.Pod.Namespace, "pod", d.Pod.Name, "container", d.Key.Container, "probe", d.Key.Probe)
			continue
		}
		seen[d.Key] = struct{}{}
		w, ok := m.workers[d.Key]
		if ok && (w.pod != podIdentity(d.Pod) || w.probeType != d.ProbeType) {
			// Metric labels are fixed per worker; a new identity is a new worker.
			m.removeLocked(w)
			ok = false
		}
		if ok {
			m.updateLocked(w, d, now)
			continue
		}
		w = newWorker(m, d)
		w.setNext(now)
		if first {
			w.setNext(now.Add(time.Duration(m.jitter() * float64(w.period()))))
		}
		m.workers[d.Key] = w
		ref := containerRef{d.Key.PodUID, d.Key.Container}
		m.byContainer[ref] = append(m.byContainer[ref], w)
		m.pushLocked(w)
	}
	for k, w := range m.workers {
		if _, ok := seen[k]; !ok {
			m.removeLocked(w)
		}
	}
}

// ContainerChanged probes the container's workers at once, e.g. after the
// runtime reported that it restarted.
func (m *Manager) ContainerChanged(podUID, container string) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.byContainer[containerRef{podUID, container}] {
		switch {
		case w.running:
			w.wake = true
		case w.index >= 0:
			w.setNext(now)
			heap.Fix(&m.queue, w.index)
			m.signalLocked(w)
		}
	}
}

// Run probes until ctx is done, then cancels probes in flight, waits for
// them and closes Updates. It may be called once.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("prober: Run called twice")
	}
	m.started = true
	m.mu.Unlock()

	var dispatch sync.WaitGroup
	dispatch.Add(1)
	go func() {
		defer dispatch.Done()
		m.results.run(ctx)
	}()

	timer := m.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := m.dispatchDue()
		timer.Stop()
		select {
		case <-timer.C():
		default:
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		var fired <-chan time.Time
		if wait >= 0 {
			fired = timer.C()
		}
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.stopped = true
			m.mu.Unlock()
			m.baseCancel()
			m.inflight.Wait()
			dispatch.Wait()
			close(m.results.out)
			return nil
		case <-fired:
		case <-m.wake:
		}
	}
}

// dispatchDue starts every worker that is due and returns how long until the
// next one is, or -1 when none is queued.
func (m *Manager) dispatchDue() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for len(m.queue) > 0 {
		w := m.queue[0]
		if w.next.After(now) {
			return w.next.Sub(now)
		}
		heap.Pop(&m.queue)
		w.running = true
		w.wake = false
		w.lastSched = w.next
		m.inflight.Add(1)
		j := job{ctx: w.ctx, w: w, sched: w.next, overran: w.overran}
		m.poolFor(w).dispatchLocked(m, j)
	}
	return -1
}

// job is one probe run of a worker scheduled for sched.
type job struct {
	ctx     context.Context
	w       *worker
	sched   time.Time
	overran bool      // the previous run outlasted its period
	waited  waitCause // why it was queued, if it was
}

// waitCause is why a due job waited for a runner.
type waitCause uint8

const (
	notQueued     waitCause = iota
	poolFull                // every runner of its pool was busy
	namespaceFull           // its namespace ran its share of the pool
)

// runnerIdle is how long a runner waits for another probe before it exits.
const runnerIdle = 200 * time.Millisecond

// LateAfter is how far behind its time a probe may start before it counts
// as late (probeshim_probes_started_late_total and a Debug log); the message
// of a late run that errs or times out says so.
const LateAfter = time.Second

// pool is a bounded set of runner goroutines for one kind of probe. Its
// fields are guarded by Manager.mu, except jobs.
type pool struct {
	name    string
	limit   int
	nsLimit int            // jobs of one namespace running at once
	running map[string]int // jobs running (or handed to a runner) by namespace
	alive   int            // runners, busy or idle
	idle    int            // idle runners not yet promised a job through jobs
	jobs    chan job       // to idle runners; capacity limit, so a send never blocks
	queue   fairQueue
	late    atomic.Uint64
	delay   startDelay
	// lastLate is when a probe last started late (Unix nanoseconds; 0: never), lastLateBy how late.
	lastLate, lastLateBy atomic.Int64
}

// PoolStatus is the state of one pool of runners, for the node's status.
type PoolStatus struct {
	Name                string // "exec" or "network"
	Limit, PerNamespace int
	// Running is the probes running now, Queued the due ones waiting for a runner (their pool
	// or their namespace's share busy).
	Running, Queued int
	// StartedLate counts the probes that started more than LateAfter after their time;
	// LastLate is when the latest of them started (zero: never) and LastLateBy how late.
	StartedLate uint64
	LastLate    time.Time
	LastLateBy  time.Duration
}

// Pools returns the state of the exec and the network pool.
func (m *Manager) Pools() []PoolStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PoolStatus
	for _, p := range []*pool{&m.execPool, &m.netPool} {
		st := PoolStatus{Name: p.name, Limit: p.limit, PerNamespace: p.nsLimit, Queued: p.queue.n,
			StartedLate: p.late.Load(), LastLateBy: time.Duration(p.lastLateBy.Load())}
		for _, n := range p.running {
			st.Running += n
		}
		if t := p.lastLate.Load(); t != 0 {
			st.LastLate = time.Unix(0, t)
		}
		out = append(out, st)
	}
	return out
}

func (m *Manager) poolFor(w *worker) *pool {
	if w.cfg.Load().spec.Exec != nil {
		return &m.execPool
	}
	return &m.netPool
}

// dispatchLocked hands j to an idle runner, starts a runner if the pool has
// room, or else queues j until a runner is free; a job whose namespace runs
// its limit already is queued whatever the room.
//
// So a queued job that may run finds no room: a runner that ends a job takes
// the next one that may (which the end of its own may just have allowed).
func (p *pool) dispatchLocked(m *Manager, j job) {
	switch {
	case !p.mayRun(j.w.pod.namespace):
		j.waited = namespaceFull
		if p.idle == 0 && p.alive >= p.limit {
			j.waited = poolFull // the larger cause: no other namespace would have run either
		}
		p.queue.push(j)
	case p.idle > 0:
		p.idle--
		p.take(j)
		p.jobs <- j
	case p.alive < p.limit:
		p.alive++
		p.take(j)
		go m.runner(p, j)
	default:
		j.waited = poolFull
		p.queue.push(j)
	}
}

func (p *pool) mayRun(namespace string) bool { return p.running[namespace] < p.nsLimit }

// waitReason says why a job that started late waited, for its message.
func (p *pool) waitReason(c waitCause) string {
	switch c {
	case poolFull:
		return "the node's " + p.name + " pool was full"
	case namespaceFull:
		return "its namespace used its share of the node's " + p.name + " pool"
	}
	return "the node was overloaded" // due, but the scheduler itself ran late
}

func (p *pool) runningIn(namespace string) int { return p.running[namespace] }

// take and done count a job of the pool's namespaces from its hand-over to a
// runner to its end.
func (p *pool) take(j job) { p.running[j.w.pod.namespace]++ }

func (p *pool) done(j job) {
	ns := j.w.pod.namespace
	if p.running[ns]--; p.running[ns] <= 0 {
		delete(p.running, ns)
	}
}

// runner runs probes of its pool: queued ones first, then whatever the
// scheduler hands it, and stays while they keep coming, so that a probe
// seldom starts on a fresh goroutine whose small stack must grow.
func (m *Manager) runner(p *pool, j job) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		m.runWorker(p, j)
		m.mu.Lock()
		p.done(j)
		// Done only now: whoever waits on inflight then reads a pool
		// that counts this job no more.
		m.inflight.Done()
		if next, ok := p.queue.pop(p.mayRun, p.runningIn); ok {
			p.take(next)
			m.mu.Unlock()
			j = next
			continue
		}
		p.idle++
		m.mu.Unlock()
		idle.Reset(runnerIdle)
		select {
		case j = <-p.jobs:
			continue
		case <-idle.C:
		case <-m.baseCtx.Done():
		}
		// The scheduler may have promised this runner a job just now.
		m.mu.Lock()
		select {
		case j = <-p.jobs:
			m.mu.Unlock()
			continue
		default:
		}
		p.idle--
		p.alive--
		m.mu.Unlock()
		return
	}
}

// fairQueue holds due probes that wait for a runner: first in, first out
// within a namespace; between namespaces the one running fewest goes first,
// round-robin among equals (see pop), so that one tenant's thousands of slow
// probes delay another's by one turn, not by all of them (and, with the pool's
// per-namespace limit, never wait for all its runners).
type fairQueue struct {
	byNS  map[string][]job
	order []string // namespaces with queued jobs, the next to run first
	n     int
}

func (q *fairQueue) push(j job) {
	ns := j.w.pod.namespace
	if len(q.byNS[ns]) == 0 {
		q.order = append(q.order, ns)
	}
	q.byNS[ns] = append(q.byNS[ns], j)
	q.n++
}

// pop takes the first job of the namespace to run next: of those that may
// run, the one with the fewest probes running, the earliest in turn among
// equals. So a namespace that runs nothing gets the next free runner, however
// many namespaces one tenant floods the pool from; a namespace that may not
// run keeps its turn for when it may.
func (q *fairQueue) pop(mayRun func(namespace string) bool, running func(namespace string) int) (job, bool) {
	i := -1
	for k, ns := range q.order {
		if mayRun(ns) && (i < 0 || running(ns) < running(q.order[i])) {
			i = k
		}
	}
	if i < 0 {
		return job{}, false
	}
	ns := q.order[i]
	q.order = slices.Delete(q.order, i, i+1)
	jobs := q.byNS[ns]
	j := jobs[0]
	jobs[0] = job{}
	if jobs = jobs[1:]; len(jobs) > 0 {
		q.byNS[ns] = jobs
		q.order = append(q.order, ns)
	} else {
		delete(q.byNS, ns)
	}
	q.n--
	return j, true
}

func (m *Manager) runWorker(p *pool, j job) {
	w := j.w
	s := runStart{late: m.clock.Since(j.sched)}
	p.delay.observe(s.late)
	if s.late > LateAfter {
		p.late.Add(1)
		p.lastLateBy.Store(int64(s.late))
		p.lastLate.Store(m.clock.Now().UnixNano())
		s.why = p.waitReason(j.waited)
		if m.debug() {
			w.logger().Debug("probe started late", "pool", p.name, "late", s.late.Round(time.Millisecond), "why", s.why)
		}
	}
	if m.onStart != nil {
		m.onStart(s.late, j.overran)
	}
	w.doProbe(j.ctx, s)

	m.mu.Lock()
	defer m.mu.Unlock()
	w.running = false
	if w.gone.Load() || m.stopped {
		return
	}
	now := m.clock.Now()
	// Fixed rate from the scheduled start, like a ticker. A probe that overran
	// its period resumes at the next slot rather than at once: when the
	// machine is overloaded, that sheds load instead of piling probes up until
	// they time out and report false failures.
	period := w.period()
	next := j.sched.Add(period)
	w.overran = next.Before(now)
	if w.overran {
		next = next.Add((now.Sub(next)/period + 1) * period)
	}
	if w.wake {
		next = now
	}
	w.wake = false
	w.setNext(next)
	m.pushLocked(w)
}

func (m *Manager) pushLocked(w *worker) {
	heap.Push(&m.queue, w)
	m.signalLocked(w)
}

// signalLocked wakes the scheduler when w became the earliest worker.
func (m *Manager) signalLocked(w *worker) {
	if w.index == 0 {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

func (m *Manager) updateLocked(w *worker, d *Desired, now time.Time) {
	old := w.cfg.Load()
	if old.pod == d.Pod && maps.Equal(old.ports, d.Ports) && old.readFile == d.ReadFile && reflect.DeepEqual(old.spec, d.Spec) {
		return
	}
	cfg := newProbeConfig(d)
	cfg.gen = old.gen
	if old.readFile != cfg.readFile || !reflect.DeepEqual(old.spec.ProbeHandler, cfg.spec.ProbeHandler) {
		cfg.gen++ // a different check: its run of results starts afresh
	}
	w.cfg.Store(cfg)
	if cfg.period() != old.period() && w.index >= 0 && !w.lastSched.IsZero() {
		next := w.lastSched.Add(w.period())
		if next.Before(now) {
			next = now
		}
		w.setNext(next)
		heap.Fix(&m.queue, w.index)
		m.signalLocked(w)
	}
}

func (m *Manager) removeLocked(w *worker) {
	w.gone.Store(true)
	delete(m.workers, w.key)
	ref := containerRef{w.key.PodUID, w.key.Container}
	list := m.byContainer[ref]
	for i, o := range list {
		if o == w {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(m.byContainer, ref)
	} else {
		m.byContainer[ref] = list
	}
	if w.index >= 0 {
		heap.Remove(&m.queue, w.index)
	}
	w.cancel() // a probe in flight stops; the context leaves the base's children
	m.results.remove(w.key)
}

// workerHeap orders workers by their next probe time.
type workerHeap []*worker

func (h workerHeap) Len() int           { return len(h) }
func (h workerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h workerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *workerHeap) Push(x any) {
	w := x.(*worker)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *workerHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.index = -1
	*h = old[:n-1]
	return w
}

// debug reports whether Debug logs are wanted, so that per-probe log fields
// are built only then.
func (m *Manager) debug() bool {
	return m.log.Enabled(context.Background(), slog.LevelDebug)
}
