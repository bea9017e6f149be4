// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package decider is the liveness decider: it turns the enhanced liveness results the node
// services write into NodePodProbe status into container restarts through
// ContainerRecreateRequests, with a cluster-wide view that the kubelet, deciding on one node,
// does not have.
//
// Decide is the decision itself, pure and table-tested: per workload, every new failure is
// either restarted or held back for a reason (switches, blacklist, circuit breaker, an
// observation window, a request in flight, backoff, maxUnavailable, the rate limit). The
// controller around it (SetupWithManager) gathers a workload's state from the cache, records
// each decision on the pod before it creates the request, so a restart or a leader change never
// acts twice on one failure, deletes the requests it created once they finish, and reads its
// configuration from a ConfigMap at run time.
package decider
