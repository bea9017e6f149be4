// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// ExpandCommand expands $(VAR) references in an exec probe's command as the kubelet does for the
// probes it runs (kubecontainer.ExpandContainerCommandOnlyStatic): from the container's env as
// written in the pod spec, each name to its value (a valueFrom entry has none, so it expands to
// ""); "$$" is a literal "$"; a reference to a name the env does not have, or one not closed, is
// left as written. envFrom is not consulted, as by the kubelet.
func ExpandCommand(command []string, env []corev1.EnvVar) []string {
	if len(command) == 0 {
		return command
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(command))
	for i, arg := range command {
		out[i] = expand(arg, vars)
	}
	return out
}

func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		r, size := utf8.DecodeRuneInString(rest)
		switch r {
		case '$': // escaped
			b.WriteByte('$')
			i += size
		case '(':
			end := strings.IndexByte(rest, ')')
			if end < 0 { // not closed: "$(" stays, the rest is read on
				b.WriteString("$(")
				i++
				continue
			}
			name := rest[1:end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += end + 1
		default: // a lone '$' and what follows it, as written
			b.WriteByte('$')
			b.WriteString(rest[:size])
			i += size
		}
	}
	return b.String()
}
