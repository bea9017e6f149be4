// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package config

import (
	"reflect"
	"slices"
	"strings"
)

// LiveSettings are the settings a reload (SIGHUP, `systemctl reload probeshim`) applies to the
// running service: each is read where it is used, on every use (the logger's level, Go's
// GOMAXPROCS), so a change rebuilds nothing. Every other setting is built into a component at
// start — the probe pools' runners and timeouts, the API clients' rate limiters, the listeners
// and sockets, the lease, the node's identity — and changing it there would mean stopping what
// runs on it, which is what a restart does, in the order the service knows.
var LiveSettings = []string{"logLevel", "maxProcs"}

// Reload is what reloading does with a configuration that loaded and validated.
type Reload struct {
	// Running is the configuration to run with from now on: the running one with the new
	// values of the live settings.
	Running *Config
	// Applied names the live settings that changed.
	Applied []string
	// RestartNeeded names the other settings that changed; Running keeps their running values
	// until the service restarts.
	RestartNeeded []string
}

// PlanReload compares next, a loaded and validated configuration, with the running one.
func PlanReload(running, next *Config) Reload {
	r := Reload{Running: new(Config)}
	*r.Running = *running // Config holds values only: this is a deep copy
	for _, name := range Changed(running, next) {
		if !slices.Contains(LiveSettings, name) {
			r.RestartNeeded = append(r.RestartNeeded, name)
			continue
		}
		r.Applied = append(r.Applied, name)
		setting(r.Running, name).Set(setting(next, name))
	}
	return r
}

// Changed names the settings whose values differ between a and b as the file names them
// (e.g. "probes.maxConcurrentExecs"), in the file's order.
func Changed(a, b *Config) []string {
	var out []string
	var walk func(a, b reflect.Value, prefix string)
	walk = func(a, b reflect.Value, prefix string) {
		for i := range a.NumField() {
			name := prefix + jsonName(a.Type().Field(i))
			if a.Field(i).Kind() == reflect.Struct {
				walk(a.Field(i), b.Field(i), name+".")
			} else if !a.Field(i).Equal(b.Field(i)) {
				out = append(out, name)
			}
		}
	}
	walk(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "")
	return out
}

// Value is the value of a setting named as in the file ("heartbeat.namespace"), nil when there
// is no such setting.
func (c *Config) Value(name string) any {
	v := setting(c, name)
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// setting finds a setting's field by its name in the file; the zero Value when there is none.
func setting(c *Config, name string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(name, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}
		}
		f, ok := fieldNamed(v.Type(), part)
		if !ok {
			return reflect.Value{}
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

func fieldNamed(t reflect.Type, name string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if jsonName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string { return strings.Split(f.Tag.Get("json"), ",")[0] }
