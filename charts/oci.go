// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
)

// OCIRepository is where a release's chart lives under a registry: <registry>/charts/probeshim,
// the name `helm push probeshim-<version>.tgz oci://<registry>/charts` gives it, installed with
// `helm install probeshim oci://<registry>/charts/probeshim --version <version>`.
func OCIRepository(registryHost string) string {
	return strings.TrimSuffix(registryHost, "/") + "/charts"
}

// PushOCI pushes the packaged chart tgz (Package) to OCIRepository(registryHost) as Helm's OCI
// artifact, tagged with its version, and returns the reference and the manifest's digest. The
// manifest's creation annotation is created (the commit's time), so one commit pushes the same
// digest.
func PushOCI(tgz, registryHost string, created time.Time, opts ...registry.ClientOption) (ref, digest string, err error) {
	data, err := os.ReadFile(tgz)
	if err != nil {
		return "", "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", tgz, err)
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		return "", "", err
	}
	ref = OCIRepository(registryHost) + "/" + ch.Metadata.Name + ":" + ch.Metadata.Version
	res, err := c.Push(data, ref, registry.PushOptCreationTime(created.UTC().Format(time.RFC3339)))
	if err != nil {
		return "", "", fmt.Errorf("pushing the chart to %s: %w", ref, err)
	}
	return ref, res.Manifest.Digest, nil
}
