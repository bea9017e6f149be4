// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probeshim/probeshim/internal/build/gendoc"
)

// docs/reference/api.md is what the Go types say: a field added, removed or renamed, or one whose
// doc comment or validation changed, without the file regenerated fails here (and in make
// verify-generated).
func TestDocCurrent(t *testing.T) {
	doc, err := render("../../apis/v1alpha1", "../../apis/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	if err := gendoc.Check("../../docs/reference/api.md", doc); err != nil {
		t.Fatal(err)
	}
}

// Every field of a type the kinds reach is in the reference with its doc, optionality and
// validation; a type of the package is linked to its section.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	src := `package v1alpha1

// PodProbeMarker marks pods.
type PodProbeMarker struct {
	// Spec is wanted.
	Spec Spec ` + "`json:\"spec\"`" + `
	Hidden string ` + "`json:\"-\"`" + `
}

// NodePodProbe is a node's.
type NodePodProbe struct{}

// ContainerRecreateRequest restarts.
type ContainerRecreateRequest struct{}

// Spec says what.
type Spec struct {
	// Period is how often | pipes escaped.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10
	// +optional
	Period *int32 ` + "`json:\"period,omitempty\"`" + `
	// Mode picks one.
	// +kubebuilder:validation:XValidation:rule="self == 'A' || self == 'B'",message="A or B"
	// +kubebuilder:validation:Enum=A;B
	Mode string ` + "`json:\"mode\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(dir, "x_types.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := render(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## PodProbeMarker\n\nPodProbeMarker marks pods.\n",
		"| `spec` | [Spec](#spec) | Spec is wanted. |",
		"| `period` | `int32` | Period is how often \\| pipes escaped.<br>**optional**; Minimum `1`; default `10` |",
		"| `mode` | `string` | Mode picks one.<br>one of `A`, `B`; schema rule: <code>self == &#39;A&#39; &#124;&#124; self == &#39;B&#39;</code>, else A or B |",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the reference lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "Hidden") || strings.Contains(string(doc), "hidden") {
		t.Errorf("a json:\"-\" field is in the reference:\n%s", doc)
	}
}
