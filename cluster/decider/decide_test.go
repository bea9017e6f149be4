// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeTokens hands out n tokens, then says the next comes in wait.
type fakeTokens struct {
	n    int
	wait time.Duration
}

func (f *fakeTokens) Take(string, time.Time) (bool, Scope, time.Duration) {
	if f.n > 0 {
		f.n--
		return true, "", 0
	}
	return false, ScopeCluster, f.wait
}

func plenty() *fakeTokens { return &fakeTokens{n: 1000} }

// started is when the pods' containers started: well before their failures.
var started = t0.Add(-time.Hour)

func running(pod, container string) Instance {
	return Instance{ID: "containerd://" + pod + "-" + container, RestartCount: 2, Running: true, StartedAt: started}
}

func healthy(name string) Pod {
	return Pod{Name: name, UID: types.UID("uid-" + name), Ready: true, Labels: map[string]string{"app": "web"},
		Containers: map[string]Instance{"app": running(name, "app")}}
}

func failing(name string, since time.Duration, containers ...string) Pod {
	p := healthy(name)
	if len(containers) == 0 {
		containers = []string{"app"}
	}
	for _, c := range containers {
		p.Containers[c] = running(name, c)
		p.Failing = append(p.Failing, Failure{Container: c, Since: t0.Add(since), Instance: running(name, c)})
	}
	return p
}

// exited is p with container c stopped (exited, or waiting in the kubelet's back-off).
func exited(p Pod, c string) Pod {
	p.Containers = maps.Clone(p.Containers)
	inst := p.Containers[c]
	inst.Running, inst.StartedAt = false, time.Time{}
	p.Containers[c] = inst
	return p
}

// restarted is p with container c restarted by the kubelet at t0+at.
func restarted(p Pod, c string, at time.Duration) Pod {
	p.Containers = maps.Clone(p.Containers)
	p.Containers[c] = Instance{ID: "containerd://new-" + c, RestartCount: p.Containers[c].RestartCount + 1, Running: true, StartedAt: t0.Add(at)}
	return p
}

func with(p Pod, edit func(*Pod)) Pod { edit(&p); return p }

func settings(edit func(*Config)) *Settings {
	var c Config
	if edit != nil {
		edit(&c)
	}
	s, err := c.Settings()
	if err != nil {
		panic(err)
	}
	return s
}

func input(s *Settings, pods ...Pod) Input {
	return Input{
		Now: t0.Add(time.Minute), Settings: s,
		Workload: Workload{Kind: "Deployment", Namespace: "shop", Name: "web"},
		Pods:     pods,
		Budget:   Budget{MaxUnavailable: MaxUnavailable(s.DefaultMaxUnavailable, len(pods), false, 1), Source: "default"},
	}
}

func six(failingPods int) []Pod {
	var pods []Pod
	for i := range 6 {
		name := fmt.Sprintf("web-%d", i)
		if i < failingPods {
			pods = append(pods, failing(name, time.Duration(i)*time.Second))
		} else {
			pods = append(pods, healthy(name))
		}
	}
	return pods
}

// summary is "<pod>:<outcome>/<reason>" for each decision, in order.
func summary(ds []Decision) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%s:%s/%s", d.Pod.Name, d.Outcome, d.Reason))
	}
	return strings.Join(parts, " ")
}

func TestDecide(t *testing.T) {
	def := settings(nil)
	off := settings(func(c *Config) { c.Enabled = new(bool) })
	dry := settings(func(c *Config) { c.DryRun = true })
	black := settings(func(c *Config) {
		c.Blacklist = Blacklist{Namespaces: []string{"legacy"}, Selectors: []string{"tier=db"}, Workloads: []string{"Deployment/shop/web"}}
	})
	blackSel := settings(func(c *Config) { c.Blacklist = Blacklist{Selectors: []string{"app=web"}} })
	recorded := func(p Pod, restarts int, lastRestart time.Duration) Pod {
		p.Record = Record{Containers: map[string]ContainerRecord{"app": {
			Failure: metav1.Time{Time: t0.Add(-time.Hour)}, Restarts: restarts, LastRestart: metav1.NewMicroTime(t0.Add(lastRestart)),
		}}}
		return p
	}

	tests := []struct {
		name   string
		in     Input
		tokens *fakeTokens
		want   string
		retry  time.Duration // of the first decision
		open   bool
	}{
		{name: "healthy workload: nothing to decide", in: input(def, six(0)...), want: ""},
		{name: "one of six fails: restart", in: input(def, six(1)...), want: "web-0:restart/LivenessFailed"},
		{name: "two of six fail: the default 25% of 6 is 1, oldest first",
			in: input(def, six(2)...), want: "web-0:restart/LivenessFailed web-1:held/MaxUnavailable"},
		{name: "three of six is not more than half: breaker closed",
			in:   with2(input(def, six(3)...), func(in *Input) { in.Budget.MaxUnavailable = 1 }),
			want: "web-0:restart/LivenessFailed web-1:held/MaxUnavailable web-2:held/MaxUnavailable"},
		{name: "four of six: breaker open, nothing restarts", in: input(def, six(4)...), open: true,
			want: "web-0:held/CircuitBreakerOpen web-1:held/CircuitBreakerOpen web-2:held/CircuitBreakerOpen web-3:held/CircuitBreakerOpen"},
		{name: "all of six: breaker open", in: input(def, six(6)...), open: true,
			want: "web-0:held/CircuitBreakerOpen web-1:held/CircuitBreakerOpen web-2:held/CircuitBreakerOpen web-3:held/CircuitBreakerOpen web-4:held/CircuitBreakerOpen web-5:held/CircuitBreakerOpen"},
		{name: "a bare pod failing alone: below minFailingPods, restart",
			in: input(def, failing("solo", 0)), want: "solo:restart/LivenessFailed"},
		{name: "two pods both failing: breaker open (2 > 50% of 2, at least 2)",
			in: input(def, failing("a", 0), failing("b", 0)), open: true,
			want: "a:held/CircuitBreakerOpen b:held/CircuitBreakerOpen"},
		{name: "config invalid holds first",
			in:   with2(input(def, six(1)...), func(in *Input) { in.ConfigErr = errors.New("bad") }),
			want: "web-0:held/ConfigInvalid"},
		{name: "global switch off", in: input(off, six(1)...), want: "web-0:held/Disabled"},
		{name: "namespace opted out",
			in:   with2(input(def, six(1)...), func(in *Input) { in.NamespaceOptedOut = true }),
			want: "web-0:held/NamespaceOptedOut"},
		{name: "pod emergency switch",
			in:   input(def, with(failing("web-0", 0), func(p *Pod) { p.OptedOut = true }), healthy("web-1")),
			want: "web-0:held/PodOptedOut"},
		{name: "blacklisted workload", in: input(black, six(1)...), want: "web-0:held/Blacklisted"},
		{name: "blacklisted by selector", in: input(blackSel, six(1)...), want: "web-0:held/Blacklisted"},
		{name: "blacklisted namespace",
			in:   with2(input(black, six(1)...), func(in *Input) { in.Workload = Workload{Kind: "StatefulSet", Namespace: "legacy", Name: "x"} }),
			want: "web-0:held/Blacklisted"},
		{name: "dry run decides but does not restart", in: input(dry, six(1)...), want: "web-0:dry_run/LivenessFailed"},
		{name: "dry run still respects maxUnavailable",
			in: input(dry, six(2)...), want: "web-0:dry_run/LivenessFailed web-1:held/MaxUnavailable"},
		{name: "request in flight for the pod",
			in:   input(def, with(failing("web-0", 0), func(p *Pod) { p.Recreating = true }), healthy("web-1")),
			want: "web-0:held/RecreateInProgress"},
		{name: "another pod being recreated uses the budget",
			in:   input(def, failing("web-0", 0), with(healthy("web-1"), func(p *Pod) { p.Recreating = true }), healthy("w2"), healthy("w3")),
			want: "web-0:held/MaxUnavailable"},
		{name: "an unready pod uses the budget",
			in:   input(def, failing("web-0", 0), with(healthy("web-1"), func(p *Pod) { p.Ready = false }), healthy("w2"), healthy("w3")),
			want: "web-0:held/MaxUnavailable"},
		{name: "the failing pod's own unreadiness does not count twice",
			in:   input(def, with(failing("web-0", 0), func(p *Pod) { p.Ready = false }), healthy("w1"), healthy("w2"), healthy("w3")),
			want: "web-0:restart/LivenessFailed"},
		{name: "PDB allowing none",
			in:   with2(input(def, six(1)...), func(in *Input) { in.Budget = Budget{MaxUnavailable: 0, Source: "PodDisruptionBudget shop/pdb"} }),
			want: "web-0:held/MaxUnavailable"},
		{name: "rate limited", in: input(def, six(1)...), tokens: &fakeTokens{wait: 700 * time.Millisecond},
			want: "web-0:held/RateLimited", retry: 700 * time.Millisecond},
		{name: "one token for two workload budgets",
			in:     with2(input(def, six(2)...), func(in *Input) { in.Budget.MaxUnavailable = 2 }),
			tokens: &fakeTokens{n: 1, wait: time.Second},
			want:   "web-0:restart/LivenessFailed web-1:held/RateLimited", retry: 0},
		{name: "already acted on: the state predates the restart",
			in: input(def, with(failing("web-0", 0), func(p *Pod) {
				p.Record = Record{Containers: map[string]ContainerRecord{"app": {Failure: metav1.Time{Time: t0}, Restarts: 1, LastRestart: metav1.NewMicroTime(t0)}}}
			}), healthy("w1")),
			want: ""},
		{name: "first restart: no backoff", in: input(def, failing("web-0", 0), healthy("w1")), want: "web-0:restart/LivenessFailed"},
		{name: "second failure 30s after the first restart: 10s backoff over",
			in:   input(def, recorded(failing("web-0", 0), 1, -30*time.Second), healthy("w1")),
			want: "web-0:restart/LivenessFailed"},
		{name: "second failure right after the first restart: wait 10s from the restart",
			in:   input(def, recorded(failing("web-0", 55*time.Second), 1, 55*time.Second), healthy("w1")),
			want: "web-0:held/Backoff", retry: 5 * time.Second},
		{name: "fourth restart: 40s backoff",
			in:   input(def, recorded(failing("web-0", 50*time.Second), 3, 40*time.Second), healthy("w1")),
			want: "web-0:held/Backoff", retry: 20 * time.Second},
		{name: "backoff capped at 5m",
			in:   input(def, recorded(failing("web-0", 55*time.Second), 20, 50*time.Second), healthy("w1")),
			want: "web-0:held/Backoff", retry: 4*time.Minute + 50*time.Second},
		{name: "ran 10m healthy since the restart: backoff reset",
			in:   with2(input(def, recorded(failing("web-0", 11*time.Minute), 20, 0), healthy("w1")), func(in *Input) { in.Now = t0.Add(11 * time.Minute) }),
			want: "web-0:restart/LivenessFailed"},
		{name: "a failure younger than its probe's period is watched first",
			in:   input(def, with(failing("web-0", 0), func(p *Pod) { p.Failing[0].Seen, p.Failing[0].Period = t0.Add(59*time.Second), 3*time.Second }), healthy("w1")),
			want: "web-0:held/Observing", retry: 2 * time.Second},
		{name: "a configured window replaces the period",
			in: input(settings(func(c *Config) { c.CircuitBreaker.Window = &metav1.Duration{} }),
				with(failing("web-0", 0), func(p *Pod) { p.Failing[0].Seen, p.Failing[0].Period = t0.Add(time.Minute), 10*time.Second }), healthy("w1")),
			want: "web-0:restart/LivenessFailed"},
		{name: "the breaker holds during the window too",
			in: input(def, func() []Pod {
				pods := six(4)
				for i := range 4 {
					pods[i].Failing[0].Seen, pods[i].Failing[0].Period = t0.Add(time.Minute), time.Second
				}
				return pods
			}()...), open: true,
			want: "web-0:held/CircuitBreakerOpen web-1:held/CircuitBreakerOpen web-2:held/CircuitBreakerOpen web-3:held/CircuitBreakerOpen"},
		{name: "two containers: one request for both",
			in: input(def, failing("web-0", 0, "app", "sidecar"), healthy("w1")), want: "web-0:restart/LivenessFailed"},

		// An exit is not a liveness failure: the container that is not running now, or the
		// instance that failed, is gone; the kubelet restarts by restartPolicy.
		{name: "container exited (Failed state not yet Unknown): held, no restart",
			in: input(def, exited(failing("web-0", 0), "app"), healthy("w1")), want: "web-0:held/ContainerNotRunning"},
		{name: "container waiting in the kubelet's back-off: held",
			in:   input(def, exited(recorded(failing("web-0", 55*time.Second), 1, -time.Hour), "app"), healthy("w1")),
			want: "web-0:held/ContainerNotRunning"},
		{name: "no status for the container: not running",
			in:   input(def, with(failing("web-0", 0), func(p *Pod) { p.Containers = nil }), healthy("w1")),
			want: "web-0:held/ContainerNotRunning"},
		{name: "exit with a zero window: still held",
			in: input(settings(func(c *Config) { c.CircuitBreaker.Window = &metav1.Duration{} }),
				with(exited(failing("web-0", 0), "app"), func(p *Pod) { p.Failing[0].Seen = t0.Add(time.Minute) }), healthy("w1")),
			want: "web-0:held/ContainerNotRunning"},
		{name: "restarted by the kubelet since the failure was seen (new ID): held",
			in:   input(def, restarted(failing("web-0", 30*time.Second), "app", 20*time.Second), healthy("w1")),
			want: "web-0:held/ContainerRestarted"},
		{name: "started after the state turned Failed (seen only after the restart): held",
			in: input(def, with(restarted(failing("web-0", 0), "app", 10*time.Second), func(p *Pod) {
				p.Failing[0].Instance = p.Containers["app"] // first seen with the new instance
			}), healthy("w1")),
			want: "web-0:held/ContainerRestarted"},
		{name: "started in the same second as the failure, same instance: restart",
			in:   input(def, with(restarted(failing("web-0", 0), "app", 0), func(p *Pod) { p.Failing[0].Instance = p.Containers["app"] }), healthy("w1")),
			want: "web-0:restart/LivenessFailed"},
		{name: "failure seen while the container was not running, then a new instance: held",
			in:   input(def, with(restarted(failing("web-0", 0), "app", 5*time.Second), func(p *Pod) { p.Failing[0].Instance = Instance{} }), healthy("w1")),
			want: "web-0:held/ContainerRestarted"},
		{name: "acted on, then restarted by the request: nothing to decide",
			in: input(def, with(restarted(failing("web-0", 0), "app", 5*time.Second), func(p *Pod) {
				p.Record = Record{Containers: map[string]ContainerRecord{"app": {Failure: metav1.Time{Time: t0}, Restarts: 1, LastRestart: metav1.NewMicroTime(t0)}}}
			}), healthy("w1")),
			want: ""},
		{name: "exits count not for the breaker: 1 real failure and 3 exits of 6",
			in: input(def, func() []Pod {
				pods := six(4)
				for i := 1; i < 4; i++ {
					pods[i] = exited(pods[i], "app")
				}
				return pods
			}()...),
			want: "web-0:restart/LivenessFailed web-1:held/ContainerNotRunning web-2:held/ContainerNotRunning web-3:held/ContainerNotRunning"},
		{name: "one container exited, the other fails for real: restart",
			in:   input(def, exited(failing("web-0", 0, "app", "sidecar"), "sidecar"), healthy("w1")),
			want: "web-0:restart/LivenessFailed"},

		// A silent node service: its results are not current.
		{name: "node service silent: held there, acted on elsewhere",
			in:   input(def, silent(failing("web-0", 0)), failing("web-1", time.Second), healthy("w2"), healthy("w3"), healthy("w4"), healthy("w5")),
			want: "web-1:restart/LivenessFailed web-0:held/NodeServiceSilent"},
		{name: "node service silent: a recorded, never created restart waits too",
			in: input(def, with(silent(failing("web-0", 0)), func(p *Pod) {
				p.Unstarted = []Failure{{Container: "app", Since: t0}}
			}), healthy("w1")),
			want: "web-0:held/NodeServiceSilent"},
		{name: "silent pods are not failing for the breaker: 1 live failure of 3 live pods",
			in: input(def, failing("web-0", 0), silent(failing("web-1", 0)), silent(failing("web-2", 0)), silent(failing("web-3", 0)),
				healthy("w4"), healthy("w5")),
			want: "web-0:restart/LivenessFailed web-1:held/NodeServiceSilent web-2:held/NodeServiceSilent web-3:held/NodeServiceSilent"},
		{name: "silent pods are not healthy for the breaker: 2 live failures of 2 live pods",
			in:   with2(input(def, failing("web-0", 0), failing("web-1", 0), silent(healthy("w2")), silent(healthy("w3"))), func(in *Input) { in.Budget.MaxUnavailable = 2 }),
			open: true, want: "web-0:held/CircuitBreakerOpen web-1:held/CircuitBreakerOpen"},

		// A node that is not Ready: the node is the suspect, not its containers.
		{name: "node not Ready: held there, acted on elsewhere",
			in:   input(def, notReady(failing("web-0", 0)), failing("web-1", time.Second), healthy("w2"), healthy("w3"), healthy("w4"), healthy("w5")),
			want: "web-1:restart/LivenessFailed web-0:held/NodeNotReady"},
		{name: "a NotReady node's pods are neither failing nor healthy for the breaker",
			in: input(def, failing("web-0", 0), notReady(failing("web-1", 0)), notReady(failing("web-2", 0)), notReady(failing("web-3", 0)),
				healthy("w4"), healthy("w5")),
			want: "web-0:restart/LivenessFailed web-1:held/NodeNotReady web-2:held/NodeNotReady web-3:held/NodeNotReady"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens := tt.tokens
			if tokens == nil {
				tokens = plenty()
			}
			ds, b := Decide(tt.in, tokens)
			if got := summary(ds); got != tt.want {
				t.Errorf("decisions:\n got %s\nwant %s", got, tt.want)
			}
			if b.Open != tt.open {
				t.Errorf("breaker open = %v, want %v (%d of %d failing)", b.Open, tt.open, b.Failing, b.Total)
			}
			if len(ds) > 0 && ds[0].RetryAfter != tt.retry {
				t.Errorf("retry after %s, want %s", ds[0].RetryAfter, tt.retry)
			}
			for _, d := range ds {
				if d.Message == "" {
					t.Errorf("%s: decision without a message", d.Pod.Name)
				}
			}
		})
	}
}

func with2(in Input, edit func(*Input)) Input { edit(&in); return in }

// notReady is p on a node that is not Ready.
func notReady(p Pod) Pod {
	p.NodeNotReady = "node b is not Ready (NodeStatusUnknown: Kubelet stopped posting node status.)"
	return p
}

// silent is p on a node whose node service is silent.
func silent(p Pod) Pod {
	p.NodeServiceSilent = "the probeshim node service on node b is silent since 2026-11-29T11:59:00Z: its result is not current"
	return p
}

// Each failing container is restarted on its own back-off, as the kubelet restarts each
// container: one in a long back-off holds neither the other container nor the pod. Before, the
// longest back-off among them held them all.
func TestDecidePerContainerBackoff(t *testing.T) {
	def := settings(nil)
	// app restarted 3 times, the last at t0+40s (40s back-off, 20s left at t0+60s); sidecar never.
	pod := with(failing("web-0", 50*time.Second, "app", "sidecar"), func(p *Pod) {
		p.Record = Record{Containers: map[string]ContainerRecord{"app": {Failure: metav1.Time{Time: t0.Add(30 * time.Second)},
			Restarts: 3, LastRestart: metav1.NewMicroTime(t0.Add(40 * time.Second))}}}
	})
	ds, _ := Decide(input(def, pod, healthy("w1")), plenty())
	if got := summary(ds); got != "web-0:restart/LivenessFailed" {
		t.Fatalf("decisions %s", got)
	}
	if len(ds[0].Failing) != 1 || ds[0].Failing[0].Container != "sidecar" {
		t.Errorf("restarts %+v, want the sidecar alone", ds[0].Failing)
	}
	// Both in back-off: held until the first of them is due, naming it.
	both := with(pod, func(p *Pod) {
		p.Record.Containers["sidecar"] = ContainerRecord{Failure: metav1.Time{Time: t0}, Restarts: 1, LastRestart: metav1.NewMicroTime(t0.Add(55 * time.Second))}
	})
	ds, _ = Decide(input(def, both, healthy("w1")), plenty())
	if got := summary(ds); got != "web-0:held/Backoff" || ds[0].RetryAfter != 5*time.Second || !strings.Contains(ds[0].Message, "container sidecar") {
		t.Errorf("decisions %s, retry %s, %q; want held 5s for the sidecar", got, ds[0].RetryAfter, ds[0].Message)
	}
}

// A restart recorded but never created is created only for the container instance it was decided
// for: a container that restarted since (the kubelet, a person) or stopped needs it no more.
func TestDecideUnstartedOnlyForTheSameInstance(t *testing.T) {
	def := settings(nil)
	unstarted := func(p Pod) Pod {
		p.Unstarted = []Failure{{Container: "app", Since: t0}}
		p.Failing = nil
		return p
	}
	ds, _ := Decide(input(def, unstarted(restarted(healthy("web-0"), "app", 10*time.Second)), healthy("w1")), plenty())
	if got := summary(ds); got != "web-0:held/ContainerRestarted" {
		t.Errorf("a restarted container's unstarted request: %s, want a quiet hold", got)
	}
	ds, _ = Decide(input(def, unstarted(healthy("web-0")), healthy("w1")), plenty())
	if got := summary(ds); got != "web-0:restart/LivenessFailed" {
		t.Errorf("the same instance's unstarted request: %s, want it created", got)
	}
}

// A restart recorded but never created (Pod.Unstarted) is a restart like any other: every switch,
// opt-out and protection holds it; only the observation and the backoff it passed before
// recording do not apply again.
func TestDecideUnstarted(t *testing.T) {
	def := settings(nil)
	// The record of the decision that was never carried out: the failure acted on, counted for
	// the backoff, the request named.
	unstarted := func(p Pod) Pod {
		decided := metav1.NewMicroTime(t0.Add(59 * time.Second))
		p.Record = Record{Request: "web-0-liveness-x", Requested: &decided, Containers: map[string]ContainerRecord{"app": {
			Failure: metav1.Time{Time: p.Failing[0].Since}, Restarts: 2, LastRestart: decided}}}
		p.Failing[0].Seen, p.Failing[0].Period = t0.Add(59*time.Second), time.Minute // still "young"
		p.Unstarted = []Failure{{Container: "app", Since: p.Failing[0].Since}}
		return p
	}
	pods := func() []Pod { return append([]Pod{unstarted(failing("web-0", 0))}, six(0)[1:]...) }
	for _, tt := range []struct {
		name   string
		in     Input
		tokens *fakeTokens
		want   string
	}{
		{name: "checks pass: resumed despite backoff and window", in: input(def, pods()...), want: "web-0:restart/LivenessFailed"},
		{name: "global switch off", in: input(settings(func(c *Config) { c.Enabled = new(bool) }), pods()...), want: "web-0:held/Disabled"},
		{name: "dry run", in: input(settings(func(c *Config) { c.DryRun = true }), pods()...), want: "web-0:dry_run/LivenessFailed"},
		{name: "config invalid", in: with2(input(def, pods()...), func(in *Input) { in.ConfigErr = errConfigGone }), want: "web-0:held/ConfigInvalid"},
		{name: "namespace opted out", in: with2(input(def, pods()...), func(in *Input) { in.NamespaceOptedOut = true }), want: "web-0:held/NamespaceOptedOut"},
		{name: "pod opted out", in: input(def, append([]Pod{with(unstarted(failing("web-0", 0)), func(p *Pod) { p.OptedOut = true })}, six(0)[1:]...)...),
			want: "web-0:held/PodOptedOut"},
		{name: "blacklisted", in: input(settings(func(c *Config) { c.Blacklist = Blacklist{Selectors: []string{"app=web"}} }), pods()...),
			want: "web-0:held/Blacklisted"},
		{name: "budget used by another pod", in: input(def, append([]Pod{unstarted(failing("web-0", 0)),
			with(healthy("web-1"), func(p *Pod) { p.Ready = false })}, six(0)[2:]...)...), want: "web-0:held/MaxUnavailable"},
		{name: "rate limited", in: input(def, pods()...), tokens: &fakeTokens{wait: time.Second}, want: "web-0:held/RateLimited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tokens := tt.tokens
			if tokens == nil {
				tokens = plenty()
			}
			ds, _ := Decide(tt.in, tokens)
			if got := summary(ds); got != tt.want {
				t.Errorf("decisions:\n got %s\nwant %s", got, tt.want)
			}
			if len(ds) != 1 || !ds[0].Resume {
				t.Errorf("want one decision resuming the recorded request, got %+v", ds)
			}
		})
	}
}

// The messages are what a person reads in kubectl describe pod: they name the cause and the
// number behind it.
func TestDecideMessages(t *testing.T) {
	ds, _ := Decide(input(settings(nil), six(6)...), plenty())
	if msg := ds[0].Message; !strings.Contains(msg, "6 of its 6 pods") || !strings.Contains(msg, "50%") {
		t.Errorf("breaker message: %s", msg)
	}
	ds, _ = Decide(input(settings(nil), six(2)...), plenty())
	if msg := ds[1].Message; !strings.Contains(msg, "maxUnavailable is 1") || !strings.Contains(msg, "default") {
		t.Errorf("maxUnavailable message: %s", msg)
	}
	ds, _ = Decide(input(settings(nil), six(1)...), plenty())
	if msg := ds[0].Message; !strings.Contains(msg, "container app") {
		t.Errorf("restart message: %s", msg)
	}
	ds, _ = Decide(input(settings(nil), exited(failing("web-0", 0), "app")), plenty())
	if msg := ds[0].Message; !strings.Contains(msg, "container app is not running") || strings.Contains(msg, "liveness probe failed") {
		t.Errorf("not running message: %s", msg)
	}
	if !Quiet(ds[0].Reason) {
		t.Errorf("%s is told on the pod: an exit must not read as a liveness failure", ds[0].Reason)
	}
	ds, _ = Decide(input(settings(nil), restarted(failing("web-0", 0), "app", time.Second)), plenty())
	if msg := ds[0].Message; !strings.Contains(msg, "restart count 2, now 3") {
		t.Errorf("restarted message: %s", msg)
	}
}

// Only the failing container still running is restarted; the one that exited is left to the
// kubelet.
func TestDecideRestartsOnlyRunningInstances(t *testing.T) {
	ds, _ := Decide(input(settings(nil), exited(failing("web-0", 0, "app", "sidecar"), "sidecar"), healthy("w1")), plenty())
	if len(ds) != 1 || ds[0].Outcome != Restart || len(ds[0].Failing) != 1 || ds[0].Failing[0].Container != "app" {
		t.Fatalf("decisions %+v, want a restart of app alone", ds)
	}
}

// The breaker needs a share strictly above its threshold and the minimum count.
func TestBreakerThresholds(t *testing.T) {
	tests := []struct {
		share           string
		min, fail, pods int
		open            bool
	}{
		{"50%", 2, 3, 6, false},
		{"50%", 2, 4, 6, true},
		{"50%", 2, 1, 1, false}, // one pod alone is not systemic
		{"50%", 1, 1, 1, true},
		{"0%", 2, 2, 100, true},
		{"100%", 2, 10, 10, false}, // never opens
		{"30%", 3, 2, 4, false},    // 50% but fewer than 3
	}
	for _, tt := range tests {
		s := settings(func(c *Config) {
			c.CircuitBreaker = CircuitBreaker{FailingShare: ptrTo(intstr.FromString(tt.share)), MinFailingPods: &tt.min}
		})
		var pods []Pod
		for i := range tt.pods {
			if i < tt.fail {
				pods = append(pods, failing(fmt.Sprint(i), 0))
			} else {
				pods = append(pods, healthy(fmt.Sprint(i)))
			}
		}
		if b := breakerState(input(s, pods...)); b.Open != tt.open {
			t.Errorf("share %s min %d: %d of %d failing: open = %v, want %v", tt.share, tt.min, tt.fail, tt.pods, b.Open, tt.open)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestMaxUnavailable(t *testing.T) {
	tests := []struct {
		v       intstr.IntOrString
		total   int
		roundUp bool
		atLeast int
		want    int
	}{
		{intstr.FromString("25%"), 6, false, 1, 1},
		{intstr.FromString("25%"), 8, false, 1, 2},
		{intstr.FromString("25%"), 1, false, 1, 1},
		{intstr.FromString("25%"), 6, true, 0, 2},
		{intstr.FromInt32(3), 6, false, 1, 3},
		{intstr.FromInt32(0), 6, false, 0, 0},
	}
	for _, tt := range tests {
		if got := MaxUnavailable(tt.v, tt.total, tt.roundUp, tt.atLeast); got != tt.want {
			t.Errorf("MaxUnavailable(%s, %d, %v, %d) = %d, want %d", tt.v.String(), tt.total, tt.roundUp, tt.atLeast, got, tt.want)
		}
	}
}

func TestRecord(t *testing.T) {
	s := settings(nil)
	var rec Record
	f := []Failure{{Container: "app", Since: t0}}
	rec = rec.withRestart(s, f, t0.Add(time.Second), "web-0-liveness-x")
	if c := rec.Containers["app"]; c.Restarts != 1 || !c.Failure.Time.Equal(t0) || rec.Request != "web-0-liveness-x" {
		t.Fatalf("after the first restart: %+v", rec)
	}
	parsed, err := ParseRecord(map[string]string{AnnotationRestarts: rec.format()})
	if err != nil || parsed.Request != rec.Request || parsed.Containers["app"].Restarts != 1 {
		t.Fatalf("round trip: %+v, %v", parsed, err)
	}
	// The same container fails again a minute later: the count grows.
	rec = rec.finished(nil).withRestart(s, []Failure{{Container: "app", Since: t0.Add(time.Minute)}}, t0.Add(time.Minute), "n2")
	if c := rec.Containers["app"]; c.Restarts != 2 {
		t.Fatalf("second restart counted %d", c.Restarts)
	}
	// A request that did not restart the container forgets the failure but keeps the count.
	done := rec.finished([]string{"app"})
	if c := done.Containers["app"]; !c.Failure.IsZero() || c.Restarts != 2 || done.Request != "" {
		t.Fatalf("after a failed request: %+v", done)
	}
	// Failing again after more than resetAfter: the count starts over.
	rec = rec.finished(nil).withRestart(s, []Failure{{Container: "app", Since: t0.Add(time.Hour)}}, t0.Add(time.Hour), "n3")
	if c := rec.Containers["app"]; c.Restarts != 1 {
		t.Fatalf("after a reset: %d restarts", c.Restarts)
	}
	if _, err := ParseRecord(map[string]string{AnnotationRestarts: "{"}); err == nil {
		t.Error("a broken record parsed")
	}
}

func TestRequestName(t *testing.T) {
	f := []Failure{{Container: "app", Since: t0}}
	a := RequestName("web-0", "u1", f, 1)
	if a != RequestName("web-0", "u1", f, 1) {
		t.Error("not deterministic")
	}
	if a == RequestName("web-0", "u1", []Failure{{Container: "app", Since: t0.Add(time.Second)}}, 1) {
		t.Error("a new failure got the old name")
	}
	if a == RequestName("web-0", "u1", f, 2) {
		t.Error("a retry got the failed attempt's name")
	}
	if a == RequestName("web-0", "u2", f, 1) {
		t.Error("a new pod of the same name got the old name")
	}
	long := RequestName(strings.Repeat("x", 300), "u1", f, 1)
	if len(long) > 253 || !strings.HasPrefix(a, "web-0-liveness-") {
		t.Errorf("names: %q (%d chars), %q", long[:20], len(long), a)
	}
}

// Disruption budgets are judged as their owners count them: each by its own Allowed, spent by
// the restarts of one Decide; a pod two PodDisruptionBudgets select is held as the eviction API
// refuses it; an unready pod goes by unhealthyPodEvictionPolicy; a budget whose status is stale
// allows nothing; pods no budget selects use the workload's default, with terminating pods
// counted as unavailable.
func TestDecideDisruptionBudgets(t *testing.T) {
	def := settings(nil)
	uids := func(names ...string) map[types.UID]bool {
		m := map[types.UID]bool{}
		for _, n := range names {
			m[types.UID("uid-"+n)] = true
		}
		return m
	}
	pdb := func(name string, allowed, healthy, desired int, pods ...string) DisruptionBudget {
		return DisruptionBudget{Kind: "PodDisruptionBudget", Name: "shop/" + name, Pods: uids(pods...),
			Allowed: allowed, Healthy: healthy, Desired: desired}
	}
	all := []string{"web-0", "web-1", "web-2", "web-3", "web-4", "web-5"}
	unready := func(p Pod) Pod { p.Ready = false; return p }
	for _, tt := range []struct {
		name    string
		in      Input
		want    string
		message string // in the first held decision's message
	}{
		{name: "a PDB allowing one: the oldest failure goes, the next waits for it",
			in:      with2(input(def, six(2)...), func(in *Input) { in.Disruption = []DisruptionBudget{pdb("web", 1, 6, 5, all...)} }),
			want:    "web-0:restart/LivenessFailed web-1:held/MaxUnavailable",
			message: "PodDisruptionBudget shop/web allows no more disruptions: 5 of its pods are healthy and it needs 5"},
		{name: "a PDB allowing two: its own count, not the workload's default of one",
			in:   with2(input(def, six(2)...), func(in *Input) { in.Disruption = []DisruptionBudget{pdb("web", 2, 6, 4, all...)} }),
			want: "web-0:restart/LivenessFailed web-1:restart/LivenessFailed"},
		{name: "a PDB whose pods are elsewhere unavailable allows none",
			in:   with2(input(def, six(1)...), func(in *Input) { in.Disruption = []DisruptionBudget{pdb("wide", 0, 8, 8, all...)} }),
			want: "web-0:held/MaxUnavailable"},
		{name: "two PDBs select the pod: held as the eviction API refuses",
			in: with2(input(def, six(1)...), func(in *Input) {
				in.Disruption = []DisruptionBudget{pdb("b", 3, 6, 3, all...), pdb("a", 3, 6, 3, "web-0")}
			}),
			want:    "web-0:held/MultipleBudgets",
			message: "selected by 2 PodDisruptionBudgets (shop/a, shop/b)"},
		{name: "a PDB and a PodUnavailableBudget: both must allow",
			in: with2(input(def, six(1)...), func(in *Input) {
				pub := pdb("pub", 0, 5, 5, all...)
				pub.Kind, pub.AlwaysAllowUnhealthy = "PodUnavailableBudget", true
				in.Disruption = []DisruptionBudget{pdb("web", 1, 6, 5, all...), pub}
			}),
			want: "web-0:held/MaxUnavailable", message: "PodUnavailableBudget shop/pub allows no more disruptions"},
		{name: "a stale status allows nothing",
			in: with2(input(def, six(1)...), func(in *Input) {
				b := pdb("web", 1, 6, 5, all...)
				b.Stale = "its status is behind its spec"
				in.Disruption = []DisruptionBudget{b}
			}),
			want: "web-0:held/MaxUnavailable", message: "allows no disruption now: its status is behind its spec"},
		{name: "an unready pod while the budget is met (IfHealthyBudget): goes without spending it",
			in: with2(input(def, append([]Pod{unready(failing("web-0", 0)), failing("web-1", time.Second), failing("web-2", 2*time.Second)}, six(0)[3:]...)...), func(in *Input) {
				in.Disruption = []DisruptionBudget{pdb("web", 1, 5, 4, all...)}
			}),
			want: "web-0:restart/LivenessFailed web-1:restart/LivenessFailed web-2:held/MaxUnavailable"},
		{name: "an unready pod while the budget is not met (IfHealthyBudget): held",
			in: with2(input(def, append([]Pod{unready(failing("web-0", 0))}, six(0)[1:]...)...), func(in *Input) {
				in.Disruption = []DisruptionBudget{pdb("web", 0, 4, 5, all...)}
			}),
			want: "web-0:held/MaxUnavailable", message: "has 4 healthy pods of the 5 it needs"},
		{name: "an unready pod, unhealthyPodEvictionPolicy AlwaysAllow: goes",
			in: with2(input(def, append([]Pod{unready(failing("web-0", 0))}, six(0)[1:]...)...), func(in *Input) {
				b := pdb("web", 0, 4, 5, all...)
				b.AlwaysAllowUnhealthy = true
				in.Disruption = []DisruptionBudget{b}
			}),
			want: "web-0:restart/LivenessFailed"},
		{name: "pods no budget selects keep the workload's default",
			in: with2(input(def, six(2)...), func(in *Input) {
				in.Disruption = []DisruptionBudget{pdb("canary", 0, 1, 1, "web-1")}
			}),
			want: "web-0:restart/LivenessFailed web-1:held/MaxUnavailable"},
		{name: "a terminating pod is unavailable for the default (4 pods, 25%: one)",
			in:      with2(input(def, six(1)[:4]...), func(in *Input) { in.Terminating = 1 }),
			want:    "web-0:held/MaxUnavailable",
			message: "1 of Deployment/shop/web's pods are unavailable, terminating or being recreated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds, _ := Decide(tt.in, plenty())
			if got := summary(ds); got != tt.want {
				t.Fatalf("decisions %s, want %s", got, tt.want)
			}
			if tt.message == "" {
				return
			}
			for _, d := range ds {
				if d.Outcome == Held {
					if !strings.Contains(d.Message, tt.message) {
						t.Errorf("held: %q, want it to say %q", d.Message, tt.message)
					}
					return
				}
			}
		})
	}
}
