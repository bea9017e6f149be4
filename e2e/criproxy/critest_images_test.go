// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/e2e/rig/image"
)

// critestRegistry is where critest's image specs pull their test images from
// (cri-tools' pkg/validate/consts.go). The rig pushes images of the same names
// and properties to its registry, which containerd's hosts.toml makes the
// mirror of gcr.io, registry.k8s.io and k8s.gcr.io: the specs pull them by
// their own names, so the names they compare (repo tags) are theirs. The one
// image they pin by digest (test-image-digest@sha256:9700f9...) cannot be
// rebuilt here: that spec stays skipped.
const critestRegistry = "gcr.io/k8s-staging-cri-tools/"

// critestImages are the images critest's Image Manager, Image Consistency and
// Image Identifier Consistency specs pull.
func critestImages() []rig.Image {
	content := func(name string) []image.Entry {
		return []image.Entry{{Path: "/name", Mode: 0o644, Data: []byte(name + "\n")}}
	}
	var out []rig.Image
	add := func(ref, user string, entries []image.Entry) {
		// The Image Identifier Consistency specs start a container with the image's own
		// entrypoint: the pause program runs as any user.
		out = append(out, rig.Image{Ref: ref, User: user, Entries: entries, Entrypoint: []string{"/pause"},
			GoPrograms: map[string]string{"/pause": "github.com/probeshim/probeshim/e2e/testimages/pause"}})
	}
	// Pulled by tag, without a tag (latest) and by every kind of reference; only their names matter.
	for _, ref := range []string{"test-image-tag:test", "test-image-latest:latest", "test-image-tag:all"} {
		add(critestRegistry+ref, "", content(ref))
	}
	// Image status reports the config's user: a UID or a name, with or without a group.
	for ref, user := range map[string]string{
		"test-image-user-uid:latest":            "1002",
		"test-image-user-username:latest":       "www-data",
		"test-image-user-uid-group:latest":      "1003:1003",
		"test-image-user-username-group:latest": "www-data:www-data",
	} {
		add(critestRegistry+ref, user, content(ref))
	}
	// Three different images; then one image under three tags (the builder is reproducible:
	// equal specs give one digest).
	for _, ref := range []string{"test-image-1:latest", "test-image-2:latest", "test-image-3:latest"} {
		add(critestRegistry+ref, "", content(ref))
	}
	for _, ref := range []string{"test-image-tags:1", "test-image-tags:2", "test-image-tags:3"} {
		add(critestRegistry+ref, "", content("test-image-tags"))
	}
	// The SupplementalGroupsPolicy specs run `id -G` as uid 1000, which the image's /etc/group
	// puts in group 50000 (cri-tools' images/image-predefined-group).
	out = append(out, rig.Image{Ref: critestRegistry + "test-image-predefined-group:latest", Busybox: true, User: "1000",
		Entries: []image.Entry{
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\ndefault-user:x:1000:1000::/home/default-user:/bin/sh\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\ndefault-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n")},
			{Path: "/home/default-user", Dir: true},
		}})
	// One image from two registries.
	for _, ref := range []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"} {
		add(ref, "", content("pause:3.9"))
	}
	return out
}
