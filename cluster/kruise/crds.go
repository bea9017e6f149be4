// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// CRDs are the CustomResourceDefinitions of the kinds probeshim serves. Beside OpenKruise they are
// Kruise's: its chart renders them as ordinary templates, so `helm uninstall kruise` deletes them
// and, with them, every PodProbeMarker, NodePodProbe and ContainerRecreateRequest.
var CRDs = []string{
	v1alpha1.Resource("podprobemarkers").String(),
	v1alpha1.Resource("nodepodprobes").String(),
	v1alpha1.Resource("containerrecreaterequests").String(),
}

// Helm's names (helm.sh/helm/v3/pkg/kube holds the first two, in a package that brings kubectl's
// code with it).
const (
	// HelmResourcePolicy set to HelmKeep makes Helm leave an object in place: on uninstall when
	// the release's own record carries it (the live object's annotation is not read then), on an
	// upgrade that drops the object when the live object carries it.
	HelmResourcePolicy = "helm.sh/resource-policy"
	HelmKeep           = "keep"
	// The annotations with which Helm marks the release that owns an object.
	HelmReleaseName      = "meta.helm.sh/release-name"
	HelmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// KeepCRDs is the handover's last step: Kruise may leave without taking probeshim's API with it.
// Each of the three CRDs is marked HelmKeep on the live object and, when a Helm release owns it
// (Kruise's chart), in that release's record, as a new revision of the release (so `helm history`
// shows it). `helm uninstall kruise` then keeps the CRDs and says so; `helm upgrade probeshim
// --set crds.install=true --take-ownership` makes them probeshim's afterwards.
func KeepCRDs(ctx context.Context, c client.Client, o HandoverOptions) error {
	p := o.printer()
	releases := map[types.NamespacedName][]string{}
	for _, name := range CRDs {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				p("CRD %s: not installed", name)
				continue
			}
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		if crd.Annotations[HelmResourcePolicy] != HelmKeep {
			if !o.DryRun {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, HelmResourcePolicy, HelmKeep)
				if err := c.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
					return fmt.Errorf("annotating CRD %s %s=%s: %w", name, HelmResourcePolicy, HelmKeep, err)
				}
			}
			p("CRD %s: annotated %s=%s (an upgrade of the chart that owns it no longer deletes it)", name, HelmResourcePolicy, HelmKeep)
		} else {
			p("CRD %s: already annotated %s=%s", name, HelmResourcePolicy, HelmKeep)
		}
		rel := types.NamespacedName{Namespace: crd.Annotations[HelmReleaseNamespace], Name: crd.Annotations[HelmReleaseName]}
		if rel.Name == "" || rel.Namespace == "" {
			p("CRD %s: no Helm release owns it; whoever installed it with kubectl must leave it out when removing Kruise's manifests", name)
			continue
		}
		releases[rel] = append(releases[rel], name)
	}
	keys := make([]types.NamespacedName, 0, len(releases))
	for k := range releases {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, rel := range keys {
		if err := keepInRelease(o, rel, releases[rel], p); err != nil {
			return err
		}
	}
	return nil
}

// keepInRelease marks the CRDs HelmKeep in the last revision of Helm release rel, stored as Helm
// stores it (Secrets of the release's namespace), by recording a new revision with that one change.
func keepInRelease(o HandoverOptions, rel types.NamespacedName, crds []string, p func(string, ...any)) error {
	if o.Secrets == nil {
		return fmt.Errorf("CRDs %s belong to Helm release %s: reading it needs the Secrets client", strings.Join(crds, ", "), rel)
	}
	st := storage.Init(driver.NewSecrets(o.Secrets(rel.Namespace)))
	last, err := st.Last(rel.Name)
	if err != nil {
		if errors.Is(err, driver.ErrReleaseNotFound) {
			p("Helm release %s, which the CRDs name as their owner, is not in the Secrets of %s: uninstalled already, or stored elsewhere (HELM_DRIVER), where `helm uninstall %s` would delete %s",
				rel, rel.Namespace, rel.Name, strings.Join(crds, ", "))
			return nil
		}
		return fmt.Errorf("reading Helm release %s: %w", rel, err)
	}
	manifest, marked, err := keepInManifest(last.Manifest, crds)
	if err != nil {
		return fmt.Errorf("the Helm release %s, revision %d: %w", rel, last.Version, err)
	}
	if len(marked) == 0 {
		p("Helm release %s, revision %d: already keeps %s on uninstall", rel, last.Version, strings.Join(crds, ", "))
		return nil
	}
	if last.Info == nil || last.Info.Status != release.StatusDeployed {
		status := release.StatusUnknown
		if last.Info != nil {
			status = last.Info.Status
		}
		return fmt.Errorf("the Helm release %s, revision %d, is %s: run the handover again once it is deployed (its uninstall would delete %s)",
			rel, last.Version, status, strings.Join(marked, ", "))
	}
	if o.DryRun {
		p("Helm release %s: would record revision %d marking %s %s=%s", rel, last.Version+1, strings.Join(marked, ", "), HelmResourcePolicy, HelmKeep)
		return nil
	}
	next := *last
	info := *last.Info
	info.LastDeployed = helmtime.Now()
	info.Description = "probeshim-cluster kruise handover: " + strings.Join(marked, ", ") + " kept on uninstall"
	next.Info, next.Version, next.Manifest = &info, last.Version+1, manifest
	if err := st.Create(&next); err != nil {
		return fmt.Errorf("recording revision %d of Helm release %s: %w", next.Version, rel, err)
	}
	prev := *last.Info
	prev.Status = release.StatusSuperseded
	last.Info = &prev
	if err := st.Update(last); err != nil {
		return fmt.Errorf("marking revision %d of Helm release %s superseded: %w", last.Version, rel, err)
	}
	p("Helm release %s: recorded revision %d marking %s %s=%s: `helm uninstall %s` keeps them",
		rel, next.Version, strings.Join(marked, ", "), HelmResourcePolicy, HelmKeep, rel.Name)
	return nil
}

// keepInManifest returns a release manifest with the CRDs of the given names annotated HelmKeep,
// and the names it annotated. Every other document is kept as it was, in its order.
func keepInManifest(manifest string, crds []string) (string, []string, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out strings.Builder
	var marked []string
	for _, k := range keys {
		doc := docs[k]
		var head releaseutil.SimpleHead
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return "", nil, fmt.Errorf("reading %s of its manifest: %w", k, err)
		}
		if head.Kind == "CustomResourceDefinition" && head.Metadata != nil && slices.Contains(crds, head.Metadata.Name) &&
			head.Metadata.Annotations[HelmResourcePolicy] != HelmKeep {
			var err error
			if doc, err = annotateKeep(doc); err != nil {
				return "", nil, fmt.Errorf("CRD %s in its manifest: %w", head.Metadata.Name, err)
			}
			marked = append(marked, head.Metadata.Name)
		}
		out.WriteString("\n---\n")
		out.WriteString(doc)
	}
	return out.String(), marked, nil
}

// annotateKeep adds the HelmKeep annotation to one YAML document, keeping its leading comment
// lines (Helm's "# Source:" line).
func annotateKeep(doc string) (string, error) {
	var comments strings.Builder
	rest := doc
	for strings.HasPrefix(rest, "#") {
		line, after, _ := strings.Cut(rest, "\n")
		comments.WriteString(line + "\n")
		rest = after
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(rest), &obj); err != nil {
		return "", err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return "", errors.New("no metadata")
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[HelmResourcePolicy] = HelmKeep
	meta["annotations"] = ann
	b, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	return comments.String() + string(b), nil
}
