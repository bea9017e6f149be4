// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HandoverConfigMap, in probeshim's namespace, records what was handed over from Kruise: one key
// per Work, holding the Kruise webhook entry removed for it (for --rollback). Its presence is the
// opt-in for the controller that keeps the entries removed.
const HandoverConfigMap = "probeshim-kruise-handover"

// Removed is what the handover took out of a Kruise webhook configuration.
type Removed struct {
	// Config is the configuration's name, Webhook the entry's.
	Config  string `json:"config"`
	Webhook string `json:"webhook"`
	// Entry is the entry as it was in .webhooks, Template as it was in the template annotation
	// (null when it was not there).
	Entry    json.RawMessage `json:"entry,omitempty"`
	Template json.RawMessage `json:"template,omitempty"`
}

// Record is the handover ConfigMap's content.
type Record map[Work]Removed

// ReadRecord reads the handover record; a missing ConfigMap is an empty record.
func ReadRecord(ctx context.Context, c client.Reader, namespace string) (Record, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: HandoverConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return Record{}, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	r := Record{}
	for _, w := range []Work{WorkProbes, WorkCRR} {
		raw, ok := cm.Data[string(w)]
		if !ok {
			continue
		}
		var rm Removed
		if err := json.Unmarshal([]byte(raw), &rm); err != nil {
			return nil, nil, err
		}
		r[w] = rm
	}
	return r, cm, nil
}

// EntryFor names the Kruise webhook entry of w and its configuration.
func EntryFor(w Work) (config, webhook string) {
	if w == WorkCRR {
		return MutatingConfigName, WebhookCRR
	}
	return ValidatingConfigName, WebhookPPM
}
