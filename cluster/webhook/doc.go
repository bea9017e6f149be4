// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package webhook holds the cluster deployment's admission handlers:
//
//   - the enhanced-liveness pod mutator, which moves opted-in containers' liveness probes into
//     the apps.kruise.io/container-probe-context annotation so the kubelet no longer acts on them;
//   - the PodProbeMarker validator (shared validation, immutable selector, and a
//     SubjectAccessReview for exec probes, which run commands inside containers);
//   - the NodePodProbe validator (shared validation: no host fields);
//   - the ContainerRecreateRequest mutator (labels, failurePolicy, preStop, ports and status
//     context from the pod) and validator (complete on CREATE, immutable spec and labels after);
//   - the parameters of the ValidatingAdmissionPolicies that pin NodePodProbe and
//     ContainerRecreateRequest writes to their owners (the policies themselves are manifests in
//     cluster/deploy, evaluated inside the API server).
//
// Register wires the handlers to a controller-runtime webhook server on the paths the
// webhook configurations in cluster/deploy name.
package webhook
