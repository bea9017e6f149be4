// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// A release manifest as Helm stores it: documents after "---", each with its "# Source:" line.
const kruiseManifest = `
---
# Source: kruise/templates/apps.kruise.io_clonesets.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clonesets.apps.kruise.io
spec:
  group: apps.kruise.io
---
# Source: kruise/templates/apps.kruise.io_podprobemarkers.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.7.0
  name: podprobemarkers.apps.kruise.io
spec:
  group: apps.kruise.io
---
# Source: kruise/templates/apps.kruise.io_nodepodprobes.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodepodprobes.apps.kruise.io
spec:
  group: apps.kruise.io
---
# Source: kruise/templates/manager.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: podprobemarkers.apps.kruise.io
data:
  a: b
`

func TestKeepInManifest(t *testing.T) {
	out, marked, err := keepInManifest(kruiseManifest, CRDs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"podprobemarkers.apps.kruise.io", "nodepodprobes.apps.kruise.io"}; !slices.Equal(marked, want) {
		t.Errorf("marked %v, want %v", marked, want)
	}
	before, after := releaseutil.SplitManifests(kruiseManifest), releaseutil.SplitManifests(out)
	if len(after) != len(before) {
		t.Fatalf("%d documents after, %d before:\n%s", len(after), len(before), out)
	}
	for k, doc := range after {
		var head releaseutil.SimpleHead
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		kept := head.Metadata.Annotations[HelmResourcePolicy] == HelmKeep
		wantKept := head.Kind == "CustomResourceDefinition" && slices.Contains(marked, head.Metadata.Name)
		if kept != wantKept {
			t.Errorf("%s %s: kept %t, want %t", head.Kind, head.Metadata.Name, kept, wantKept)
		}
		if !strings.HasPrefix(doc, "# Source: ") {
			t.Errorf("%s lost its Source line:\n%s", k, doc)
		}
		if !wantKept && doc != before[k] {
			t.Errorf("%s changed:\n%s\nwas:\n%s", k, doc, before[k])
		}
	}
	if !strings.Contains(out, "controller-gen.kubebuilder.io/version: v0.7.0") {
		t.Error("the CRD's other annotations were lost")
	}
	if _, marked, err := keepInManifest(out, CRDs); err != nil || len(marked) != 0 {
		t.Errorf("a second pass marked %v (err %v)", marked, err)
	}
}
