// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package slogrus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func newTestLogger(level logrus.Level) (*logrus.Logger, *test.Hook) {
	l := logrus.New()
	l.SetOutput(io.Discard)
	l.SetLevel(level)
	return l, test.NewLocal(l)
}

func TestLevel(t *testing.T) {
	cases := []struct {
		in   slog.Level
		want logrus.Level
	}{
		{slog.LevelDebug - 4, logrus.TraceLevel},
		{slog.LevelDebug, logrus.DebugLevel},
		{slog.LevelDebug + 1, logrus.DebugLevel},
		{slog.LevelInfo, logrus.InfoLevel},
		{slog.LevelWarn, logrus.WarnLevel},
		{slog.LevelError, logrus.ErrorLevel},
		{slog.LevelError + 4, logrus.ErrorLevel},
	}
	for _, c := range cases {
		if got := Level(c.in); got != c.want {
			t.Errorf("Level(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Records reach logrus at the mapped level, and Enabled follows the logrus
// logger's level.
func TestLevelsThroughLogrus(t *testing.T) {
	l, hook := newTestLogger(logrus.InfoLevel)
	log := NewLogger(logrus.NewEntry(l))
	ctx := context.Background()
	if log.Enabled(ctx, slog.LevelDebug) {
		t.Error("Debug enabled on a logrus logger at Info")
	}
	if !log.Enabled(ctx, slog.LevelInfo) {
		t.Error("Info not enabled on a logrus logger at Info")
	}
	log.Debug("hidden")
	log.Info("i")
	log.Warn("w")
	log.Error("e")
	var got []logrus.Level
	for _, e := range hook.AllEntries() {
		got = append(got, e.Level)
	}
	if want := []logrus.Level{logrus.InfoLevel, logrus.WarnLevel, logrus.ErrorLevel}; !reflect.DeepEqual(got, want) {
		t.Errorf("levels %v, want %v", got, want)
	}
}

// The probe engine's fields arrive as the logrus fields the journal hook
// maps (namespace, pod, container, probe), beside the entry's own (node).
func TestFields(t *testing.T) {
	l, hook := newTestLogger(logrus.DebugLevel)
	log := NewLogger(l.WithField("node", "n1"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	errProbe := errors.New("connection refused")

	w := log.With("namespace", "ns", "pod", "web-0", "container", "app", "probe", "idle")
	r := slog.NewRecord(at, slog.LevelDebug, "probe error", 0)
	r.AddAttrs(slog.Any("error", errProbe), slog.Duration("late", time.Second),
		slog.Group("pool", slog.String("name", "exec")), slog.Attr{},
		slog.Group("", slog.Int("inlined", 1)))
	if err := w.Handler().Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	w.WithGroup("g").With("a", 1).WithGroup("").Info("grouped", "b", 2)

	entries := hook.AllEntries()
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
	e := entries[0]
	want := logrus.Fields{"node": "n1", "namespace": "ns", "pod": "web-0", "container": "app", "probe": "idle",
		logrus.ErrorKey: errProbe, "late": time.Second, "pool.name": "exec", "inlined": int64(1)}
	if !reflect.DeepEqual(e.Data, want) {
		t.Errorf("fields\n%v, want\n%v", e.Data, want)
	}
	if e.Message != "probe error" || e.Level != logrus.DebugLevel || !e.Time.Equal(at) {
		t.Errorf("entry %q at %v, %v; want %q at %v, %v", e.Message, e.Level, e.Time, "probe error", logrus.DebugLevel, at)
	}
	want = logrus.Fields{"node": "n1", "namespace": "ns", "pod": "web-0", "container": "app", "probe": "idle",
		"g.a": int64(1), "g.b": int64(2)}
	if !reflect.DeepEqual(entries[1].Data, want) {
		t.Errorf("grouped fields\n%v, want\n%v", entries[1].Data, want)
	}
}
