// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package systemd is probeshim's glue to systemd: readiness, status, reload
// and stopping notifications (sd_notify), a watchdog that pings only while the
// service is healthy, and logging to journald with fields a person can
// filter on. Every function is a no-op outside systemd, so the service runs
// the same from a shell.
package systemd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Notify sends the given sd_notify assignments (e.g. "READY=1") in one
// message. It does nothing when the service manager did not ask for
// notifications (no NOTIFY_SOCKET).
func Notify(states ...string) error {
	_, err := daemon.SdNotify(false, strings.Join(states, "\n"))
	return err
}

// Ready tells systemd that start-up is complete, with a status line.
func Ready(status string) error {
	return Notify(daemon.SdNotifyReady, statusLine(status))
}

// Status sets the one-line status `systemctl status` shows, e.g. what the
// service waits for.
func Status(status string) error { return Notify(statusLine(status)) }

// Reloading tells systemd that the service reloads its configuration; Reloaded ends it.
// MONOTONIC_USEC is the time it began, which sd_notify(3) asks for with RELOADING=1 (systemd
// 253 and later match it against the reload they asked for; older ones ignore it).
func Reloading() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	return Notify(daemon.SdNotifyReloading, fmt.Sprintf("MONOTONIC_USEC=%d", ts.Nano()/1000))
}

// Reloaded tells systemd that a reload is over, whatever its outcome: READY=1 again.
func Reloaded() error { return Notify(daemon.SdNotifyReady) }

// Stopping tells systemd that shutdown has begun.
func Stopping() error { return Notify(daemon.SdNotifyStopping, statusLine("stopping")) }

func statusLine(s string) string {
	// A newline would end the assignment and start a bogus one.
	return "STATUS=" + strings.Join(strings.Fields(s), " ")
}

// WatchdogInterval is how often the watchdog must be pinged: half of
// WATCHDOG_USEC, or 0 when systemd has no watchdog for this process.
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0
	}
	return d / 2
}

// Watchdog pings systemd's watchdog (WATCHDOG=1) every WatchdogInterval for
// as long as health returns nil, so a service whose loops are stuck is
// restarted by systemd rather than kept alive by a timer. health gets a
// context bounded by the interval. Watchdog returns when ctx is done, at
// once when there is no watchdog. A failing check is logged on each change
// and shown in the status line.
func Watchdog(ctx context.Context, health func(context.Context) error, log logrus.FieldLogger) {
	interval := WatchdogInterval()
	if interval == 0 {
		return
	}
	if log == nil {
		log = logrus.StandardLogger()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr error
	healthy := true
	for {
		hctx, cancel := context.WithTimeout(ctx, interval)
		err := health(hctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			_ = Notify(daemon.SdNotifyWatchdog) // a lost ping is a missed one: systemd acts on that
			if !healthy {
				log.Info("healthy again; watchdog pings resumed")
				_ = Status("running")
			}
			healthy = true
		case healthy || lastErr == nil || err.Error() != lastErr.Error():
			log.WithError(err).Warn("unhealthy; watchdog pings withheld")
			_ = Status("unhealthy: " + err.Error())
			healthy = false
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
