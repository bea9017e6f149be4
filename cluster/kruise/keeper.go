// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultKeepPeriod is how often the keeper looks: kruise-manager puts the entries back every
// minute, and for up to this long after that Kruise's webhook is live again.
const DefaultKeepPeriod = 2 * time.Second

// ReasonKept is the Event reason when the keeper removed an entry kruise-manager put back.
const ReasonKept = "KruiseWebhookRemoved"

// Keeper keeps the Kruise webhook entries of handed-over work removed, from .webhooks and from
// the template annotation, for as long as the handover record lists the work: kruise-manager
// rebuilds its configurations from the template every minute, and a Kruise upgrade rewrites
// both. Without the record (no handover, or after --rollback) it does nothing: the opt-in.
type Keeper struct {
	Client    client.Client // uncached: two named objects, no cluster-wide watch wanted
	Namespace string        // probeshim's, where the record is
	Period    time.Duration
	Recorder  events.EventRecorder
}

// NeedLeaderElection is true: one writer is enough.
func (k *Keeper) NeedLeaderElection() bool { return true }

// Start keeps the entries removed until ctx ends.
func (k *Keeper) Start(ctx context.Context) error {
	period := k.Period
	if period <= 0 {
		period = DefaultKeepPeriod
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { k.Keep(ctx) }, period)
	return nil
}

// Keep removes, once, what the record says must stay removed; it returns the entries it removed.
func (k *Keeper) Keep(ctx context.Context) []string {
	log := logf.FromContext(ctx).WithName("kruise-keeper")
	rec, cm, err := ReadRecord(ctx, k.Client, k.Namespace)
	if err != nil {
		log.Error(err, "reading the handover record")
		return nil
	}
	var removed []string
	for _, w := range []Work{WorkProbes, WorkCRR} {
		if _, ok := rec[w]; !ok {
			continue
		}
		rm, wrote, err := Strip(ctx, k.Client, w, false)
		if err != nil {
			log.Error(err, "removing a Kruise webhook entry again", "webhook", rm.Webhook)
			continue
		}
		if wrote {
			removed = append(removed, rm.Webhook)
			log.Info("Kruise put its webhook entry back; removed it again (handed over)", "webhook", rm.Webhook, "configuration", rm.Config)
			if k.Recorder != nil && cm != nil {
				k.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, ReasonKept, "Remove",
					"removed %s from %s again: %s was handed over to probeshim", rm.Webhook, rm.Config, w)
			}
		}
	}
	return removed
}
