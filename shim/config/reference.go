// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package config

import (
	"reflect"
	"strings"
)

// FlagField is a command-line flag and the file field it sets.
type FlagField struct {
	Flag, Usage string
	// Field is the field's path in the file, its JSON names joined by dots, e.g.
	// "probes.maxConcurrentExecs".
	Field string
}

// FlagFields lists every command-line flag with the file field it overrides, in registration
// order: what the generated node configuration reference (hack/configdoc) shows beside each field.
func FlagFields() []FlagField {
	var c Config
	paths := map[uintptr]string{}
	fieldPaths(reflect.ValueOf(&c).Elem(), "", paths)
	out := make([]FlagField, len(flagSpecs))
	for i, s := range flagSpecs {
		out[i] = FlagField{Flag: s.name, Usage: s.usage, Field: paths[reflect.ValueOf(s.field(&c)).Pointer()]}
	}
	return out
}

// fieldPaths records the address of every leaf field of the struct v under its dotted JSON path.
func fieldPaths(v reflect.Value, prefix string, paths map[uintptr]string) {
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			fieldPaths(f, prefix+name+".", paths)
			continue
		}
		paths[f.Addr().Pointer()] = prefix + name
	}
}
