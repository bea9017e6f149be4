// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Workload is what a pod belongs to for the purpose of availability: its controller, with a
// ReplicaSet resolved to its Deployment; a bare pod is its own workload.
type Workload struct {
	Kind      string
	Namespace string
	Name      string
}

func (w Workload) String() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// Pod is what the decision needs to know of one pod of the workload.
type Pod struct {
	Name string
	UID  types.UID
	// Labels select the pod for the blacklist.
	Labels map[string]string
	// Ready is the pod's Ready condition.
	Ready bool
	// Recreating: a ContainerRecreateRequest for the pod is active (anyone's).
	Recreating bool
	// OptedOut: the pod carries the emergency switch (AnnotationRestartDisabled).
	OptedOut bool
	// Failing lists the containers whose enhanced liveness state is Failed.
	Failing []Failure
	// Containers are the instances running now (or not), by container name, from the pod's
	// status. A container missing here is not running.
	Containers map[string]Instance
	// Record is what the decider did to the pod before (from AnnotationRestarts).
	Record Record
	// Unstarted are the failures of the restart Record.Request, which the decider recorded but
	// never created (it stopped in between). Creating it now is a new restart like any other, so
	// it passes the same checks; only the observation and the backoff are behind it already.
	Unstarted []Failure
	// NodeServiceSilent says why the pod's liveness results are not current: the node service of
	// its node is silent. "" while it is not.
	NodeServiceSilent string
	// NodeNotReady says why the pod's node is not Ready (its kubelet is down or unreachable): its
	// failures may be the node's rather than the container's, and a restart there waits for the
	// kubelet. "" while the node is Ready.
	NodeNotReady string
	// NodeSuspect says why the pod's node is suspected (CircuitBreaker.Node): many of its pods
	// fail liveness at once while other nodes' do not. "" while it is not.
	NodeSuspect string
}

// nodeHold is why the pod's node holds its restarts ("" when it does not), and what to say.
func (p *Pod) nodeHold() (Reason, string) {
	switch {
	case p.NodeServiceSilent != "":
		return ReasonNodeServiceSilent, p.NodeServiceSilent + "; its liveness results are not current, and it would not carry a restart out"
	case p.NodeNotReady != "":
		return ReasonNodeNotReady, p.NodeNotReady + "; its failures may be the node's rather than the container's, and a restart there waits for its kubelet"
	case p.NodeSuspect != "":
		return ReasonNodeSuspected, p.NodeSuspect + ": the node is the suspect, not the pod's containers; restarts there are held until fewer of its pods fail"
	}
	return "", ""
}

// Failure is a container's liveness state Failed since Since (the state's lastTransitionTime).
// The pair identifies one failure: a container restarted and failing again fails anew, with a
// later Since.
type Failure struct {
	Container string
	Since     time.Time
	// Seen is when the decider first saw the failure (its own clock; the node's may differ).
	Seen time.Time
	// Period is the failing probe's periodSeconds.
	Period time.Duration
	// Instance is the container's instance when the decider first saw the failure; zero when it
	// was not running then.
	Instance Instance
}

// Instance is one run of a container, from the pod's status: the kubelet gives a restarted
// container a new ID and a higher restart count.
type Instance struct {
	ID           string
	RestartCount int32
	Running      bool
	StartedAt    time.Time // state.running.startedAt, on the node's clock like Failure.Since
}

func (i Instance) same(o Instance) bool { return i.ID == o.ID && i.RestartCount == o.RestartCount }

// Input is a workload's state at Now.
type Input struct {
	Now      time.Time
	Settings *Settings
	// ConfigErr, when set, holds every restart: the operator meant something the decider cannot
	// read, and a restart is the unsafe guess.
	ConfigErr error
	Workload  Workload
	// Pods are the workload's pods that are not being deleted.
	Pods []Pod
	// NamespaceOptedOut: the namespace carries AnnotationRestartDisabled.
	NamespaceOptedOut bool
	// Budget is the most pods of the workload that may be unavailable at once, for its pods that
	// no disruption budget of Disruption selects.
	Budget Budget
	// Terminating counts the workload's pods being deleted: unavailable for Budget.
	Terminating int
	// Disruption are the budgets of their owners (PodDisruptionBudgets, OpenKruise's
	// PodUnavailableBudgets) that select some of Pods: a pod they select is judged by them, as
	// the eviction API judges it, instead of by Budget.
	Disruption []DisruptionBudget
	// Slowed says why the cluster-wide rate is slowed to Settings.UnhealthyQPS ("" when not).
	Slowed string
}

// Budget is a workload's maxUnavailable and where it comes from.
type Budget struct {
	MaxUnavailable int
	Source         string // "PodDisruptionBudget shop/cart-pdb" or "default 25%"
}

// DisruptionBudget is a PodDisruptionBudget or PodUnavailableBudget over some of the workload's
// pods, counted over every pod it selects (in and out of the workload) as its owner counts it.
type DisruptionBudget struct {
	Kind string // "PodDisruptionBudget" or "PodUnavailableBudget"
	Name string // namespace/name
	// Pods are the pods of the workload it selects.
	Pods map[types.UID]bool
	// Allowed is how many more of its pods may become unavailable now: the status's count of
	// allowed disruptions less the restarts in flight it cannot have seen yet, and never more than
	// its healthy pods counted now above the healthy pods it needs.
	Allowed int
	// Healthy and Desired count its healthy pods now and the ones it needs.
	Healthy, Desired int
	// AlwaysAllowUnhealthy: a pod that is not ready may be restarted however few are healthy
	// (a PodDisruptionBudget's unhealthyPodEvictionPolicy AlwaysAllow; a PodUnavailableBudget
	// lets unavailable pods go too). Otherwise only while Healthy >= Desired, as the eviction API.
	AlwaysAllowUnhealthy bool
	// Stale says why its status cannot be trusted, "" when it can: it then allows nothing.
	Stale string
}

func (b *DisruptionBudget) String() string { return b.Kind + " " + b.Name }

// Tokens is the rate limit on new requests, per namespace and cluster-wide.
type Tokens interface {
	// Take takes a token for a request in namespace at now, or says which limit holds it and how
	// long until it does not.
	Take(namespace string, now time.Time) (ok bool, scope Scope, wait time.Duration)
}

// Scope is the rate limit that holds a request.
type Scope string

const (
	ScopeNamespace Scope = "namespace"
	ScopeCluster   Scope = "cluster"
)

// Outcome of a decision.
type Outcome string

const (
	Restart Outcome = "restart" // a ContainerRecreateRequest is to be created
	DryRun  Outcome = "dry_run" // it would be, but the decider runs dry
	Held    Outcome = "held"    // a protection holds the restart back, see Reason
)

// Reason why a restart is held back (or, for Restart and DryRun, the liveness failure).
type Reason string

const (
	ReasonLivenessFailed     Reason = "LivenessFailed"
	ReasonConfigInvalid      Reason = "ConfigInvalid"
	ReasonDisabled           Reason = "Disabled"
	ReasonNamespaceOptedOut  Reason = "NamespaceOptedOut"
	ReasonPodOptedOut        Reason = "PodOptedOut"
	ReasonBlacklisted        Reason = "Blacklisted"
	ReasonCircuitBreakerOpen Reason = "CircuitBreakerOpen"
	// ReasonObserving: the failure is younger than the breaker's window. Not a protection
	// holding back but the normal pace, so it is neither an event nor a metric.
	ReasonObserving          Reason = "Observing"
	ReasonRecreateInProgress Reason = "RecreateInProgress"
	ReasonBackoff            Reason = "Backoff"
	ReasonMaxUnavailable     Reason = "MaxUnavailable"
	// ReasonMultipleBudgets: more than one PodDisruptionBudget (or PodUnavailableBudget) selects
	// the pod. The eviction API refuses to evict such a pod, and the decider holds likewise.
	ReasonMultipleBudgets Reason = "MultipleBudgets"
	ReasonRateLimited     Reason = "RateLimited"
	// ReasonContainerNotRunning and ReasonContainerRestarted: the Failed state is not about the
	// container instance running now. A container that exited is the kubelet's to restart (by
	// restartPolicy, with its back-off); a request would kill the instance the kubelet just
	// started. Not a protection but a fact, so like ReasonObserving neither an event nor a
	// liveness failure.
	ReasonContainerNotRunning Reason = "ContainerNotRunning"
	ReasonContainerRestarted  Reason = "ContainerRestarted"
	// ReasonNodeServiceSilent: the node service of the pod's node has not renewed its heartbeat
	// within the grace, so its Failed state may be long healed; and a request would wait for the
	// same silent node service to carry it out.
	ReasonNodeServiceSilent Reason = "NodeServiceSilent"
	// ReasonNodeNotReady: the pod's node is not Ready, as the node lifecycle controller sees it:
	// a sick node is not a reason to restart its containers, as MachineHealthCheck suspects the
	// node rather than its workloads.
	ReasonNodeNotReady Reason = "NodeNotReady"
	// ReasonNodeSuspected: the node's circuit breaker is open (CircuitBreaker.Node).
	ReasonNodeSuspected Reason = "NodeSuspected"
)

// heldReasons are the reasons a restart is held for that are told (events, metrics): every
// Reason but the liveness failure itself and the quiet ones.
var heldReasons = []Reason{ReasonConfigInvalid, ReasonDisabled, ReasonNamespaceOptedOut, ReasonPodOptedOut,
	ReasonBlacklisted, ReasonCircuitBreakerOpen, ReasonRecreateInProgress, ReasonBackoff, ReasonMaxUnavailable,
	ReasonMultipleBudgets, ReasonRateLimited, ReasonNodeServiceSilent, ReasonNodeNotReady, ReasonNodeSuspected}

// Quiet reports whether a decision with reason r is only logged: it holds nothing back that a
// person would want to hear of on the pod.
func Quiet(r Reason) bool {
	return r == ReasonObserving || r == ReasonContainerNotRunning || r == ReasonContainerRestarted
}

// Decision for one pod with new liveness failures.
type Decision struct {
	Pod     *Pod
	Failing []Failure // the new failures the decision is about
	Outcome Outcome
	Reason  Reason
	Message string
	// RetryAfter, when positive, is when the held restart is worth deciding again without any
	// other change (backoff, rate limit).
	RetryAfter time.Duration
	// Resume: the decision is about Pod.Unstarted, a restart recorded under Pod.Record.Request.
	Resume bool
}

// Breaker is the state of a workload's circuit breaker.
type Breaker struct {
	Open           bool
	Failing, Total int
}

// Decide makes the decisions for one workload: for each pod with liveness failures the decider
// has not acted on, restart it or say what holds the restart back. The order of the checks is
// the order of their authority: what an operator switched off first, then the protections of
// the workload, then the pacing. It takes tokens only for restarts (and dry-run ones, so that a
// dry run reports the rate limit as it would happen).
//
// Failures of containers that are not running, or that restarted since they failed, take no
// part: they are neither restarted nor counted by the breaker, and a pod with only those gets a
// quiet hold. A pod on a node whose node service is silent takes no part in the breaker at all
// (neither failing nor healthy) and its new failures are held (ReasonNodeServiceSilent).
func Decide(in Input, tokens Tokens) ([]Decision, Breaker) {
	var stale []Decision
	in.Pods, stale = current(in.Pods)
	breaker := breakerState(in)
	b := budgets{in: &in, unavailable: map[types.UID]bool{}, taken: make([]int, len(in.Disruption))}
	for i := range in.Pods {
		if p := &in.Pods[i]; !p.Ready || p.Recreating {
			b.unavailable[p.UID] = true
		}
	}

	// Oldest failure first: the budget and the tokens go to who waited longest.
	var candidates []*Pod
	fresh := map[types.UID][]Failure{}
	for i := range in.Pods {
		p := &in.Pods[i]
		f := p.Unstarted
		if len(f) == 0 {
			f = p.newFailures()
		}
		if len(f) > 0 {
			candidates = append(candidates, p)
			fresh[p.UID] = f
		}
	}
	slices.SortStableFunc(candidates, func(a, b *Pod) int {
		return fresh[a.UID][0].Since.Compare(fresh[b.UID][0].Since)
	})

	var out []Decision
	for _, p := range candidates {
		d := Decision{Pod: p, Failing: fresh[p.UID], Resume: len(p.Unstarted) > 0}
		if !d.Resume {
			d.Failing = due(in.Now, in.Settings, p.Record, d.Failing)
		}
		d.Outcome, d.Reason, d.Message, d.RetryAfter = decideOne(in, p, d.Failing, d.Resume, breaker, &b, tokens)
		if d.Outcome != Held {
			b.take(p)
		}
		out = append(out, d)
	}
	return append(out, stale...), breaker
}

// current returns pods with only the failures of the container instances running now, and a
// quiet hold for each pod whose every new failure is another instance's.
func current(pods []Pod) ([]Pod, []Decision) {
	out := slices.Clone(pods)
	var held []Decision
	for i := range out {
		p := &out[i]
		if reason, msg := p.nodeHold(); reason != "" {
			fresh := p.Unstarted // recorded, not created: it waits in the record for the node
			if len(fresh) == 0 {
				fresh = p.newFailures()
			}
			p.Failing, p.Unstarted = nil, nil
			if len(fresh) > 0 {
				held = append(held, Decision{Pod: p, Failing: fresh, Outcome: Held, Reason: reason, Message: msg})
			}
			continue
		}
		if len(p.Unstarted) > 0 {
			// A restart recorded but never created acts only on the container instances it was
			// decided for: one that restarted or stopped since needs it no more.
			var msgs []string
			var reason Reason
			unstarted := p.Unstarted
			p.Unstarted = slices.DeleteFunc(slices.Clone(p.Unstarted), func(f Failure) bool {
				r, msg := p.stale(f)
				if r != "" {
					reason, msgs = r, append(msgs, msg)
				}
				return r != ""
			})
			if len(p.Unstarted) == 0 && len(p.newFailures()) == 0 {
				held = append(held, Decision{Pod: p, Failing: unstarted, Outcome: Held, Reason: reason, Message: strings.Join(msgs, "; ")})
				continue
			}
		}
		if len(p.Failing) == 0 {
			continue
		}
		fresh := p.newFailures()
		var live []Failure
		var reason Reason
		var msgs []string
		for _, f := range p.Failing {
			r, msg := p.stale(f)
			if r == "" {
				live = append(live, f)
				continue
			}
			if slices.ContainsFunc(fresh, func(n Failure) bool { return n.Container == f.Container && n.Since.Equal(f.Since) }) {
				if reason == "" {
					reason = r
				}
				msgs = append(msgs, msg)
			}
		}
		p.Failing = live
		if len(msgs) > 0 && len(p.newFailures()) == 0 {
			held = append(held, Decision{Pod: p, Failing: fresh, Outcome: Held, Reason: reason, Message: strings.Join(msgs, "; ")})
		}
	}
	return out, held
}

// stale says why f is not a failure of the container instance running now, or "" when it is.
func (p *Pod) stale(f Failure) (Reason, string) {
	c := p.Containers[f.Container]
	switch {
	case !c.Running:
		return ReasonContainerNotRunning, fmt.Sprintf("container %s is not running: an exit is not a liveness failure, the kubelet restarts it by the pod's restartPolicy", f.Container)
	case f.Instance.ID != "" && !f.Instance.same(c):
		return ReasonContainerRestarted, fmt.Sprintf("container %s restarted (restart count %d, now %d) since its liveness failure was seen; the new instance has no failure yet",
			f.Container, f.Instance.RestartCount, c.RestartCount)
	case c.StartedAt.After(f.Since):
		return ReasonContainerRestarted, fmt.Sprintf("container %s started at %s, after its liveness state turned Failed at %s: the failure was an earlier instance's",
			f.Container, c.StartedAt.UTC().Format(time.RFC3339), f.Since.UTC().Format(time.RFC3339))
	}
	return "", ""
}

func decideOne(in Input, p *Pod, failing []Failure, resume bool, breaker Breaker, b *budgets, tokens Tokens) (Outcome, Reason, string, time.Duration) {
	s := in.Settings
	held := func(r Reason, format string, args ...any) (Outcome, Reason, string, time.Duration) {
		return Held, r, fmt.Sprintf(format, args...), 0
	}
	switch {
	case in.ConfigErr != nil:
		return held(ReasonConfigInvalid, "the decider's configuration (ConfigMap %s) is invalid: %v", ConfigMapName, in.ConfigErr)
	case !s.Enabled:
		return held(ReasonDisabled, "restarts are switched off cluster-wide (enabled: false in ConfigMap %s)", ConfigMapName)
	case in.NamespaceOptedOut:
		return held(ReasonNamespaceOptedOut, "namespace %s has the annotation %s=true", in.Workload.Namespace, AnnotationRestartDisabled)
	case p.OptedOut:
		return held(ReasonPodOptedOut, "the pod has the annotation %s=true", AnnotationRestartDisabled)
	}
	if why := s.blacklisted(in.Workload, p.Labels); why != "" {
		return held(ReasonBlacklisted, "%s", why)
	}
	if breaker.Open {
		return held(ReasonCircuitBreakerOpen, "circuit breaker open for %s: %d of its %d pods fail liveness at once (opens above %s), so the cause is likely shared and restarts would not cure it",
			in.Workload, breaker.Failing, breaker.Total, s.FailingShare.String())
	}
	// A resumed restart was observed before it was recorded, and its record already counts it
	// for the backoff; everything else is checked again.
	if wait := observeLeft(in.Now, s, failing); wait > 0 && !resume {
		return Held, ReasonObserving, fmt.Sprintf("watching the failure %s longer before acting, in case other pods of %s fail with it (%d of %d do now)",
			wait.Round(time.Millisecond), in.Workload, breaker.Failing, breaker.Total), wait
	}
	if p.Recreating {
		return held(ReasonRecreateInProgress, "a ContainerRecreateRequest for the pod is still active")
	}
	if wait, container, restarts := backoffLeft(in.Now, s, p.Record, failing); wait > 0 && !resume {
		return Held, ReasonBackoff, fmt.Sprintf("back-off %s restarting container %s (restarted %d times)",
			wait.Round(time.Second), container, restarts), wait
	}
	r, budget, recheck := b.check(p)
	if r != "" {
		return Held, r, budget, recheck
	}
	if ok, scope, wait := tokens.Take(in.Workload.Namespace, in.Now); !ok {
		if scope == ScopeNamespace {
			return Held, ReasonRateLimited, fmt.Sprintf("rate limit of %v restarts per second in namespace %s (burst %d); next token in %s",
				s.NamespaceQPS, in.Workload.Namespace, s.NamespaceBurst, wait.Round(time.Millisecond)), wait
		}
		if in.Slowed != "" {
			return Held, ReasonRateLimited, fmt.Sprintf("cluster-wide rate limit slowed to %v restarts per second: %s; next token in %s",
				s.UnhealthyQPS, in.Slowed, wait.Round(time.Millisecond)), wait
		}
		return Held, ReasonRateLimited, fmt.Sprintf("cluster-wide rate limit of %v restarts per second (burst %d); next token in %s",
			s.QPS, s.Burst, wait.Round(time.Millisecond)), wait
	}
	msg := fmt.Sprintf("liveness probe failed: %s; %s", containerList(failing), budget)
	if s.DryRun {
		return DryRun, ReasonLivenessFailed, "dry run, no restart: " + msg, 0
	}
	return Restart, ReasonLivenessFailed, msg, 0
}

// budgets is what the disruption budgets allow in one Decide, as restarts take from them.
type budgets struct {
	in *Input
	// unavailable are the workload's pods not ready, being recreated, or restarted in this Decide.
	unavailable map[types.UID]bool
	// taken counts the restarts of this Decide from each of in.Disruption.
	taken []int
}

// over are the indexes of the disruption budgets that select p.
func (b *budgets) over(p *Pod) []int {
	var out []int
	for i := range b.in.Disruption {
		if b.in.Disruption[i].Pods[p.UID] {
			out = append(out, i)
		}
	}
	return out
}

// budgetRecheck is how often a restart held by a disruption budget is decided again: its pods
// outside the workload change without telling the workload.
const budgetRecheck = 5 * time.Second

// check says what holds p's restart back among the budgets and when to decide again; when
// nothing does (reason ""), the message says which budget lets it go. A pod that a
// PodDisruptionBudget or PodUnavailableBudget selects is judged by it alone (by each, when one of
// each selects it); the others by the workload's default.
func (b *budgets) check(p *Pod) (Reason, string, time.Duration) {
	over := b.over(p)
	if len(over) == 0 {
		others := len(b.unavailable) + b.in.Terminating
		if b.unavailable[p.UID] {
			others--
		}
		if others+1 > b.in.Budget.MaxUnavailable {
			return ReasonMaxUnavailable, fmt.Sprintf("%d of %s's pods are unavailable, terminating or being recreated; maxUnavailable is %d (%s)",
				others, b.in.Workload, b.in.Budget.MaxUnavailable, b.in.Budget.Source), 0
		}
		return "", fmt.Sprintf("budget ok: %d of %s's pods unavailable with this restart, maxUnavailable %d (%s)",
			others+1, b.in.Workload, b.in.Budget.MaxUnavailable, b.in.Budget.Source), 0
	}
	byKind := map[string][]string{}
	for _, i := range over {
		d := &b.in.Disruption[i]
		byKind[d.Kind] = append(byKind[d.Kind], d.Name)
	}
	for _, kind := range []string{"PodDisruptionBudget", "PodUnavailableBudget"} {
		if names := byKind[kind]; len(names) > 1 {
			slices.Sort(names)
			return ReasonMultipleBudgets, fmt.Sprintf("the pod is selected by %d %ss (%s): the eviction API refuses to evict such a pod and the decider holds its restart likewise; make one budget select it",
				len(names), kind, strings.Join(names, ", ")), budgetRecheck
		}
	}
	unhealthy := b.unavailable[p.UID]
	var ok []string
	for _, i := range over {
		d := &b.in.Disruption[i]
		switch {
		case d.Stale != "":
			return ReasonMaxUnavailable, fmt.Sprintf("%s allows no disruption now: %s", d, d.Stale), budgetRecheck
		case unhealthy && !d.AlwaysAllowUnhealthy && d.Healthy-b.taken[i] < d.Desired:
			return ReasonMaxUnavailable, fmt.Sprintf("the pod is not ready and %s has %d healthy pods of the %d it needs: with unhealthyPodEvictionPolicy IfHealthyBudget (the default) an unhealthy pod goes only while the budget is met",
				d, d.Healthy-b.taken[i], d.Desired), budgetRecheck
		case !unhealthy && d.Allowed-b.taken[i] < 1:
			return ReasonMaxUnavailable, fmt.Sprintf("%s allows no more disruptions: %d of its pods are healthy and it needs %d (restarts in flight counted)",
				d, d.Healthy-b.taken[i], d.Desired), budgetRecheck
		case unhealthy:
			ok = append(ok, fmt.Sprintf("%s (the pod is not ready: it takes nothing from it)", d))
		default:
			ok = append(ok, fmt.Sprintf("%s allows %d more", d, d.Allowed-b.taken[i]))
		}
	}
	return "", "budget ok: " + strings.Join(ok, ", "), 0
}

// take spends p's restart from the budgets that select it: a ready pod stops counting as healthy.
func (b *budgets) take(p *Pod) {
	if !b.unavailable[p.UID] {
		for _, i := range b.over(p) {
			b.taken[i]++
		}
	}
	b.unavailable[p.UID] = true
}

// newFailures are the pod's failures the decider has not acted on, oldest first.
func (p *Pod) newFailures() []Failure {
	var out []Failure
	for _, f := range p.Failing {
		if c, ok := p.Record.Containers[f.Container]; ok && !f.Since.After(c.Failure.Time) {
			continue // acted on already; the state predates the restart
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Failure) int { return a.Since.Compare(b.Since) })
	return out
}

// breakerState counts the workload's pods failing liveness (acted on or not), among those whose
// results are current: a pod on a silent node is neither failing nor healthy.
func breakerState(in Input) Breaker {
	var b Breaker
	for i := range in.Pods {
		if reason, _ := in.Pods[i].nodeHold(); reason != "" {
			continue
		}
		b.Total++
		if len(in.Pods[i].Failing) > 0 {
			b.Failing++
		}
	}
	if in.Settings == nil || b.Failing < in.Settings.MinFailingPods {
		return b
	}
	b.Open = overShare(b.Failing, b.Total, in.Settings.FailingShare)
	return b
}

// overShare: failing of total is more than share (a percentage, or a number of 100).
func overShare(failing, total int, share intstr.IntOrString) bool {
	pct, err := intstr.GetScaledValueFromIntOrPercent(&share, 100, false)
	if err != nil {
		return false
	}
	return failing*100 > pct*total // failing/total > pct/100, in integers
}

// backoffLeft is how long the restart of failing must still wait, and the restart count the
// wait comes from: the longest wait of the containers. Like the kubelet, the first restart is
// immediate, the next waits Initial, doubling up to Max; a container that last restarted more
// than ResetAfter before its new failure starts over.
func backoffLeft(now time.Time, s *Settings, rec Record, failing []Failure) (time.Duration, string, int) {
	var soonest time.Duration
	var container string
	var count int
	for _, f := range failing {
		left, restarts := containerBackoff(now, s, rec, f)
		if left <= 0 {
			return 0, "", 0 // one container is due: the others wait on their own
		}
		if soonest == 0 || left < soonest {
			soonest, container, count = left, f.Container, restarts
		}
	}
	return soonest, container, count
}

// containerBackoff is how long f's container still waits before its next restart, and how often
// it was restarted.
func containerBackoff(now time.Time, s *Settings, rec Record, f Failure) (time.Duration, int) {
	c, ok := rec.Containers[f.Container]
	if !ok || c.Restarts == 0 || f.Since.Sub(c.LastRestart.Time) >= s.BackoffResetAfter {
		return 0, 0
	}
	wait := s.BackoffInitial * time.Duration(math.Pow(2, float64(min(c.Restarts-1, 30))))
	if wait > s.BackoffMax || wait <= 0 {
		wait = s.BackoffMax
	}
	return c.LastRestart.Add(wait).Sub(now), c.Restarts
}

// due are the failures of failing whose container's back-off is over: each container is restarted
// on its own back-off, as the kubelet restarts each container on its own. All of failing when
// none is due (the decision then holds them and says when the first is).
func due(now time.Time, s *Settings, rec Record, failing []Failure) []Failure {
	if s == nil {
		return failing
	}
	var out []Failure
	for _, f := range failing {
		if left, _ := containerBackoff(now, s, rec, f); left <= 0 {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return failing
	}
	return out
}

// observeLeft is how much longer the breaker's window keeps the newest of failing under watch.
func observeLeft(now time.Time, s *Settings, failing []Failure) time.Duration {
	var longest time.Duration
	for _, f := range failing {
		window := f.Period
		if s.BreakerWindow != nil {
			window = *s.BreakerWindow
		}
		if left := f.Seen.Add(window).Sub(now); left > longest {
			longest = left
		}
	}
	return longest
}

// restartsAfter is the count of the container's restarts including one now: reset like the
// backoff when the previous restart is older than ResetAfter.
func restartsAfter(s *Settings, rec Record, f Failure) int {
	c, ok := rec.Containers[f.Container]
	if !ok || f.Since.Sub(c.LastRestart.Time) >= s.BackoffResetAfter {
		return 1
	}
	return c.Restarts + 1
}

// MaxUnavailable scales v against a workload of total pods: a percentage rounds down (up when
// roundUp, as a PodDisruptionBudget's maxUnavailable does), and never goes below atLeast.
func MaxUnavailable(v intstr.IntOrString, total int, roundUp bool, atLeast int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, roundUp)
	if err != nil {
		return atLeast
	}
	return max(n, atLeast)
}

func containerList(failing []Failure) string {
	names := make([]string, len(failing))
	for i, f := range failing {
		names[i] = "container " + f.Container
	}
	return strings.Join(names, ", ")
}
