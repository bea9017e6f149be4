// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache

import corev1 "k8s.io/api/core/v1"

// Pack is what the pod informer of NewInformer stores for pod, for the benchmark.
func Pack(pod *corev1.Pod) any { return compact(Slim(pod)) }
