// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s := New(o)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

func TestHealthReadyMetrics(t *testing.T) {
	reg, perPod := prometheus.NewRegistry(), prometheus.NewRegistry()
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "probeshim_probes_total", Help: "x"}, []string{"result"})
	reg.MustRegister(probes)
	probes.WithLabelValues("successful").Add(3)
	podProbes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "x"}, []string{"pod"})
	perPod.MustRegister(podProbes)
	podProbes.WithLabelValues("web-0").Add(2)

	var runtimeDown atomic.Bool
	runtimeDown.Store(true)
	s := start(t, Options{
		HealthAddress:  "127.0.0.1:0",
		MetricsAddress: "127.0.0.2:0", // another string: another listener
		Gatherer:       reg,
		ProbesGatherer: perPod,
		Health:         []Check{{"loops", func(context.Context) error { return nil }}},
		Ready: []Check{
			{"runtime", func(context.Context) error {
				if runtimeDown.Load() {
					return errors.New("containerd unreachable")
				}
				return nil
			}},
			{"sync", func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					return errors.New("no deadline")
				}
				return nil
			}},
		},
	})
	health := "http://" + s.Addr("health").String()
	metrics := "http://" + s.Addr("metrics").String()
	if health == metrics {
		t.Fatal("separate addresses share a listener")
	}

	if code, body := get(t, health+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	code, body := get(t, health+"/readyz")
	if code != 500 || !strings.Contains(body, "[-]runtime failed: containerd unreachable") || strings.Contains(body, "[+]") {
		t.Fatalf("/readyz while the runtime is down = %d %q", code, body)
	}
	runtimeDown.Store(false)
	if code, body := get(t, health+"/readyz"); code != 200 || body != "ok" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	if code, body := get(t, health+"/readyz?verbose"); code != 200 || body != "[+]runtime ok\n[+]sync ok\nok" {
		t.Fatalf("/readyz?verbose = %d %q", code, body)
	}
	if code, body := get(t, metrics+"/metrics"); code != 200 || !strings.Contains(body, `probeshim_probes_total{result="successful"} 3`) ||
		strings.Contains(body, "prober_probe_total") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	if code, body := get(t, metrics+"/metrics/probes"); code != 200 || !strings.Contains(body, `prober_probe_total{pod="web-0"} 2`) ||
		strings.Contains(body, "probeshim_probes_total") {
		t.Fatalf("/metrics/probes = %d %q", code, body)
	}
	// Each endpoint only where it belongs.
	if code, _ := get(t, health+"/metrics"); code != 404 {
		t.Fatalf("/metrics on the health address: %d", code)
	}
	if code, _ := get(t, metrics+"/healthz"); code != 404 {
		t.Fatalf("/healthz on the metrics address: %d", code)
	}
	resp, err := http.Post(health+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz = %d", resp.StatusCode)
	}
}

func TestOneListenerWhenAddressesMatch(t *testing.T) {
	// Find a free port, then ask for it twice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := start(t, Options{HealthAddress: addr, MetricsAddress: addr, Gatherer: prometheus.NewRegistry()})
	if code, _ := get(t, "http://"+addr+"/metrics"); code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if s.Addr("metrics").String() != addr {
		t.Fatal("metrics address")
	}

	// A taken address is an error at Start, not later.
	s2 := New(Options{HealthAddress: addr})
	if err := s2.Start(); err == nil || !strings.Contains(err.Error(), "health endpoint") {
		t.Fatalf("Start on a taken address: %v", err)
	}
}

func TestStatusSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "probeshim.sock")
	probeTime := time.Now().Add(-4 * time.Second).Truncate(time.Second)
	var calls atomic.Int32
	source := StatusFunc(func() []ProbeStatus {
		calls.Add(1)
		return []ProbeStatus{
			{Namespace: "shop", Pod: "web-1", PodUID: "u2", Container: "app", Probe: "ready", Type: "httpGet", Result: "Failure",
				Message: "HTTP probe failed with statuscode: 500", LastProbeTime: probeTime, LastTransitionTime: probeTime.Add(-90 * time.Second)},
			{Namespace: "shop", Pod: "web-0", PodUID: "u1", Container: "app", Probe: "idle", Type: "exec", Result: "Success",
				LastProbeTime: probeTime},
			{Namespace: "batch", Pod: "job-0", PodUID: "u3", Container: "main", Probe: "live", Result: "Unknown"},
		}
	})
	runners := &RunnersStatus{Pools: []PoolStatus{
		{Name: "exec", Limit: 32, PerNamespace: 8, Running: 32, Queued: 37, StartedLate: 120, LastLate: probeTime, LastLateSeconds: 12.5},
		{Name: "network", Limit: 256, PerNamespace: 64},
	}, Late: "exec probes start late: the latest 13s after its time (all 32 runners busy)"}
	s := start(t, Options{StatusSocket: sock, Node: "worker-1", Status: source, Runners: func() *RunnersStatus { return runners }})
	if s.Addr("health") != nil {
		t.Fatal("health endpoint without an address")
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v", fi, err)
	}

	ctx := context.Background()
	st, err := FetchStatus(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Node != "worker-1" || len(st.Probes) != 3 || calls.Load() != 1 {
		t.Fatalf("status = %+v", st)
	}
	// Sorted by namespace, pod, container, probe; times survive the trip.
	if st.Probes[0].Pod != "job-0" || st.Probes[1].Pod != "web-0" || st.Probes[2].Pod != "web-1" {
		t.Fatalf("order: %+v", st.Probes)
	}
	if !st.Probes[2].LastProbeTime.Equal(probeTime) || !st.Probes[0].LastProbeTime.IsZero() {
		t.Fatalf("times: %+v", st.Probes)
	}
	if st.Runners != nil && len(st.Runners.Pools) == 2 && st.Runners.Pools[0].LastLate.Equal(probeTime) {
		st.Runners.Pools[0].LastLate = probeTime // the same instant, in the location the sender had
	}
	if st.Runners == nil || len(st.Runners.Pools) != 2 || st.Runners.Pools[0] != runners.Pools[0] || st.Runners.Late != runners.Late {
		t.Fatalf("runners = %+v, want %+v", st.Runners, runners)
	}

	var out bytes.Buffer
	st.Time = probeTime.Add(4 * time.Second)
	if err := WriteStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"node worker-1: 3 probe(s)",
		"probe runners: exec 32 of 32 running, 37 queued (8 per namespace), 120 started late; network 0 of 256 running",
		"PROBES START LATE: exec probes start late: the latest 13s",
		"NAMESPACE", "RESULT",
		"batch      job-0  main       live   -        Unknown  never       never",
		"shop       web-1  app        ready  httpGet  Failure  4s ago      1m34s ago  HTTP probe failed with statuscode: 500",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}

	// Go's profiles are served on the same root-only socket.
	prof, err := FetchCPUProfile(ctx, sock, time.Second)
	if err != nil || len(prof) < 2 || prof[0] != 0x1f || prof[1] != 0x8b { // gzipped protobuf
		t.Fatalf("CPU profile: %d bytes, %v", len(prof), err)
	}

	// A second service cannot take over a live socket.
	if err := New(Options{StatusSocket: sock}).Start(); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second server on a live socket: %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := FetchStatus(ctx, sock); err == nil || !strings.Contains(err.Error(), "is probeshim running?") {
		t.Fatalf("fetch after shutdown: %v", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "probeshim.sock")
	// A socket file left by a killed process: nobody listens on it.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	start(t, Options{StatusSocket: sock})
	st, err := FetchStatus(context.Background(), sock)
	if err != nil || st.Probes == nil || len(st.Probes) != 0 {
		t.Fatalf("empty status = %+v, %v", st, err)
	}
}

func TestWriteStatusHelpers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for d, want := range map[time.Duration]string{
		-time.Second: "just now", 0: "0s ago", 59 * time.Second: "59s ago", 61 * time.Second: "1m01s ago",
		3*time.Hour + 5*time.Minute: "3h05m ago", 72 * time.Hour: "3d ago",
	} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
	if got := firstLine("line one\nline two", 80); got != "line one…" {
		t.Errorf("firstLine = %q", got)
	}
	if got := firstLine(strings.Repeat("é", 100), 10); got != strings.Repeat("é", 10)+"…" {
		t.Errorf("firstLine = %q", got)
	}
	var out bytes.Buffer
	_ = WriteStatus(&out, &Status{Node: "n", Time: now})
	if strings.Contains(out.String(), "NAMESPACE") {
		t.Error("header printed without probes")
	}
}

// The heartbeat's state travels over the socket and is one line of the
// table: renewing, or why not.
func TestStatusHeartbeat(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	renewed := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	hb := &HeartbeatStatus{Namespace: "example-leases", Name: "worker-1", LastRenew: renewed, Renewing: true}
	s := New(Options{StatusSocket: sock, Node: "worker-1", Heartbeat: func() *HeartbeatStatus { return hb }})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background()) //nolint:errcheck // the test is over
	st, err := FetchStatus(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Heartbeat == nil || *st.Heartbeat != *hb {
		t.Fatalf("heartbeat = %+v, want %+v", st.Heartbeat, hb)
	}
	for _, tc := range []struct {
		hb   HeartbeatStatus
		want string
	}{
		{*hb, "lease example-leases/worker-1: last renewed 3s ago, renewing\n"},
		// The kubelet's identity: the cluster deployment's endpoint renews it.
		{HeartbeatStatus{Namespace: "example-leases", Name: "worker-1", LastRenew: renewed, Renewing: true, Path: "endpoint https://10.96.0.12:443"},
			"lease example-leases/worker-1: last renewed 3s ago, renewing (endpoint https://10.96.0.12:443)\n"},
		{HeartbeatStatus{Namespace: "example-leases", Name: "worker-1", Reason: "cannot write the lease: forbidden\nsecond line"},
			"lease example-leases/worker-1: last renewed never, NOT renewing: cannot write the lease: forbidden…\n"},
	} {
		var out bytes.Buffer
		if err := WriteStatus(&out, &Status{Node: "worker-1", Time: renewed.Add(3 * time.Second), Heartbeat: &tc.hb}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("status:\n%s\nwant the line %q", out.String(), tc.want)
		}
	}
}

// A refused reload and changes that wait for a restart travel over the socket and are lines of
// the table; neither makes the service degraded (it runs on with the configuration it has).
func TestStatusConfig(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	loaded := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cs := &ConfigStatus{File: "/etc/probeshim/config.yaml", Loaded: loaded,
		LastReload:    &ReloadStatus{Time: loaded.Add(time.Minute), Error: "logLevel: \"loud\" is not one of\npanic, fatal"},
		RestartNeeded: []string{"kubeconfig", "probes.maxConcurrentExecs"}}
	s := New(Options{StatusSocket: sock, Node: "worker-1", Config: func() *ConfigStatus { return cs }})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background()) //nolint:errcheck // the test is over
	st, err := FetchStatus(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Config == nil || st.Config.File != cs.File || !st.Config.Loaded.Equal(loaded) || st.Config.LastReload == nil ||
		st.Config.LastReload.Error != cs.LastReload.Error || len(st.Config.RestartNeeded) != 2 {
		t.Fatalf("config = %+v, want %+v", st.Config, cs)
	}
	if state, problems := Assess(st); state != StateLive {
		t.Errorf("a refused reload made the service %s: %q", state, problems)
	}
	st.Time = loaded.Add(2 * time.Minute)
	var out bytes.Buffer
	if err := WriteStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CONFIG RELOAD REFUSED 1m00s ago: logLevel: \"loud\" is not one of panic, fatal; running with the configuration read 2m00s ago\n",
		"config changes waiting for a restart (systemctl restart probeshim): kubeconfig, probes.maxConcurrentExecs\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status:\n%s\nwant the line %q", out.String(), want)
		}
	}
	// A reload that applied says nothing in the table.
	st.Config = &ConfigStatus{Loaded: loaded, LastReload: &ReloadStatus{Time: loaded, Applied: []string{"logLevel"}}}
	out.Reset()
	if err := WriteStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(out.String()), "config") {
		t.Errorf("status after a good reload mentions the config:\n%s", out.String())
	}
}
