// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/probeshim/probeshim/shim/config"
)

func TestAppliersCoverLiveSettings(t *testing.T) {
	got := slices.Sorted(maps.Keys(appliers))
	if want := slices.Sorted(slices.Values(config.LiveSettings)); !slices.Equal(got, want) {
		t.Fatalf("appliers for %q, live settings %q: each live setting needs one, and only they", got, want)
	}
}

// One reload after another: what applies, what waits for a restart, a bad configuration refused
// with the running one kept, and systemd told only once it has had READY=1.
func TestReload(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.InfoLevel)
	j := &journal{}
	running := &config.Config{NodeName: "node-a", Kubeconfig: "/etc/kubernetes/kubelet.conf", LogLevel: "info", MaxProcs: 1}
	var next *config.Config
	var loadErr error
	ready := false
	r := newReloader(running, "/etc/probeshim/config.yaml", func() (*config.Config, error) {
		if loadErr != nil {
			return nil, loadErr
		}
		c := *next
		return &c, nil
	}, logger, logger.WithField("node", "node-a"), recordingNotifier{j: j}, func() bool { return ready })
	var maxProcs []int
	r.setMaxProcs = func(n int) { maxProcs = append(maxProcs, n) }
	loaded := r.configStatus().Loaded

	// messages takes what was logged at level since the last call for it.
	seen := map[logrus.Level]int{}
	messages := func(level logrus.Level) []string {
		var out []string
		entries := hook.AllEntries()
		for _, e := range entries[seen[level]:] {
			if e.Level == level {
				out = append(out, e.Message)
			}
		}
		seen[level] = len(entries)
		return out
	}

	// Before READY=1: applied, systemd told nothing.
	next = &config.Config{NodeName: "node-a", Kubeconfig: "/etc/probeshim/kubeconfig", LogLevel: "debug", MaxProcs: 1}
	r.reload()
	if logger.GetLevel() != logrus.DebugLevel {
		t.Fatalf("log level %s after reloading logLevel: debug", logger.GetLevel())
	}
	if got := messages(logrus.InfoLevel); !slices.Equal(got, []string{"configuration reloaded: logLevel info -> debug"}) {
		t.Fatalf("info: %q", got)
	}
	if got := messages(logrus.WarnLevel); !slices.Equal(got, []string{"kubeconfig changed: restart the service to apply (systemctl restart probeshim)"}) {
		t.Fatalf("warnings: %q", got)
	}
	st := r.configStatus()
	if st.LastReload == nil || st.LastReload.Error != "" || !slices.Equal(st.LastReload.Applied, []string{"logLevel"}) ||
		!slices.Equal(st.RestartNeeded, []string{"kubeconfig"}) || st.File != "/etc/probeshim/config.yaml" || st.Loaded.Before(loaded) {
		t.Fatalf("status %+v, last reload %+v", st, st.LastReload)
	}
	if r.running.Kubeconfig != "/etc/kubernetes/kubelet.conf" || r.running.LogLevel != "debug" {
		t.Fatalf("running %+v: want the new logLevel, the old kubeconfig", r.running)
	}
	if lines := j.get(); len(lines) != 0 {
		t.Fatalf("systemd told %q before READY=1", lines)
	}

	// A configuration that does not load: refused, the running one stays, and says why.
	ready = true
	loadErr = errors.New(`config file /etc/probeshim/config.yaml: unknown field "logLevl"`)
	r.reload()
	if logger.GetLevel() != logrus.DebugLevel {
		t.Fatalf("log level %s after a refused reload", logger.GetLevel())
	}
	if got := messages(logrus.ErrorLevel); !slices.Equal(got, []string{"configuration reload refused: running on with the configuration read before"}) {
		t.Fatalf("errors: %q", got)
	}
	refused := r.configStatus()
	if refused.LastReload == nil || !strings.Contains(refused.LastReload.Error, `unknown field "logLevl"`) ||
		!refused.Loaded.Equal(st.Loaded) || !slices.Equal(refused.RestartNeeded, []string{"kubeconfig"}) {
		t.Fatalf("status after a refused reload %+v, last reload %+v", refused, refused.LastReload)
	}
	if lines := j.get(); !slices.Equal(lines, []string{"RELOADING", "RELOADED"}) {
		t.Fatalf("systemd told %q, want RELOADING then READY=1 again", lines)
	}

	// Fixed: the refusal is gone; maxProcs applies; a quieter logLevel still says the reload.
	loadErr = nil
	next = &config.Config{NodeName: "node-a", Kubeconfig: "/etc/kubernetes/kubelet.conf", LogLevel: "error", MaxProcs: 4}
	r.reload()
	if logger.GetLevel() != logrus.ErrorLevel || !slices.Equal(maxProcs, []int{4}) {
		t.Fatalf("log level %s, maxProcs applied %v", logger.GetLevel(), maxProcs)
	}
	if got := messages(logrus.InfoLevel); !slices.Equal(got, []string{"configuration reloaded: logLevel debug -> error, maxProcs 1 -> 4"}) {
		t.Fatalf("info: %q", got)
	}
	if st := r.configStatus(); st.LastReload.Error != "" || len(st.RestartNeeded) != 0 {
		t.Fatalf("status after a good reload %+v, last reload %+v", st, st.LastReload)
	}

	// A louder logLevel says the reload under it; then a reload with nothing changed.
	next.LogLevel = "info"
	r.reload()
	r.reload()
	if got := messages(logrus.InfoLevel); !slices.Equal(got, []string{"configuration reloaded: logLevel error -> info", "configuration reloaded: nothing to apply"}) {
		t.Fatalf("info: %q", got)
	}
}

// SIGHUP reaches a running service: a bad configuration is refused while it keeps running, and
// `probeshim status` says so until a good one.
func TestReloadWhileRunning(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(nil)
	f.run()
	eventually(t, "READY", func() bool { return f.has("READY probing for node node-a") })

	f.mu.Lock()
	f.loadConfig = func() (*config.Config, error) { return nil, errors.New(`logLevel: "loud" is not one of panic, fatal`) }
	f.mu.Unlock()
	f.reloads <- syscall.SIGHUP
	eventually(t, "the refusal in the status", func() bool {
		c := f.status().Config
		return c != nil && c.LastReload != nil && strings.Contains(c.LastReload.Error, `"loud"`)
	})
	if c := f.status().Config; c.File != "/etc/example/config.yaml" {
		t.Fatalf("config status %+v", c)
	}
	eventually(t, "READY=1 after the reload", func() bool {
		lines := f.j.get()
		i := slices.Index(lines, "RELOADING")
		return i >= 0 && slices.Contains(lines[i:], "RELOADED")
	})
	if code, body := f.readyz(); code != 200 {
		t.Fatalf("/readyz after a refused reload = %d %s", code, body)
	}

	f.mu.Lock()
	f.loadConfig = func() (*config.Config, error) { c := *f.svc.cfg; c.LogLevel = "warn"; return &c, nil }
	f.mu.Unlock()
	f.reloads <- syscall.SIGHUP
	eventually(t, "the applied reload in the status", func() bool {
		c := f.status().Config
		return c.LastReload != nil && c.LastReload.Error == "" && slices.Equal(c.LastReload.Applied, []string{"logLevel"})
	})
	if f.svc.log.Logger.GetLevel() != logrus.WarnLevel {
		t.Fatalf("log level %s after reloading logLevel: warn", f.svc.log.Logger.GetLevel())
	}
}
