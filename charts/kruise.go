// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart"
)

// KruiseStandIn stands in for OpenKruise's chart in tests of what its uninstall does: like
// Kruise's, it renders the CRDs of crdDir (apis/crds) as ordinary templates, which `helm uninstall`
// deletes unless the release marks them kept, and one ConfigMap, kruise-config.
func KruiseStandIn(crdDir string) (*chart.Chart, error) {
	files, err := filepath.Glob(filepath.Join(crdDir, "apps.kruise.io_*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD files in %s", crdDir)
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "kruise", Version: "1.9.0"}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + filepath.Base(f), Data: b})
	}
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/config.yaml",
		Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kruise-config\n")})
	return ch, nil
}
