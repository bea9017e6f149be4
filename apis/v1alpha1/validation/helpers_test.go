// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// wantErr pins one error: its path, its type, and a substring of its detail ("" matches any).
type wantErr struct {
	path   string
	typ    field.ErrorType
	detail string
}

func required(path, detail string) wantErr { return wantErr{path, field.ErrorTypeRequired, detail} }
func invalid(path, detail string) wantErr  { return wantErr{path, field.ErrorTypeInvalid, detail} }
func forbidden(path, detail string) wantErr {
	return wantErr{path, field.ErrorTypeForbidden, detail}
}
func duplicate(path string) wantErr { return wantErr{path, field.ErrorTypeDuplicate, ""} }
func notSupported(path, detail string) wantErr {
	return wantErr{path, field.ErrorTypeNotSupported, detail}
}

// checkErrs fails unless got matches want one to one, in order.
func checkErrs(t *testing.T, got field.ErrorList, want ...wantErr) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		g, w := got[i], want[i]
		ok = g.Field == w.path && g.Type == w.typ && strings.Contains(g.Detail, w.detail)
	}
	if ok {
		return
	}
	var b strings.Builder
	for _, e := range got {
		b.WriteString("\n  " + e.Error())
	}
	var wb strings.Builder
	for _, w := range want {
		wb.WriteString("\n  " + w.path + ": " + string(w.typ) + ": ..." + w.detail + "...")
	}
	t.Errorf("errors:%s\nwant:%s", b.String(), wb.String())
}

func execProbe(cmd ...string) corev1.Probe {
	return corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

func httpProbe(path string, port intstr.IntOrString, headers ...corev1.HTTPHeader) corev1.Probe {
	return corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: path, Port: port, HTTPHeaders: headers,
	}}}
}

func hostHeader(v string) corev1.HTTPHeader { return corev1.HTTPHeader{Name: "Host", Value: v} }

func ptr[T any](v T) *T { return &v }
