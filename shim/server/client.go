// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/probeshim/probeshim/internal/termsafe"
)

// FetchStatus reads the running service's status from its unix socket, for
// `probeshim status`.
func FetchStatus(ctx context.Context, socket string) (*Status, error) {
	body, err := getSocket(ctx, socket, "/status")
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("status from %s: %w", socket, err)
	}
	return &st, nil
}

// FetchCPUProfile records the running service's CPU for d and returns the
// profile (what `go tool pprof` reads).
func FetchCPUProfile(ctx context.Context, socket string, d time.Duration) ([]byte, error) {
	return getSocket(ctx, socket, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Round(time.Second)/time.Second))))
}

// getSocket GETs path from the service's unix socket.
func getSocket(ctx context.Context, socket, path string) ([]byte, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://probeshim"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is probeshim running? reading %s: %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("%s from %s: %s: %s", path, socket, resp.Status, strings.TrimSpace(string(b)))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s from %s: %w", path, socket, err)
	}
	return body, nil
}

// WriteStatus prints the status as a table for a person: one line per
// probe, with its result, how long ago it was probed and the first line of
// its message. Messages are tenants' output (what an exec probe printed,
// what a server answered): control and formatting characters are printed
// escaped, so none reaches the terminal as an escape sequence.
func WriteStatus(w io.Writer, st *Status) error {
	fmt.Fprintf(w, "node %s: %d probe(s) at %s\n", termsafe.Escape(st.Node), len(st.Probes), st.Time.Format(time.RFC3339))
	if state, problems := Assess(st); state != StateLive {
		fmt.Fprintf(w, "DEGRADED: %s\n", termsafe.Escape(strings.Join(problems, "; ")))
	}
	if c := st.Config; c != nil {
		if r := c.LastReload; r != nil && r.Error != "" {
			fmt.Fprintf(w, "CONFIG RELOAD REFUSED %s: %s; running with the configuration read %s\n", ago(st.Time, r.Time),
				termsafe.Escape(strings.Join(strings.Fields(r.Error), " ")), ago(st.Time, c.Loaded))
		}
		if len(c.RestartNeeded) > 0 {
			fmt.Fprintf(w, "config changes waiting for a restart (systemctl restart probeshim): %s\n",
				termsafe.Escape(strings.Join(c.RestartNeeded, ", ")))
		}
	}
	if hb := st.Heartbeat; hb != nil {
		state := "renewing"
		if !hb.Renewing {
			state = "NOT renewing: " + firstLine(hb.Reason, 200)
		}
		if hb.Path != "" {
			state += " (" + hb.Path + ")"
		}
		fmt.Fprintf(w, "lease %s/%s: last renewed %s, %s\n", termsafe.Escape(hb.Namespace), termsafe.Escape(hb.Name),
			ago(st.Time, hb.LastRenew), termsafe.Escape(state))
	}
	if r := st.Runners; r != nil {
		var pools []string
		for _, p := range r.Pools {
			pools = append(pools, fmt.Sprintf("%s %d of %d running, %d queued (%d per namespace), %d started late",
				p.Name, p.Running, p.Limit, p.Queued, p.PerNamespace, p.StartedLate))
		}
		fmt.Fprintf(w, "probe runners: %s\n", termsafe.Escape(strings.Join(pools, "; ")))
		if r.Late != "" {
			fmt.Fprintf(w, "PROBES START LATE: %s\n", termsafe.Escape(r.Late))
		}
	}
	if len(st.Probes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCONTAINER\tPROBE\tTYPE\tRESULT\tLAST PROBE\tSINCE\tMESSAGE")
	for _, p := range st.Probes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			termsafe.Escape(p.Namespace), termsafe.Escape(p.Pod), termsafe.Escape(p.Container), termsafe.Escape(p.Probe),
			termsafe.Escape(orDash(p.Type)), termsafe.Escape(orDash(p.Result)),
			ago(st.Time, p.LastProbeTime), ago(st.Time, p.LastTransitionTime), termsafe.Escape(firstLine(p.Message, 80)))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago renders t relative to now, e.g. "4s ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}

func firstLine(s string, limit int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > limit {
		s, cut = string(r[:limit]), true
	}
	if cut {
		s += "…"
	}
	return s
}

// States of a running node service, as `probeshim status` reports them (its exit code says the
// same: 0 live, 1 degraded; 3 when no service answers).
const (
	StateLive     = "live"     // the heartbeat is renewed and probes start on time
	StateDegraded = "degraded" // it runs, but the cluster does not hear from it, or probes start late
)

// Assess says whether the service is live or degraded, and why.
func Assess(st *Status) (state string, problems []string) {
	if hb := st.Heartbeat; hb != nil && !hb.Renewing {
		problems = append(problems, "the heartbeat Lease is not renewed: "+firstLine(hb.Reason, 200))
	}
	if r := st.Runners; r != nil && r.Late != "" {
		problems = append(problems, "probes start late: "+r.Late)
	}
	if len(problems) > 0 {
		return StateDegraded, problems
	}
	return StateLive, nil
}
