// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command chartdoc writes the Helm chart's README (charts/probeshim/README.md) from README.md.tmpl,
// Chart.yaml, and a table of the values: every key of values.yaml with its comment, its default,
// and its type from values.schema.json (a key the schema does not describe is an error, so the two
// stay in step). `make generate` runs it. With -check it writes nothing and fails when the file is
// not what it would write (`make verify-generated`, and this package's test).
//
//	go run ./hack/chartdoc [-check] [-chart charts/probeshim]
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	yaml "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/probeshim/probeshim/internal/build/gendoc"
)

//go:embed README.md.tmpl
var readmeTemplate string

func main() {
	dir := flag.String("chart", "charts/probeshim", "the chart")
	gendoc.Main("chartdoc", "charts/probeshim/README.md", func() ([]byte, error) { return render(*dir) })
}

// checkDoc fails when path is not what render writes for the chart in dir.
func checkDoc(dir, path string) error {
	want, err := render(dir)
	if err != nil {
		return err
	}
	return gendoc.Check(path, want)
}

// row is one key of values.yaml.
type row struct {
	Key, Type, Default, Description string
}

func render(dir string) ([]byte, error) {
	meta, err := chartutil.LoadChartfile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	rawSchema, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(rawSchema, &schema); err != nil {
		return nil, fmt.Errorf("values.schema.json: %w", err)
	}
	rawValues, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(rawValues, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml: want a mapping")
	}
	s := &schemaDoc{root: schema}
	rows, err := s.rows(doc.Content[0], schema, "")
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("README.md").Parse(readmeTemplate)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = tmpl.Execute(&out, map[string]any{"Chart": meta, "Values": rows})
	return out.Bytes(), err
}

// schemaDoc resolves the schema's local references.
type schemaDoc struct{ root map[string]any }

// resolve follows a "$ref" to #/definitions/<name>; name is the definition's, or "".
func (s *schemaDoc) resolve(node map[string]any) (resolved map[string]any, name string, err error) {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node, "", nil
	}
	name, ok = strings.CutPrefix(ref, "#/definitions/")
	defs, _ := s.root["definitions"].(map[string]any)
	def, found := defs[name].(map[string]any)
	if !ok || !found {
		return nil, "", fmt.Errorf("values.schema.json: unresolved $ref %s", ref)
	}
	return def, name, nil
}

// rows lists the keys of the mapping n, described by the object schema obj, depth first.
func (s *schemaDoc) rows(n *yaml.Node, obj map[string]any, prefix string) ([]row, error) {
	props, _ := obj["properties"].(map[string]any)
	var out []row
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := prefix + k.Value
		raw, ok := props[k.Value].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("values.yaml: %s has no schema in values.schema.json: describe it there", key)
		}
		sub, name, err := s.resolve(raw)
		if err != nil {
			return nil, err
		}
		r := row{Key: key, Type: typeOf(sub, name), Description: comment(k.HeadComment)}
		if _, group := sub["properties"]; group && v.Kind == yaml.MappingNode {
			out = append(out, r)
			more, err := s.rows(v, sub, key+".")
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
			continue
		}
		if r.Default, err = defaultOf(v); err != nil {
			return nil, fmt.Errorf("values.yaml: %s: %w", key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// definitionTypes names the schema's definitions for people.
var definitionTypes = map[string]string{
	"port":         "integer (port)",
	"strings":      "list of strings",
	"stringMap":    "map of strings",
	"dnsLabel":     "string (DNS label)",
	"duration":     "duration (30s, 5m, 1h)",
	"intOrPercent": "integer or percentage",
}

func typeOf(sub map[string]any, definition string) string {
	if t, ok := definitionTypes[definition]; ok {
		return t
	}
	if enum, ok := sub["enum"].([]any); ok {
		var vals []string
		for _, e := range enum {
			vals = append(vals, fmt.Sprint(e))
		}
		return "one of " + strings.Join(vals, ", ")
	}
	t, _ := sub["type"].(string)
	if t == "array" {
		if items, ok := sub["items"].(map[string]any); ok {
			if it, ok := items["type"].(string); ok {
				return "list of " + it + "s"
			}
		}
		return "list"
	}
	return t
}

// defaultOf is the value as JSON, as one would pass it with --set-json.
func defaultOf(v *yaml.Node) (string, error) {
	var val any
	if err := v.Decode(&val); err != nil {
		return "", err
	}
	b, err := json.Marshal(val)
	return string(b), err
}

// comment is a key's head comment as one line of Markdown.
func comment(c string) string {
	var words []string
	for _, l := range strings.Split(c, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			words = append(words, l)
		}
	}
	return escape(strings.Join(words, " "))
}

// escape keeps text outside `code` from being read as HTML (<node>) and every "|" from ending a
// table cell.
func escape(s string) string {
	parts := strings.Split(s, "`")
	for i := range parts {
		if i%2 == 0 {
			parts[i] = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(parts[i])
		}
		parts[i] = strings.ReplaceAll(parts[i], "|", `\|`)
	}
	return strings.Join(parts, "`")
}
