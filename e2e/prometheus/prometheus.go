// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package prometheus runs a real Prometheus server inside the rig's network namespace, for the
// suites that check what an operator's monitoring sees: targets scraped through their
// authentication, probeshim's alert rules firing and resolving. The server is Debian's build,
// unpacked by hack/promtool.sh (`make e2e` exports its path as PROBESHIM_PROMETHEUS).
package prometheus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// BinaryEnv names the Prometheus server binary.
const BinaryEnv = "PROBESHIM_PROMETHEUS"

// Binary is the server's path: $PROBESHIM_PROMETHEUS, else what hack/promtool.sh unpacks (run
// from the module at root), so that a suite run by hand finds it too.
func Binary(root string) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	out, err := exec.Command(filepath.Join(root, "hack", "promtool.sh"), "prometheus").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("hack/promtool.sh prometheus: %w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("hack/promtool.sh prometheus: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Server is one Prometheus in the rig's netns.
type Server struct {
	r    *rig.Rig
	addr string // host:port on the netns's loopback
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start writes config (prometheus.yml) and files (rule files, credentials) into dir, starts the
// server with them and waits until it is ready.
func Start(ctx context.Context, r *rig.Rig, bin, dir, config string, files map[string][]byte) (*Server, error) {
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	port, err := rig.FreeLoopbackPort(r.NetNSPath())
	if err != nil {
		return nil, err
	}
	s := &Server{r: r, addr: fmt.Sprintf("127.0.0.1:%d", port), log: filepath.Join(dir, "prometheus.log"), done: make(chan struct{})}
	logFile, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	s.cmd = r.Command(context.Background(), bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.addr, "--storage.tsdb.retention.time=2h", "--log.level=info")
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.done) }() // the exit shows through done; why, in the log
	err = poll.Until(ctx, time.Minute, "Prometheus ready (/-/ready)", func(ctx context.Context) (bool, string, error) {
		select {
		case <-s.done:
			return false, "", fmt.Errorf("prometheus exited: %s", s.Logs(20))
		default:
		}
		body, err := rig.GetInNetNS(ctx, r.NetNSPath(), s.URL()+"/-/ready")
		return err == nil, fmt.Sprint(err, body), nil
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// URL is the server's base URL inside the netns.
func (s *Server) URL() string { return "http://" + s.addr }

// Logs returns the last n lines the server logged.
func (s *Server) Logs(n int) string {
	b, _ := os.ReadFile(s.log)
	return logtail.Last(string(b), n)
}

// Stop stops the server and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Alert is one alert the server's rules hold, pending or firing.
type Alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

// Alerts are the active alerts.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	return data.Alerts, s.api(ctx, "/api/v1/alerts", &data)
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query evaluates an instant query.
func (s *Server) Query(ctx context.Context, q string) ([]Sample, error) {
	var data struct {
		Result []Sample `json:"result"`
	}
	return data.Result, s.api(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data)
}

// Target is one scrape target's state.
type Target struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// Targets are the active targets.
func (s *Server) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	return data.ActiveTargets, s.api(ctx, "/api/v1/targets?state=active", &data)
}

func (s *Server) api(ctx context.Context, path string, data any) error {
	body, err := rig.GetInNetNS(ctx, s.r.NetNSPath(), s.URL()+path)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w: %s", path, err, body)
	}
	var resp struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	if resp.Status != "success" {
		return fmt.Errorf("prometheus %s: %s", path, resp.Error)
	}
	return json.Unmarshal(resp.Data, data)
}

var forClause = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+\s*$`)

// ShortenFor sets every rule's `for:` in a rule file to d, so that an alert that fires after
// minutes on a cluster fires within the test's seconds: the expressions stay as shipped.
func ShortenFor(rules []byte, d time.Duration) []byte {
	return forClause.ReplaceAll(rules, []byte("${1}"+model(d)))
}

// model writes d as Prometheus' duration syntax (whole seconds).
func model(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

// Timeline records when each alert turned pending, firing and inactive, polled every second
// until Stop.
type Timeline struct {
	mu     sync.Mutex
	t0     time.Time
	state  map[string]string
	events []string
	stop   context.CancelFunc
	done   chan struct{}
}

// Watch starts recording s's alerts.
func (s *Server) Watch(ctx context.Context) *Timeline {
	ctx, cancel := context.WithCancel(ctx)
	tl := &Timeline{t0: time.Now(), state: map[string]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if alerts, err := s.Alerts(ctx); err == nil {
				tl.observe(alerts)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return tl
}

func (tl *Timeline) observe(alerts []Alert) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	now := map[string]string{}
	for _, a := range alerts {
		name := a.Labels["alertname"]
		if n := a.Labels["node"]; n != "" {
			name += "{node=" + n + "}"
		}
		now[name] = a.State
	}
	at := time.Since(tl.t0).Round(time.Second)
	for name, st := range now {
		if tl.state[name] != st {
			tl.events = append(tl.events, fmt.Sprintf("%6s %s %s", at, name, st))
		}
	}
	for name := range tl.state {
		if _, ok := now[name]; !ok {
			tl.events = append(tl.events, fmt.Sprintf("%6s %s resolved", at, name))
		}
	}
	tl.state = now
}

// Stop ends the recording and returns the transitions, one a line, timed from Watch.
func (tl *Timeline) Stop() string {
	tl.stop()
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.events, "\n")
}

// State is the alert's current state as last polled: "pending", "firing" or "" (inactive).
func (tl *Timeline) State(name string) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.state[name]
}
