// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
)

// TestPushOCI pushes the packaged chart to a registry (go-containerregistry's, on loopback) as
// make release PUBLISH=1 does, pulls it back as `helm install oci://…` does, and pushes it again:
// one commit, one digest.
func TestPushOCI(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tgz, err := Package(chartDir, t.TempDir(), "1.2.3~rc.1", created)
	if err != nil {
		t.Fatal(err)
	}

	ref, digest, err := PushOCI(tgz, host+"/probeshim", created, registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/probeshim/charts/probeshim:1.2.3-rc.1"; ref != want {
		t.Errorf("pushed to %s, want %s", ref, want)
	}
	c, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := c.Pull(ref)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Manifest.Digest != digest {
		t.Errorf("pulled manifest %s, pushed %s", pulled.Manifest.Digest, digest)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3-rc.1" || ch.Metadata.AppVersion != "1.2.3-rc.1" {
		t.Errorf("pulled chart version %s, appVersion %s; want 1.2.3-rc.1 both", ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	tgz2, err := Package(chartDir, t.TempDir(), "1.2.3~rc.1", created)
	if err != nil {
		t.Fatal(err)
	}
	if _, again, err := PushOCI(tgz2, host+"/probeshim", created, registry.ClientOptPlainHTTP()); err != nil || again != digest {
		t.Errorf("a second push of the same commit: digest %s (err %v), want %s", again, err, digest)
	}
}
