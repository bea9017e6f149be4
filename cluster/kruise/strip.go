// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Strip removes w's Kruise webhook entry from .webhooks and from the template annotation (so
// kruise-manager does not put it back). It returns what it removed (Entry and Template empty when
// already gone) and whether it wrote; dryRun writes nothing. A missing configuration is no error.
func Strip(ctx context.Context, c client.Client, w Work, dryRun bool) (Removed, bool, error) {
	cfgName, hook := EntryFor(w)
	rm := Removed{Config: cfgName, Webhook: hook}
	var obj client.Object
	var entries []json.RawMessage
	var keep func(drop string) // removes the entry from the typed object
	switch cfgName {
	case MutatingConfigName:
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		obj = m
		if err := c.Get(ctx, client.ObjectKey{Name: cfgName}, m); err != nil {
			return rm, false, client.IgnoreNotFound(err)
		}
		for _, h := range m.Webhooks {
			if h.Name == hook {
				b, _ := json.Marshal(h)
				entries = append(entries, b)
			}
		}
		keep = func(drop string) {
			m.Webhooks = slices.DeleteFunc(m.Webhooks, func(h admissionregistrationv1.MutatingWebhook) bool { return h.Name == drop })
		}
	default:
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		obj = v
		if err := c.Get(ctx, client.ObjectKey{Name: cfgName}, v); err != nil {
			return rm, false, client.IgnoreNotFound(err)
		}
		for _, h := range v.Webhooks {
			if h.Name == hook {
				b, _ := json.Marshal(h)
				entries = append(entries, b)
			}
		}
		keep = func(drop string) {
			v.Webhooks = slices.DeleteFunc(v.Webhooks, func(h admissionregistrationv1.ValidatingWebhook) bool { return h.Name == drop })
		}
	}
	if len(entries) > 0 {
		rm.Entry = entries[0]
	}
	ann := obj.GetAnnotations()
	tmpl, hasTmpl := ann[TemplateAnnotation]
	var newTmpl string
	tmplChanged := false
	if hasTmpl {
		var err error
		rm.Template, err = templateEntry(tmpl, hook)
		if err != nil {
			return rm, false, fmt.Errorf("the template annotation of %s: %w", cfgName, err)
		}
		newTmpl, tmplChanged, err = WithoutTemplateEntry(tmpl, hook)
		if err != nil {
			return rm, false, fmt.Errorf("the template annotation of %s: %w", cfgName, err)
		}
	}
	if len(entries) == 0 && !tmplChanged {
		return rm, false, nil
	}
	if dryRun {
		return rm, true, nil
	}
	keep(hook)
	if tmplChanged {
		ann[TemplateAnnotation] = newTmpl
		obj.SetAnnotations(ann)
	}
	// Update under the resourceVersion read: kruise-manager rewrites these objects, and a write
	// over its newer one would undo it.
	if err := c.Update(ctx, obj); err != nil {
		return rm, false, fmt.Errorf("removing %s from %s: %w", hook, cfgName, err)
	}
	return rm, true, nil
}

// Restore puts back what Strip removed, where it is missing.
func Restore(ctx context.Context, c client.Client, rm Removed, dryRun bool) (bool, error) {
	switch rm.Config {
	case MutatingConfigName:
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: rm.Config}, m); err != nil {
			return false, err
		}
		changed := false
		if len(rm.Entry) > 0 && !slices.ContainsFunc(m.Webhooks, func(h admissionregistrationv1.MutatingWebhook) bool { return h.Name == rm.Webhook }) {
			var h admissionregistrationv1.MutatingWebhook
			if err := json.Unmarshal(rm.Entry, &h); err != nil {
				return false, err
			}
			m.Webhooks, changed = append(m.Webhooks, h), true
		}
		ann, tc, err := withTemplateEntry(m.Annotations, rm)
		if err != nil {
			return false, err
		}
		if !changed && !tc {
			return false, nil
		}
		m.Annotations = ann
		if dryRun {
			return true, nil
		}
		return true, c.Update(ctx, m)
	case ValidatingConfigName:
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: rm.Config}, v); err != nil {
			return false, err
		}
		changed := false
		if len(rm.Entry) > 0 && !slices.ContainsFunc(v.Webhooks, func(h admissionregistrationv1.ValidatingWebhook) bool { return h.Name == rm.Webhook }) {
			var h admissionregistrationv1.ValidatingWebhook
			if err := json.Unmarshal(rm.Entry, &h); err != nil {
				return false, err
			}
			v.Webhooks, changed = append(v.Webhooks, h), true
		}
		ann, tc, err := withTemplateEntry(v.Annotations, rm)
		if err != nil {
			return false, err
		}
		if !changed && !tc {
			return false, nil
		}
		v.Annotations = ann
		if dryRun {
			return true, nil
		}
		return true, c.Update(ctx, v)
	}
	return false, apierrors.NewBadRequest("unknown configuration " + rm.Config)
}

func templateEntry(raw, name string) (json.RawMessage, error) {
	var hooks []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &hooks); err != nil {
		return nil, err
	}
	for _, h := range hooks {
		var n struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(h, &n); err != nil {
			return nil, err
		}
		if n.Name == name {
			return h, nil
		}
	}
	return nil, nil
}

func withTemplateEntry(ann map[string]string, rm Removed) (map[string]string, bool, error) {
	if len(rm.Template) == 0 {
		return ann, false, nil
	}
	raw, ok := ann[TemplateAnnotation]
	if !ok {
		raw = "[]"
	}
	if e, err := templateEntry(raw, rm.Webhook); err != nil || e != nil {
		return ann, false, err
	}
	var hooks []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &hooks); err != nil {
		return ann, false, err
	}
	b, err := json.Marshal(append(hooks, rm.Template))
	if err != nil {
		return ann, false, err
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[TemplateAnnotation] = string(b)
	return ann, true, nil
}
