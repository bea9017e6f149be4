// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/rest"

	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/kube"
	"github.com/probeshim/probeshim/shim/server"
)

// The service's wiring with fakes outside: a runtime and tracker without
// containerd, an API server that answers lists, watches and lease writes
// from memory, and a notifier that records what systemd would be told.

type fakeRuntime struct {
	j *journal
}

func (fakeRuntime) Exec(context.Context, string, []string, time.Duration) (prober.ExecResult, error) {
	return prober.ExecResult{}, errors.New("no containers here")
}
func (fakeRuntime) ReadFile(context.Context, string, string, int, time.Duration) ([]byte, error) {
	return nil, errors.New("no containers here")
}
func (fakeRuntime) StopContainer(context.Context, string, time.Duration) error { return nil }
func (fakeRuntime) PodNetwork(context.Context, string) (string, bool, []string, error) {
	return "", false, nil, errors.New("no pods here")
}
func (fakeRuntime) ContainerdSocket() string { return "/run/example/containerd.sock" }
func (r fakeRuntime) Close() error           { r.j.add("runtime closed"); return nil }

type fakeTracker struct {
	mu       sync.Mutex
	health   error
	synced   chan struct{}
	syncOnce sync.Once
}

func newFakeTracker() *fakeTracker {
	return &fakeTracker{synced: make(chan struct{}), health: errors.New("container tracker not started")}
}

func (*fakeTracker) Container(string, string) (prober.ContainerStatus, bool) {
	return prober.ContainerStatus{}, false
}
func (t *fakeTracker) Run(ctx context.Context) { <-ctx.Done() }
func (t *fakeTracker) Synced() <-chan struct{} { return t.synced }
func (t *fakeTracker) Healthy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.health
}

// set is what the real tracker does as containerd comes and goes: healthy
// after each full listing, the reason otherwise.
func (t *fakeTracker) set(err error) {
	t.mu.Lock()
	t.health = err
	t.mu.Unlock()
	if err == nil {
		t.syncOnce.Do(func() { close(t.synced) })
	}
}

type recordingNotifier struct{ j *journal }

func (n recordingNotifier) Ready(s string)  { n.j.add("READY " + s) }
func (n recordingNotifier) Status(s string) { n.j.add("STATUS " + s) }
func (n recordingNotifier) Stopping()       { n.j.add("STOPPING") }
func (n recordingNotifier) Reloading()      { n.j.add("RELOADING") }
func (n recordingNotifier) Reloaded()       { n.j.add("RELOADED") }

// fakeAPI answers what the node service asks of the API server: empty lists,
// watches that stay open, leases kept in memory, and anything written.
type fakeAPI struct {
	*httptest.Server
	mu          sync.Mutex
	leases      map[string][]byte
	leaseWrites int
	// refuseNPP makes NodePodProbe lists and watches forbidden; closing
	// breakWatches ends the watches open.
	refuseNPP    bool
	breakWatches chan struct{}
}

func newFakeAPI(t *testing.T) *fakeAPI {
	a := &fakeAPI{leases: map[string][]byte{}, breakWatches: make(chan struct{})}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

var listKinds = map[string][2]string{
	"nodepodprobes":             {"apps.kruise.io/v1alpha1", "NodePodProbeList"},
	"containerrecreaterequests": {"apps.kruise.io/v1alpha1", "ContainerRecreateRequestList"},
	"pods":                      {"v1", "PodList"},
}

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	last := parts[len(parts)-1]
	a.mu.Lock()
	refused, broken := a.refuseNPP && last == "nodepodprobes", a.breakWatches
	a.mu.Unlock()
	switch {
	case refused:
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	case r.URL.Query().Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		if k := listKinds[last]; r.URL.Query().Get("sendInitialEvents") == "true" {
			// A streaming list: no objects, then the end of the initial events.
			fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"1",`+
				`"annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n", k[0], strings.TrimSuffix(k[1], "List"))
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-broken:
		}
	case r.Method == http.MethodGet && listKinds[last] != [2]string{}:
		k := listKinds[last]
		fmt.Fprintf(w, `{"apiVersion":%q,"kind":%q,"metadata":{"resourceVersion":"1"},"items":[]}`, k[0], k[1])
	case slices.Contains(parts, "leases"):
		a.lease(w, r, parts)
	case r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
		_, _ = io.Copy(w, r.Body)
	default:
		notFound(w)
	}
}

func (a *fakeAPI) lease(w http.ResponseWriter, r *http.Request, parts []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		b, ok := a.leases[parts[len(parts)-1]]
		if !ok {
			notFound(w)
			return
		}
		_, _ = w.Write(b)
	case http.MethodPost, http.MethodPut:
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.leases[obj.Metadata.Name] = b
		a.leaseWrites++
		_, _ = w.Write(b)
	}
}

// refuse makes NodePodProbe requests forbidden (or allowed again) and ends
// the watches open, so that the informer asks again.
func (a *fakeAPI) refuse(refuse bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refuseNPP = refuse
	close(a.breakWatches)
	a.breakWatches = make(chan struct{})
}

func (a *fakeAPI) writes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leaseWrites
}

func notFound(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
}

type fixture struct {
	t       *testing.T
	j       *journal
	tracker *fakeTracker
	api     *fakeAPI
	logs    *logtest.Hook
	svc     *service
	// reloads is the service's SIGHUP; each reads the configuration with loadConfig.
	reloads chan os.Signal
	// connectReason, when set, is what connecting waits for.
	mu            sync.Mutex
	connectReason string
	loadConfig    func() (*config.Config, error)
}

func newFixture(t *testing.T, cfgEdit func(*config.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, j: &journal{}, tracker: newFakeTracker(), api: newFakeAPI(t), reloads: make(chan os.Signal, 1)}
	cfg := &config.Config{
		NodeName:       "node-a",
		HealthAddress:  "127.0.0.1:0",
		MetricsAddress: "127.0.0.1:0",
		StatusSocket:   filepath.Join(t.TempDir(), "s.sock"),
		Probes:         config.Probes{MaxConcurrentExecs: 1, MaxConcurrentNetwork: 1},
		Heartbeat:      config.Heartbeat{Namespace: "example-leases", LeaseDurationSeconds: 40, RenewIntervalSeconds: 1},
	}
	if cfgEdit != nil {
		cfgEdit(cfg)
	}
	f.loadConfig = func() (*config.Config, error) { c := *cfg; return &c, nil }
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	f.logs = hook
	changes := &containerChanges{}
	svc, err := newService(cfg, logger.WithField("node", cfg.NodeName), outside{
		runtime:  fakeRuntime{j: f.j},
		tracker:  f.tracker,
		changes:  changes,
		registry: prometheus.NewRegistry(),
		criProxy: &fakeComponent{name: "cri-proxy", j: f.j},
		connect:  f.connect,
		notify:   recordingNotifier{j: f.j},
		watchdog: func(ctx context.Context, _ func(context.Context) error, _ logrus.FieldLogger) { <-ctx.Done() },
		reloads:  f.reloads,
		loadConfig: func() (*config.Config, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.loadConfig()
		},
		configFile:  "/etc/example/config.yaml",
		setMaxProcs: func(int) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.poll, svc.grace, svc.renew = 10*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	f.svc = svc
	return f
}

func (f *fixture) connect(observe func(*http.Request, *http.Response, error)) (*kube.Clients, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connectReason != "" {
		return nil, f.connectReason
	}
	c, err := kube.NewForConfig(&rest.Config{Host: f.api.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}},
		kube.Options{Observe: observe})
	if err != nil {
		return nil, err.Error()
	}
	return c, ""
}

// run runs the service until the returned stop is called; stop returns
// Run's error.
func (f *fixture) run() (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.svc.run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				f.t.Fatal("Run did not return after its context ended")
			}
		})
		return err
	}
	f.t.Cleanup(func() { _ = stop() }) // a test that cares calls stop itself
	return stop
}

// order is the components' starts and stops, from the lifecycle's log.
func (f *fixture) order() []string {
	var out []string
	for _, e := range f.logs.AllEntries() {
		if c, ok := e.Data["component"].(string); ok && (e.Message == "started" || e.Message == "stopped") {
			out = append(out, map[string]string{"started": "start", "stopped": "stop"}[e.Message]+" "+c)
		}
	}
	return out
}

func (f *fixture) readyz() (int, string) {
	f.t.Helper()
	resp, err := http.Get("http://" + f.svc.server.Addr("health").String() + "/readyz?verbose")
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *fixture) status() *server.Status {
	f.t.Helper()
	st, err := server.FetchStatus(context.Background(), f.svc.cfg.StatusSocket)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) metric(name string) float64 {
	f.t.Helper()
	mfs, err := f.svc.out.registry.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	f.t.Fatalf("no metric %s", name)
	return 0
}

func (f *fixture) has(line string) bool { return slices.Contains(f.j.get(), line) }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := poll.Until(context.Background(), 10*time.Second, what, func(context.Context) (bool, string, error) {
		return cond(), "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var localOrder = []string{"runtime", "network", "hook-network", "cri-proxy", "endpoints", "watchdog", "tracker", "engine", "reload"}
var apiOrder = []string{"events", "api-side", "nodepodprobe", "recreate", "heartbeat"}

func prefixed(p string, names ...[]string) []string {
	var out []string
	for _, ns := range names {
		for _, n := range ns {
			out = append(out, p+n)
		}
	}
	return out
}

// Start-up in order, READY once the NodePodProbe is synced, the lease
// renewed, and on stop STOPPING and every component stopped in reverse.
func TestStartAndStop(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(nil)
	stop := f.run()
	eventually(t, "READY", func() bool { return f.has("READY probing for node node-a") })
	if code, body := f.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	eventually(t, "a lease renewal", func() bool { return f.api.writes() > 0 })
	eventually(t, "the lease in the status", func() bool {
		hb := f.status().Heartbeat
		return hb != nil && hb.Renewing && hb.Namespace == "example-leases" && hb.Name == "node-a" && !hb.LastRenew.IsZero()
	})

	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := prefixed("start ", localOrder, apiOrder)
	rev := slices.Clone(want)
	slices.Reverse(rev)
	for i := range rev {
		rev[i] = "stop " + strings.TrimPrefix(rev[i], "start ")
	}
	if got := f.order(); !slices.Equal(got, append(want, rev...)) {
		t.Fatalf("order:\n got %v\nwant %v", got, append(want, rev...))
	}
	lines := f.j.get()
	if lines[len(lines)-1] != "runtime closed" || !slices.Contains(lines, "STOPPING") {
		t.Fatalf("journal = %v", lines)
	}
}

// A component that cannot start (the health port is taken): Run returns its
// error at once and what had started is stopped in reverse order.
func TestStartFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := newFixture(t, func(c *config.Config) { c.HealthAddress = l.Addr().String() })
	err = f.svc.run(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "endpoints: ") {
		t.Fatalf("Run = %v, want the endpoints' error", err)
	}
	want := []string{"start runtime", "start network", "start hook-network", "start cri-proxy",
		"stop cri-proxy", "stop hook-network", "stop network", "stop runtime"}
	if got := f.order(); !slices.Equal(got, want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
	if !f.has("runtime closed") || slices.ContainsFunc(f.j.get(), func(s string) bool { return strings.HasPrefix(s, "READY") }) {
		t.Fatalf("journal = %v", f.j.get())
	}
}

// Start-up waits for containerd and then for a kubeconfig, saying why in
// the status line, tells systemd it is up after the grace, and is READY
// once both are there.
func TestWaitsWithReasons(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(errors.New("dial unix /run/example/containerd.sock: connection refused"))
	f.connectReason = "kubeconfig /etc/example/kubeconfig"
	f.run()
	eventually(t, "the runtime as the reason", func() bool {
		return f.has("STATUS waiting for containerd at /run/example/containerd.sock: dial unix /run/example/containerd.sock: connection refused")
	})
	eventually(t, "READY after the grace", func() bool {
		return f.has("READY waiting for containerd at /run/example/containerd.sock: dial unix /run/example/containerd.sock: connection refused")
	})
	if code, _ := f.readyz(); code == http.StatusOK {
		t.Fatal("/readyz ok without containerd")
	}
	f.tracker.set(nil)
	eventually(t, "the kubeconfig as the reason", func() bool { return f.has("STATUS waiting for kubeconfig /etc/example/kubeconfig") })
	if hb := f.status().Heartbeat; hb == nil || hb.Renewing || !strings.Contains(hb.Reason, "waiting for the API server") {
		t.Fatalf("heartbeat before the API server: %+v", hb)
	}
	f.mu.Lock()
	f.connectReason = ""
	f.mu.Unlock()
	eventually(t, "READY probing", func() bool { return f.has("READY probing for node node-a") })
}

// containerd restarts: the tracker goes unhealthy and back. The service
// keeps running, readiness and the heartbeat follow.
func TestContainerdRestart(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(nil)
	stop := f.run()
	eventually(t, "READY", func() bool { return f.has("READY probing for node node-a") })
	eventually(t, "renewing", func() bool { hb := f.status().Heartbeat; return hb != nil && hb.Renewing })

	f.tracker.set(errors.New("event stream closed"))
	eventually(t, "/readyz failing on the runtime", func() bool {
		code, body := f.readyz()
		return code == http.StatusInternalServerError && strings.Contains(body, "[-]runtime failed: event stream closed")
	})
	eventually(t, "the heartbeat to stop renewing", func() bool {
		hb := f.status().Heartbeat
		return !hb.Renewing && strings.Contains(hb.Reason, "event stream closed")
	})
	held, skipped := f.api.writes(), f.metric("probeshim_heartbeat_renewals_skipped_total")
	eventually(t, "a renewal to be skipped", func() bool { return f.metric("probeshim_heartbeat_renewals_skipped_total") > skipped })
	if n := f.api.writes(); n != held {
		t.Fatalf("%d lease writes while containerd was away", n-held)
	}

	f.tracker.set(nil)
	eventually(t, "/readyz ok again", func() bool { code, _ := f.readyz(); return code == http.StatusOK })
	eventually(t, "renewing again", func() bool { return f.status().Heartbeat.Renewing && f.api.writes() > held })
	if slices.Contains(f.order(), "stop engine") {
		t.Fatal("a component stopped while containerd restarted")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// The NodePodProbe watch fails (refused): the heartbeat stops renewing and
// says why, and renews again once the watch works.
func TestNodePodProbeWatchFailing(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(nil)
	f.run()
	eventually(t, "READY", func() bool { return f.has("READY probing for node node-a") })
	eventually(t, "renewing", func() bool { hb := f.status().Heartbeat; return hb != nil && hb.Renewing })

	f.api.refuse(true)
	eventually(t, "the heartbeat to stop renewing", func() bool {
		hb := f.status().Heartbeat
		return !hb.Renewing && strings.Contains(hb.Reason, "watching NodePodProbe node-a: the API server answered 403 Forbidden")
	})
	f.api.refuse(false)
	eventually(t, "renewing again", func() bool { return f.status().Heartbeat.Renewing })
}
