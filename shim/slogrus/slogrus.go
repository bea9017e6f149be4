// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package slogrus adapts log/slog to logrus: the probe engine, a library,
// logs through a *slog.Logger, and the node service sends those records on
// to its logrus logger, so that they reach journald with the same fields
// (node, namespace, pod, container, probe) as the rest of its logs.
package slogrus

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// NewLogger returns a *slog.Logger whose records go to e, with e's fields.
func NewLogger(e *logrus.Entry) *slog.Logger { return slog.New(&Handler{entry: e}) }

// Handler is a slog.Handler that logs through a logrus entry. Attributes
// become logrus fields; those of a group are named "group.key".
type Handler struct {
	entry  *logrus.Entry
	prefix string // the open groups, each followed by "."
}

var _ slog.Handler = (*Handler)(nil)

// Level maps a slog level to the logrus level its records are logged at.
// slog's levels are integers with room between the named ones; each range
// maps to the logrus level of its lower bound.
func Level(l slog.Level) logrus.Level {
	switch {
	case l < slog.LevelDebug:
		return logrus.TraceLevel
	case l < slog.LevelInfo:
		return logrus.DebugLevel
	case l < slog.LevelWarn:
		return logrus.InfoLevel
	case l < slog.LevelError:
		return logrus.WarnLevel
	default:
		return logrus.ErrorLevel
	}
}

// Enabled follows the logrus logger's level, so that callers can skip
// building what would not be logged.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	return h.entry.Logger.IsLevelEnabled(Level(l))
}

// Handle logs r through the entry at the mapped level.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	fields := make(logrus.Fields, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		addAttr(fields, h.prefix, a)
		return true
	})
	e := h.entry.WithContext(ctx).WithFields(fields)
	if !r.Time.IsZero() {
		e = e.WithTime(r.Time)
	}
	e.Log(Level(r.Level), r.Message)
	return nil
}

// WithAttrs returns a handler whose entry carries attrs as fields.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make(logrus.Fields, len(attrs))
	for _, a := range attrs {
		addAttr(fields, h.prefix, a)
	}
	return &Handler{entry: h.entry.WithFields(fields), prefix: h.prefix}
}

// WithGroup returns a handler that names later attributes "name.key".
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &Handler{entry: h.entry, prefix: h.prefix + name + "."}
}

// addAttr adds a to fields under prefix, following slog's rules: empty
// attributes are dropped, a group without a key is inlined.
func addAttr(fields logrus.Fields, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() != slog.KindGroup {
		fields[prefix+a.Key] = a.Value.Any()
		return
	}
	if a.Key != "" {
		prefix += a.Key + "."
	}
	for _, g := range a.Value.Group() {
		addAttr(fields, prefix, g)
	}
}
