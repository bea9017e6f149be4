// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package packaging holds the tests of the probeshim .deb and .rpm: they build the packages with
// packaging/build.sh, install, upgrade, remove and purge them on a real systemd booted with
// systemd-nspawn (package nspawn), and check the unit's behaviour and sandbox there. The packages
// themselves are described by nfpm.yaml; see docs/install/node.md for what a node operator does with them.
package packaging
