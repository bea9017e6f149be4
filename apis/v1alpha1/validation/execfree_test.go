// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func TestValidateExecFreeMarker(t *testing.T) {
	const cmdPath = "spec.probes[0].probe.exec.command"
	withProbe := func(ann string, cmd ...string) *v1alpha1.PodProbeMarker {
		m := marker()
		m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: ann}
		m.Spec.Probes[0].Probe.Probe = execProbe(cmd...)
		return m
	}
	cases := []struct {
		name string
		m    *v1alpha1.PodProbeMarker
		want []wantErr
	}{
		{name: "cat of an absolute path", m: withProbe("true", "cat", "/tmp/idle")},
		{name: "opted out runs anything", m: withProbe("false", "bash", "/data/idle.sh")},
		{name: "no annotation runs anything", m: marker()},
		{name: "other handlers are not affected", m: func() *v1alpha1.PodProbeMarker {
			m := withProbe("true", "cat", "/tmp/idle")
			m.Spec.Probes = append(m.Spec.Probes, v1alpha1.PodContainerProbe{Name: "http", ContainerName: "game-server",
				Probe: v1alpha1.ContainerProbeSpec{Probe: httpProbe("/healthz", intstr.FromInt32(80))}})
			return m
		}()},
		{name: "value not a boolean", m: withProbe("yes", "cat", "/tmp/idle"),
			want: []wantErr{notSupported("metadata.annotations[probeshim.io/exec-free]", `"true", "false"`)}},
		{name: "another program", m: withProbe("true", "bash", "/data/idle.sh"),
			want: []wantErr{invalid(cmdPath, `exactly ["cat", "<absolute path>"]`)}},
		{name: "cat through a path", m: withProbe("true", "/bin/cat", "/tmp/idle"),
			want: []wantErr{invalid(cmdPath, "drop the annotation")}},
		{name: "relative path", m: withProbe("true", "cat", "tmp/idle"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "dot-dot", m: withProbe("true", "cat", "/tmp/../etc/shadow"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "trailing slash", m: withProbe("true", "cat", "/tmp/idle/"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "root", m: withProbe("true", "cat", "/"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "two files", m: withProbe("true", "cat", "/a", "/b"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "an option", m: withProbe("true", "cat", "-n"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "NUL", m: withProbe("true", "cat", "/tmp/a\x00b"), want: []wantErr{invalid(cmdPath, "")}},
		{name: "too long", m: withProbe("true", "cat", "/"+strings.Repeat("a", v1alpha1.MaxExecFreePath)),
			want: []wantErr{invalid(cmdPath, ""), {cmdPath, field.ErrorTypeTooLong, "4096 bytes"}}},
		{name: "/proc", m: withProbe("true", "cat", "/proc/1/environ"), want: []wantErr{invalid(cmdPath+"[1]", "do not read /proc or /sys")}},
		{name: "/sys", m: withProbe("true", "cat", "/sys"), want: []wantErr{invalid(cmdPath+"[1]", "drop the annotation")}},
		{name: "/proc as an exec", m: withProbe("false", "cat", "/proc/1/environ")},
		{name: "a name that starts like /proc", m: withProbe("true", "cat", "/procedures/idle")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, ValidatePodProbeMarker(tc.m), tc.want...)
		})
	}
}

// A marker admitted exec-free with a /proc path before the rule can still be updated (a
// finalizer removed); a new /proc path, or the annotation newly set, is refused.
func TestValidateExecFreeKernelFSUpdate(t *testing.T) {
	withProbe := func(ann string, file string) *v1alpha1.PodProbeMarker {
		m := marker()
		m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: ann}
		m.Spec.Probes[0].Probe.Probe = execProbe("cat", file)
		return m
	}
	const filePath = "spec.probes[0].probe.exec.command[1]"
	old := withProbe("true", "/proc/1/status")
	kept := old.DeepCopy()
	kept.Finalizers = nil
	checkErrs(t, ValidatePodProbeMarkerUpdate(kept, old))
	checkErrs(t, ValidatePodProbeMarkerUpdate(withProbe("true", "/sys/kernel/x"), old), invalid(filePath, "do not read /proc or /sys"))
	checkErrs(t, ValidatePodProbeMarkerUpdate(withProbe("true", "/proc/1/status"), withProbe("false", "/proc/1/status")),
		invalid(filePath, "do not read /proc or /sys"))
}

func TestValidateNodePodProbeExecFree(t *testing.T) {
	entry := func(execFree bool, cmd ...string) *v1alpha1.PodProbe {
		return &v1alpha1.PodProbe{Name: "p", Namespace: "ns", UID: "u", IP: "10.0.0.1",
			Probes: []v1alpha1.ContainerProbe{{Name: "m#idle", ContainerName: "c", ExecFree: execFree,
				Probe: v1alpha1.ContainerProbeSpec{Probe: execProbe(cmd...)}}}}
	}
	checkErrs(t, ValidatePodProbe(entry(true, "cat", "/tmp/idle"), field.NewPath("p")))
	checkErrs(t, ValidatePodProbe(entry(false, "sh", "-c", "cat /tmp/idle"), field.NewPath("p")))
	checkErrs(t, ValidatePodProbe(entry(true, "sh", "-c", "cat /tmp/idle"), field.NewPath("p")),
		invalid("p.probes[0].execFree", "an execFree probe must be"))
}
