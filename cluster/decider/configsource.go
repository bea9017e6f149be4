// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// EventReasonConfigInvalid on the ConfigMap: it does not parse, and every restart is held until
// it does.
const EventReasonConfigInvalid = "InvalidConfig"

// errConfigGone holds every restart once the ConfigMap (or its document) that was read is gone.
var errConfigGone = errors.New("the ConfigMap " + ConfigMapName + " (or its " + ConfigKey +
	") was deleted after it was read; restore it to decide restarts again")

// configSource keeps the decider's settings in step with its ConfigMap. It watches that one
// object through a cache of its own, limited to the deployment's namespace and the ConfigMap's
// name, so the deployment needs no wider read access to ConfigMaps.
type configSource struct {
	cache     cache.Cache
	namespace string
	recorder  events.EventRecorder
	onChange  func(context.Context)
	valid     prometheus.Gauge // probeshim_decider_config_valid

	mu       sync.Mutex
	loaded   bool
	raw      *string // the document last read; nil when the ConfigMap or its key is absent
	settings *Settings
	err      error
}

func newConfigSource(mgr ctrl.Manager, namespace string, valid prometheus.Gauge) (*configSource, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", ConfigMapName)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("the decider's configuration cache: %w", err)
	}
	return &configSource{cache: c, namespace: namespace, recorder: mgr.GetEventRecorder(ControllerName),
		valid: valid, settings: DefaultSettings()}, nil
}

// current is the settings to decide with; err is set while the ConfigMap is invalid (settings
// are then the last valid ones); loaded is false until the ConfigMap was read once.
func (c *configSource) current() (s *Settings, loaded bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings, c.loaded, c.err
}

// NeedLeaderElection: only the leader decides, so only it needs the configuration.
func (c *configSource) NeedLeaderElection() bool { return true }

func (c *configSource) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- c.cache.Start(ctx) }()
	inf, err := c.cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: poke,
	}); err != nil {
		return err
	}
	if !c.cache.WaitForCacheSync(ctx) {
		return <-errc
	}
	c.load(ctx)
	for {
		select {
		case <-ctx.Done():
			return <-errc
		case <-changed:
			c.load(ctx)
		}
	}
}

// load reads the ConfigMap; a change of its document replaces the settings (or, when invalid,
// holds every restart with the reason) and has every failing workload decided again.
func (c *configSource) load(ctx context.Context) {
	logger := logf.FromContext(ctx).WithName(ControllerName).WithValues("configMap", c.namespace+"/"+ConfigMapName)
	cm := &corev1.ConfigMap{}
	err := c.cache.Get(ctx, types.NamespacedName{Namespace: c.namespace, Name: ConfigMapName}, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "reading the configuration; keeping the current one")
		return
	}
	var raw *string
	if err == nil {
		if doc, ok := cm.Data[ConfigKey]; ok {
			raw = &doc
		} else {
			logger.Info("the ConfigMap has no " + ConfigKey + "; using the defaults")
		}
	}

	c.mu.Lock()
	if c.loaded && equalDoc(c.raw, raw) {
		c.mu.Unlock()
		return
	}
	first := !c.loaded
	gone := c.loaded && c.raw != nil && raw == nil
	c.loaded, c.raw = true, raw
	var parseErr error
	if gone {
		// Deleted after it was read: whoever deleted it did not mean "the defaults" (which may
		// switch restarts back on that the ConfigMap switched off). Hold until it is back.
		c.err, parseErr = errConfigGone, errConfigGone
	} else if raw == nil {
		c.settings, c.err = DefaultSettings(), nil
	} else if s, err := ParseConfig(*raw); err != nil {
		c.err, parseErr = err, err // the last valid settings stay for everything but restarts
	} else {
		c.settings, c.err = s, nil
	}
	s := c.settings
	c.mu.Unlock()

	if gone {
		c.valid.Set(0)
		logger.Error(parseErr, "holding every liveness restart until the configuration is back")
	} else if parseErr != nil {
		c.valid.Set(0)
		logger.Error(parseErr, "invalid configuration: holding every liveness restart until it is fixed")
		c.recorder.Eventf(cm, nil, corev1.EventTypeWarning, EventReasonConfigInvalid, "Configure",
			"every liveness restart is held until this is fixed: %v", parseErr)
	} else {
		c.valid.Set(1)
		logger.Info("configuration loaded", "enabled", s.Enabled, "dryRun", s.DryRun, "qps", s.QPS, "burst", s.Burst,
			"defaultMaxUnavailable", s.DefaultMaxUnavailable.String(), "failingShare", s.FailingShare.String())
	}
	if !first && c.onChange != nil {
		c.onChange(ctx)
	}
}

func equalDoc(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
