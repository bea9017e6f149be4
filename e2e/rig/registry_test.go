// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import "testing"

func TestRegistryRef(t *testing.T) {
	for _, tc := range []struct{ in, pushed, host string }{
		{Registry + "/probeshim/testbox:e2e", Registry + "/probeshim/testbox:e2e", Registry},
		{"busybox:1.36", Registry + "/library/busybox:1.36", "docker.io"},
		{"registry.k8s.io/e2e-test-images/nginx:1.14-2", Registry + "/e2e-test-images/nginx:1.14-2", "registry.k8s.io"},
		{"example.com/x/y@sha256:0123456789012345678901234567890123456789012345678901234567890123",
			Registry + "/x/y@sha256:0123456789012345678901234567890123456789012345678901234567890123", "example.com"},
	} {
		ref, host, err := RegistryRef(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if ref.String() != tc.pushed || host != tc.host {
			t.Errorf("RegistryRef(%s) = %s, %s; want %s, %s", tc.in, ref, host, tc.pushed, tc.host)
		}
	}
}
