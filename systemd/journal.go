// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package systemd

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"

	"github.com/probeshim/probeshim/internal/termsafe"
)

// Journald fields. Under systemd every log entry is sent to journald with its
// logrus fields as journal fields, so a person can filter, e.g.
//
//	journalctl -u probeshim POD_NAME=web-0
//	journalctl -u probeshim NAMESPACE=shop POD_NAME=web-0 CONTAINER=app PROBE=idle
//	journalctl -u probeshim NODE=worker-3 PRIORITY=4
//
// The logrus field names of probeshim map as follows; any other field is
// sent upper-cased, with characters journald does not allow replaced by "_".
//
//	node          NODE           the node the service runs on
//	namespace     NAMESPACE      the pod's namespace
//	pod           POD_NAME       the pod's name
//	pod_uid       POD_UID        the pod's UID
//	container     CONTAINER      the container's name
//	container_id  CONTAINER_ID   the container's runtime ID
//	probe         PROBE          the probe's name
//	error         ERROR          the error, if any
//
// MESSAGE carries the message followed by the fields as key=value, so that
// plain `journalctl -u probeshim` shows them too; PRIORITY follows the level
// and SYSLOG_IDENTIFIER is the identifier given to NewJournalHook.
var fieldNames = map[string]string{
	"node":          "NODE",
	"namespace":     "NAMESPACE",
	"pod":           "POD_NAME",
	"pod_uid":       "POD_UID",
	"container":     "CONTAINER",
	"container_id":  "CONTAINER_ID",
	"probe":         "PROBE",
	logrus.ErrorKey: "ERROR",
}

// reserved journal fields that a logrus field must not override.
var reserved = map[string]bool{"MESSAGE": true, "PRIORITY": true, "SYSLOG_IDENTIFIER": true,
	"CODE_FILE": true, "CODE_LINE": true, "CODE_FUNC": true, "MESSAGE_ID": true}

// JournalField is the journald field name a logrus field is sent as.
func JournalField(logrusKey string) string {
	if n, ok := fieldNames[logrusKey]; ok {
		return n
	}
	var b strings.Builder
	for _, r := range strings.ToUpper(logrusKey) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), "_") // a leading _ marks trusted fields
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "F_" + name
	}
	if reserved[name] {
		name = "FIELD_" + name
	}
	return name
}

// JournalHook sends logrus entries to journald as structured entries.
type JournalHook struct {
	identifier string
	send       func(msg string, p journal.Priority, vars map[string]string) error
	fallback   io.Writer
}

// NewJournalHook returns a hook that sends to the local journald socket,
// with SYSLOG_IDENTIFIER identifier. An entry journald refuses is written
// to stderr as text instead of being lost.
func NewJournalHook(identifier string) *JournalHook {
	return &JournalHook{identifier: identifier, send: journal.Send, fallback: os.Stderr}
}

// Levels implements logrus.Hook.
func (h *JournalHook) Levels() []logrus.Level { return logrus.AllLevels }

// Fire implements logrus.Hook.
func (h *JournalHook) Fire(e *logrus.Entry) error {
	vars := make(map[string]string, len(e.Data)+4)
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Fields and messages carry tenants' text (probe output, names): control characters would
	// reach the terminal of whoever reads the journal (escape sequences, a carriage return that
	// overwrites the line), so they are written escaped, in the fields as in the message.
	var msg strings.Builder
	msg.WriteString(termsafe.Escape(e.Message))
	for _, k := range keys {
		v := termsafe.Escape(value(e.Data[k]))
		vars[JournalField(k)] = v
		msg.WriteString(" " + k + "=")
		if strings.ContainsAny(v, " \"=") || v == "" {
			v = strconv.Quote(v)
		}
		msg.WriteString(v)
	}
	if h.identifier != "" {
		vars["SYSLOG_IDENTIFIER"] = h.identifier
	}
	if e.Caller != nil {
		vars["CODE_FILE"] = e.Caller.File
		vars["CODE_LINE"] = strconv.Itoa(e.Caller.Line)
		vars["CODE_FUNC"] = e.Caller.Function
	}
	if err := h.send(msg.String(), priority(e.Level), vars); err != nil && h.fallback != nil {
		fmt.Fprintf(h.fallback, "%s level=%s msg=%q (journald: %v)\n", e.Time.Format("2006-01-02T15:04:05.000Z07:00"), e.Level, msg.String(), err)
	}
	return nil
}

func value(v any) string {
	switch v := v.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

func priority(l logrus.Level) journal.Priority {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return journal.PriCrit
	case logrus.ErrorLevel:
		return journal.PriErr
	case logrus.WarnLevel:
		return journal.PriWarning
	case logrus.InfoLevel:
		return journal.PriInfo
	default:
		return journal.PriDebug
	}
}

// UnderSystemd reports whether the process runs as a systemd service: its
// stderr is connected to the journal (JOURNAL_STREAM), or systemd set
// INVOCATION_ID.
func UnderSystemd() bool {
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return true
	}
	return os.Getenv("INVOCATION_ID") != ""
}

// SetupLogging makes l log to journald with structured fields when the
// process runs under systemd and journald is reachable, and as text with
// full timestamps to stderr otherwise. It reports whether journald is used.
func SetupLogging(l *logrus.Logger, identifier string) (journald bool) {
	if UnderSystemd() && journal.Enabled() {
		l.AddHook(NewJournalHook(identifier))
		// The hook does the writing; skip formatting text nobody reads.
		l.SetFormatter(discardFormatter{})
		l.SetOutput(io.Discard)
		return true
	}
	l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	l.SetOutput(os.Stderr)
	return false
}

type discardFormatter struct{}

func (discardFormatter) Format(*logrus.Entry) ([]byte, error) { return nil, nil }
