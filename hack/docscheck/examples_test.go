// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

const examplesDir = "../../docs/examples"

// exampleImages are what the demo cluster (and the e2e rig) serves: rig.TestImage and the game
// servers' busybox. An example naming another image would not run there.
var exampleImages = []string{"127.0.0.1:5000/probeshim/testbox:e2e", "busybox:1.36"}

// Every example (a folder of docs/examples) has a README.md, is listed in docs/examples/README.md,
// and its manifests decode strictly (no unknown or misspelt field) into kinds this repository's
// scheme knows, pass the project's validation, all in the one namespace the example creates,
// running only the demo's images.
// The e2e suite (e2e/cluster, testExamples) applies and checks them on the rig; this catches rot
// without one.
func TestExamples(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	index, err := os.ReadFile(filepath.Join(examplesDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		dir := filepath.Join(examplesDir, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Error("no README.md")
			}
			if !bytes.Contains(index, []byte("]("+e.Name()+"/")) {
				t.Errorf("docs/examples/README.md does not link %s/", e.Name())
			}
			top, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
			if len(top) == 0 {
				t.Fatal("no manifests (*.yaml) at the top of the folder")
			}
			// kubectl apply -f <folder> creates in file-name order: the namespace must come first.
			slices.Sort(top)
			if !firstIsNamespace(decoder, top[0]) {
				t.Errorf("%s: the first object of the first manifest (by file name) is not the example's Namespace", top[0])
			}
			checkExample(t, decoder, dir)
		})
	}
	if n < 6 {
		t.Errorf("%d examples, want at least 6 (issue 34)", n)
	}
}

// checkExample decodes every manifest under dir.
func checkExample(t *testing.T, decoder runtime.Decoder, dir string) {
	namespaces := map[string]bool{}
	var used []string // namespace of each namespaced object, by file:name
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		docs, err := yamlDocs(path)
		if err != nil {
			return err
		}
		for _, doc := range docs {
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				t.Errorf("%s: %s: %v", path, gvk.Kind, err)
				continue
			}
			if _, ok := obj.(*corev1.Namespace); ok {
				namespaces[m.GetName()] = true
				continue
			}
			if m.GetNamespace() == "" {
				t.Errorf("%s: %s %s has no namespace: the e2e test puts every object but the Namespace in its own", path, gvk.Kind, m.GetName())
			}
			used = append(used, m.GetNamespace()+" "+path+": "+gvk.Kind+" "+m.GetName())
			// What admission would refuse: the project's own validation of its kinds.
			var invalid error
			switch o := obj.(type) {
			case *v1alpha1.PodProbeMarker:
				invalid = validation.ValidatePodProbeMarker(o).ToAggregate()
			case *v1alpha1.ContainerRecreateRequest:
				invalid = validation.ValidateContainerRecreateRequest(o, "").ToAggregate()
			}
			if invalid != nil {
				t.Errorf("%s: %s %s: %v", path, gvk.Kind, m.GetName(), invalid)
			}
			if spec := podSpec(obj); spec != nil {
				var probes []v1alpha1.ContainerLivenessProbe
				for _, c := range spec.Containers {
					if c.LivenessProbe != nil {
						probes = append(probes, v1alpha1.ContainerLivenessProbe{Name: c.Name, LivenessProbe: *c.LivenessProbe})
					}
				}
				// The liveness probes an enhanced pod hands over, as the webhook checks them.
				if err := validation.ValidateContainerProbeContext(probes, field.NewPath(gvk.Kind, "livenessProbes")).ToAggregate(); err != nil {
					t.Errorf("%s: %s %s: %v", path, gvk.Kind, m.GetName(), err)
				}
				for _, c := range append(spec.InitContainers, spec.Containers...) {
					if !slices.Contains(exampleImages, c.Image) {
						t.Errorf("%s: %s %s container %s: image %q, want one of %v", path, gvk.Kind, m.GetName(), c.Name, c.Image, exampleImages)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(namespaces) != 1 {
		t.Errorf("%d Namespace objects, want 1: an example runs in a namespace of its own", len(namespaces))
	}
	for _, u := range used {
		if ns, _, _ := strings.Cut(u, " "); !namespaces[ns] {
			t.Errorf("%s: not in the example's namespace", u)
		}
	}
}

// yamlDocs splits a multi-document YAML file, leaving out empty documents.
func yamlDocs(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			out = append(out, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func podSpec(obj runtime.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	}
	return nil
}

// firstIsNamespace reports whether the first object of file is a Namespace.
func firstIsNamespace(decoder runtime.Decoder, file string) bool {
	docs, err := yamlDocs(file)
	if err != nil || len(docs) == 0 {
		return false
	}
	obj, _, err := decoder.Decode(docs[0], nil, nil)
	_, ok := obj.(*corev1.Namespace)
	return err == nil && ok
}
