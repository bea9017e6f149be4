// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/server"
)

// SetMaxProcs applies maxProcs: n CPUs run Go code at once, or for -1 Go's own default (one per
// CPU the service may use, following its cgroup's limit), or GOMAXPROCS from the environment
// when that is set, as at start.
func SetMaxProcs(n int) {
	if n > 0 {
		goruntime.GOMAXPROCS(n)
		return
	}
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
		goruntime.GOMAXPROCS(v)
		return
	}
	goruntime.SetDefaultGOMAXPROCS()
}

// reloadNotifier tells systemd that a reload runs (RELOADING=1) and that it is over (READY=1).
type reloadNotifier interface {
	Reloading()
	Reloaded()
}

// reloader reads the configuration again on SIGHUP (`systemctl reload probeshim`), applies the
// settings that can change while the service runs (config.LiveSettings) and names the changed
// others, which wait for a restart. A configuration that does not load or validate is refused:
// the running one stays, and the log and `probeshim status` say why until a reload succeeds.
type reloader struct {
	file string
	// load reads the file and the flags again, as at start; nil: no reloads.
	load   func() (*config.Config, error)
	logger *logrus.Logger // its level is logLevel
	log    *logrus.Entry
	// setMaxProcs applies maxProcs (SetMaxProcs).
	setMaxProcs func(int)
	notify      reloadNotifier
	// ready says whether systemd has had READY=1: before it, a reload's READY=1 would end the
	// start job while the service still starts, so it tells systemd nothing.
	ready func() bool

	mu      sync.Mutex
	running *config.Config
	status  server.ConfigStatus
}

// appliers change a live setting in the running service; every name of config.LiveSettings
// has one.
var appliers = map[string]func(r *reloader, c *config.Config){
	"logLevel": func(r *reloader, c *config.Config) { r.logger.SetLevel(c.Level()) },
	"maxProcs": func(r *reloader, c *config.Config) { r.setMaxProcs(c.MaxProcs) },
}

func newReloader(cfg *config.Config, file string, load func() (*config.Config, error), logger *logrus.Logger,
	log *logrus.Entry, notify reloadNotifier, ready func() bool,
) *reloader {
	running := *cfg
	return &reloader{file: file, load: load, logger: logger, log: log, setMaxProcs: SetMaxProcs, notify: notify,
		ready: ready, running: &running, status: server.ConfigStatus{File: file, Loaded: time.Now()}}
}

// reload reads the configuration again and applies it, or refuses it.
func (r *reloader) reload() {
	if r.ready() {
		r.notify.Reloading()
		defer r.notify.Reloaded()
	}
	next, err := r.load()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if err != nil {
		r.status.LastReload = &server.ReloadStatus{Time: now, Error: err.Error()}
		r.log.WithError(err).WithField("file", r.file).
			Error("configuration reload refused: running on with the configuration read before")
		return
	}
	plan := config.PlanReload(r.running, next)
	changes := make([]string, 0, len(plan.Applied))
	for _, name := range plan.Applied {
		changes = append(changes, fmt.Sprintf("%s %v -> %v", name, r.running.Value(name), next.Value(name)))
	}
	msg := "configuration reloaded: nothing to apply"
	if len(changes) > 0 {
		msg = "configuration reloaded: " + strings.Join(changes, ", ")
	}
	entry := r.log.WithField("file", r.file)
	if len(plan.Applied) > 0 {
		entry = entry.WithField("applied", strings.Join(plan.Applied, ","))
	}
	// Said under the level that shows it: before a quieter logLevel applies, after a louder one.
	quieter := next.Level() < logrus.InfoLevel
	if quieter {
		entry.Info(msg)
	}
	for _, name := range plan.Applied {
		appliers[name](r, next)
	}
	if !quieter {
		entry.Info(msg)
	}
	for _, name := range plan.RestartNeeded {
		r.log.WithFields(logrus.Fields{"file": r.file, "setting": name, "running": r.running.Value(name), "new": next.Value(name)}).
			Warn(name + " changed: restart the service to apply (systemctl restart probeshim)")
	}
	r.running = plan.Running
	r.status = server.ConfigStatus{File: r.file, Loaded: now, RestartNeeded: plan.RestartNeeded,
		LastReload: &server.ReloadStatus{Time: now, Applied: plan.Applied}}
}

// configStatus is the configuration's state for `probeshim status`.
func (r *reloader) configStatus() *server.ConfigStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	if st.LastReload != nil {
		last := *st.LastReload
		st.LastReload = &last
	}
	return &st
}
