// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/netns"
	shimruntime "github.com/probeshim/probeshim/shim/runtime"
)

// What the node service passes in (see Config) fits as it is, no adapters needed.
var (
	_ Runtime                               = (*shimruntime.Client)(nil)
	_ Containers                            = (*shimruntime.Tracker)(nil)
	_ interface{ Synced() <-chan struct{} } = (*shimruntime.Tracker)(nil)
	_ prober.Network                        = (*netns.Network)(nil)
	_ interface{ Forget(podUID string) }    = (*netns.Network)(nil)
)
