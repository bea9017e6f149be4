// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// StatusConfigMap is the ConfigMap, in probeshim's namespace, where the detector reports what it
// saw. A ConfigMap because probeshim has no object of its own to hang a status on, the deployment
// already writes ConfigMaps in its namespace, and `kubectl get configmap -o yaml` reads it.
const StatusConfigMap = "probeshim-kruise-status"

// DefaultPeriod is how often the detector looks.
const DefaultPeriod = 30 * time.Second

// Event reasons, on the status ConfigMap.
const (
	ReasonConflict = "KruiseConflict"
	ReasonResolved = "KruiseConflictResolved"
)

// Detector looks for Kruise at start and every Period, publishes what it saw (status ConfigMap,
// Events, the probeshim_kruise_conflict gauge) and answers Holds for the controllers and webhooks.
// It runs on every replica (webhooks consult it); until its first look it holds everything.
type Detector struct {
	Reader    client.Reader // uncached: the objects are few and named
	Writer    client.Client // nil: publish nothing; uncached, like Reader
	Recorder  events.EventRecorder
	Namespace string // probeshim's, for the status ConfigMap
	// KruiseNamespace is where kruise-manager and kruise-daemon run.
	KruiseNamespace string
	Period          time.Duration
	// Elected is closed once this replica leads (the manager's Elected); nil: it publishes always.
	// Only the leader publishes: its controllers are the ones that hold, so the status ConfigMap
	// never says "held" while the replica that acts has not looked yet (up to a Period later).
	Elected <-chan struct{}

	mu       sync.RWMutex
	seen     bool
	obs      Observation
	gauge    *prometheus.GaugeVec
	lastKeys []string
}

// NewGauge registers the conflict gauge: 1 per live Kruise part and the probeshim part it
// conflicts with, 0 once it went away.
func (d *Detector) NewGauge(reg prometheus.Registerer) error {
	d.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "probeshim_kruise_conflict",
		Help: "1 while the OpenKruise part (kruise) does work probeshim also does (probeshim, work); probeshim holds that work off meanwhile.",
	}, []string{"kruise", "probeshim", "work"})
	return reg.Register(d.gauge)
}

// Holds reports why probeshim must not do w now ("" when it may).
func (d *Detector) Holds(w Work) string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.seen {
		return "OpenKruise detection has not run yet"
	}
	return d.obs.Holds(w)
}

// Observation returns the last look.
func (d *Detector) Observation() (Observation, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.obs, d.seen
}

// leads reports whether this replica publishes (see Elected).
func (d *Detector) leads() bool {
	if d.Elected == nil {
		return true
	}
	select {
	case <-d.Elected:
		return true
	default:
		return false
	}
}

// NeedLeaderElection is false: the webhooks of every replica ask Holds.
func (d *Detector) NeedLeaderElection() bool { return false }

// Start looks now, every Period and once more when this replica is elected, until ctx ends.
func (d *Detector) Start(ctx context.Context) error {
	period := d.Period
	if period <= 0 {
		period = DefaultPeriod
	}
	if d.Elected != nil {
		go func() { // publish as soon as this replica leads, not a Period after
			select {
			case <-d.Elected:
				d.Look(ctx)
			case <-ctx.Done():
			}
		}()
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { d.Look(ctx) }, period)
	return nil
}

// Look observes once and publishes the result.
func (d *Detector) Look(ctx context.Context) Observation {
	ns := d.KruiseNamespace
	if ns == "" {
		ns = DefaultNamespace
	}
	obs := Observe(ctx, d.Reader, ns)
	if rec, _, err := ReadRecord(ctx, d.Reader, d.Namespace); err != nil {
		obs.Unreadable = append(obs.Unreadable, "the handover record: "+err.Error())
	} else {
		for _, w := range []Work{WorkProbes, WorkCRR} {
			if _, ok := rec[w]; ok {
				obs.HandedOver = append(obs.HandedOver, w)
			}
		}
	}
	conflicts := obs.Conflicts()
	d.mu.Lock()
	first := !d.seen
	d.seen, d.obs = true, obs
	prev := d.lastKeys
	keys := make([]string, 0, len(conflicts))
	for _, c := range conflicts {
		keys = append(keys, c.Kruise+"|"+c.Probeshim+"|"+string(c.Work))
	}
	d.lastKeys = keys
	d.mu.Unlock()

	log := logf.FromContext(ctx).WithName("kruise")
	if d.gauge != nil {
		for _, k := range prev {
			if !slices.Contains(keys, k) {
				d.gauge.WithLabelValues(strings.Split(k, "|")...).Set(0)
			}
		}
		for _, k := range keys {
			d.gauge.WithLabelValues(strings.Split(k, "|")...).Set(1)
		}
	}
	changed := first || !slices.Equal(prev, keys)
	if changed {
		if len(conflicts) == 0 {
			log.Info("no OpenKruise part acts on what probeshim acts on", "installed", obs.Installed)
		}
		for _, what := range obs.Ignored {
			log.Info("not believed to be OpenKruise", "object", what)
		}
		for _, c := range conflicts {
			log.Info("OpenKruise part live: probeshim holds this work off", "kruise", c.Kruise, "probeshim", c.Probeshim, "work", c.Work, "why", c.Why)
		}
	}
	if d.Writer != nil && d.leads() {
		// The leader publishes; the replica whose write changed the ConfigMap tells the change (a
		// new leader's first write included), so a change is one Event, not one per replica.
		cm, wrote, err := d.publish(ctx, obs, conflicts)
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			log.Error(err, "writing the OpenKruise status", "configmap", d.Namespace+"/"+StatusConfigMap)
		} else if changed && wrote && d.Recorder != nil {
			for _, c := range conflicts {
				d.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, ReasonConflict, "HoldOff",
					"%s conflicts with probeshim's %s (%s): %s; probeshim holds %s off", c.Kruise, c.Probeshim, c.Work, c.Why, c.Work)
			}
			for _, k := range prev {
				if !slices.Contains(keys, k) {
					p := strings.Split(k, "|")
					d.Recorder.Eventf(cm, nil, corev1.EventTypeNormal, ReasonResolved, "Resume",
						"%s no longer live; probeshim's %s may act", p[0], p[1])
				}
			}
		}
	}
	return obs
}

// publish writes the status ConfigMap when it says something else, and reports whether it wrote:
// another replica that wrote the same first makes this one's write a no-op, or a conflict.
func (d *Detector) publish(ctx context.Context, obs Observation, conflicts []Conflict) (*corev1.ConfigMap, bool, error) {
	o, err := json.MarshalIndent(obs, "", "  ")
	if err != nil {
		return nil, false, err
	}
	if conflicts == nil {
		conflicts = []Conflict{}
	}
	c, err := json.MarshalIndent(conflicts, "", "  ")
	if err != nil {
		return nil, false, err
	}
	data := map[string]string{
		"observation": string(o),
		"conflicts":   string(c),
		"holds":       holdsLine(obs),
	}
	cm := &corev1.ConfigMap{}
	err = d.Reader.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: StatusConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: StatusConfigMap}, Data: data}
		err := d.Writer.Create(ctx, cm)
		return cm, err == nil, err
	} else if err != nil {
		return nil, false, err
	}
	if maps.Equal(cm.Data, data) {
		return cm, false, nil
	}
	cm.Data = data
	err = d.Writer.Update(ctx, cm)
	return cm, err == nil, err
}

func holdsLine(obs Observation) string {
	var parts []string
	for _, w := range []Work{WorkProbes, WorkCRR} {
		if why := obs.Holds(w); why != "" {
			parts = append(parts, string(w)+": held ("+why+")")
		} else {
			parts = append(parts, string(w)+": probeshim acts")
		}
	}
	return strings.Join(parts, "; ")
}

// GaugeFor returns the conflict gauge of one pair (for tests and debugging).
func (d *Detector) GaugeFor(kruisePart, probeshimPart string, w Work) prometheus.Gauge {
	return d.gauge.WithLabelValues(kruisePart, probeshimPart, string(w))
}
