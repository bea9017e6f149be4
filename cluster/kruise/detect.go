// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Work is a kind of work probeshim does that a Kruise part may also do.
type Work string

const (
	// WorkProbes: NodePodProbe spec and status, the pod conditions from their results
	// (probeshim's nodepodprobe, podstatus and liveness controllers and its node services).
	WorkProbes Work = "probes"
	// WorkCRR: admitting, executing and completing ContainerRecreateRequests (probeshim's CRR
	// webhook marks, its lifecycle controller and its node services' executor).
	WorkCRR Work = "crr"
)

// Conflict is one live Kruise part that does work probeshim also does.
type Conflict struct {
	// Kruise names the part, e.g. "webhook vpodprobemarker.kb.io" or "kruise-daemon prober".
	Kruise string `json:"kruise"`
	// Probeshim names what of probeshim's it conflicts with.
	Probeshim string `json:"probeshim"`
	Work      Work   `json:"work"`
	// Why says what would go wrong if both acted.
	Why string `json:"why"`
}

// Observation is what was seen of Kruise in one look.
type Observation struct {
	// Installed is true when any of Kruise's objects was found.
	Installed bool `json:"installed"`
	// Webhooks lists Kruise's webhook entries (in .webhooks or in the template annotation).
	Webhooks []string `json:"webhooks,omitempty"`
	// Manager and Daemon tell whether kruise-manager's Deployment and kruise-daemon's DaemonSet exist.
	Manager bool `json:"manager"`
	Daemon  bool `json:"daemon"`
	// DaemonPods is kruise-daemon's number of scheduled pods.
	DaemonPods int32 `json:"daemonPods"`
	// Gates are the gates that matter, as Kruise applies them; GatesRead is false when
	// kruise-manager's arguments could not be read and Kruise's defaults are assumed.
	Gates     map[string]bool `json:"gates,omitempty"`
	GatesRead bool            `json:"gatesRead"`
	// CRRStorage is the version ContainerRecreateRequests are stored as ("" when unknown).
	CRRStorage string `json:"crrStorage,omitempty"`
	// HandedOver lists the work handed over to probeshim (the handover record): its Kruise
	// webhook entry, if kruise-manager puts it back, is the keeper's to remove, not a conflict.
	HandedOver []Work `json:"handedOver,omitempty"`
	// Unreadable lists what could not be read (no permission, API errors); each counts as live.
	Unreadable []string `json:"unreadable,omitempty"`
	// Ignored lists objects named like Kruise's that are not believed: a Deployment or DaemonSet
	// in Kruise's namespace, which whoever administers that namespace can create, counts only
	// while one of Kruise's webhook configurations (cluster-scoped: a cluster admin's) exists.
	Ignored []string `json:"ignored,omitempty"`
}

// Observe looks at the cluster once. Errors other than not found are recorded in Unreadable,
// not returned: a part that cannot be seen is assumed live.
//
// Only what a cluster admin writes is believed: Kruise's webhook configurations and CRDs are
// cluster-scoped; its Deployment and DaemonSet are namespaced, and where tenants may create
// namespaces, a tenant can create "kruise-system" and a Deployment named like kruise-manager's in
// it. So those count only while a Kruise webhook configuration vouches that an admin installed
// Kruise (or the configurations cannot be read: then they are assumed there).
func Observe(ctx context.Context, c client.Reader, namespace string) Observation {
	var o Observation
	gates := Gates{}
	note := func(what string, err error) bool {
		switch {
		case err == nil:
			return true
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			return false
		default:
			o.Unreadable = append(o.Unreadable, fmt.Sprintf("%s: %v", what, err))
			return false
		}
	}

	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if note("MutatingWebhookConfiguration "+MutatingConfigName, c.Get(ctx, client.ObjectKey{Name: MutatingConfigName}, &mwc)) {
		o.Installed = true
		for _, w := range mwc.Webhooks {
			o.Webhooks = append(o.Webhooks, w.Name)
		}
		o.Webhooks = append(o.Webhooks, templateOrUnreadable(&o, "mutating", mwc.Annotations)...)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if note("ValidatingWebhookConfiguration "+ValidatingConfigName, c.Get(ctx, client.ObjectKey{Name: ValidatingConfigName}, &vwc)) {
		o.Installed = true
		for _, w := range vwc.Webhooks {
			o.Webhooks = append(o.Webhooks, w.Name)
		}
		o.Webhooks = append(o.Webhooks, templateOrUnreadable(&o, "validating", vwc.Annotations)...)
	}
	slices.Sort(o.Webhooks)
	o.Webhooks = slices.Compact(o.Webhooks)
	vouched := o.Installed || len(o.Unreadable) > 0 // only the configurations were read so far
	believe := func(what string) bool {
		if !vouched {
			o.Ignored = append(o.Ignored, what+": no Kruise webhook configuration (which only a cluster admin creates) says Kruise is installed")
		}
		return vouched
	}

	var dep appsv1.Deployment
	if note("Deployment "+namespace+"/"+ManagerName, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ManagerName}, &dep)) &&
		believe("Deployment "+namespace+"/"+ManagerName) {
		o.Installed, o.Manager = true, true
		for _, ctr := range dep.Spec.Template.Spec.Containers {
			if g, ok := GatesFromArgs(append(slices.Clone(ctr.Command), ctr.Args...)); ok {
				gates = g
			}
		}
		o.GatesRead = true
	}
	var ds appsv1.DaemonSet
	if note("DaemonSet "+namespace+"/"+DaemonName, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: DaemonName}, &ds)) &&
		believe("DaemonSet "+namespace+"/"+DaemonName) {
		o.Installed, o.Daemon = true, true
		o.DaemonPods = ds.Status.CurrentNumberScheduled
	}
	o.Gates = map[string]bool{}
	for _, g := range []string{GateKruiseDaemon, GatePodProbeMarker, GateEnhancedLiveness} {
		o.Gates[g] = gates.Enabled(g)
	}

	var crd apiextensionsv1.CustomResourceDefinition
	if note("CustomResourceDefinition containerrecreaterequests.apps.kruise.io",
		c.Get(ctx, client.ObjectKey{Name: "containerrecreaterequests.apps.kruise.io"}, &crd)) {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				o.CRRStorage = v.Name
			}
		}
	}
	return o
}

func templateOrUnreadable(o *Observation, which string, ann map[string]string) []string {
	names, ok := TemplateNames(ann)
	if !ok {
		o.Unreadable = append(o.Unreadable, "the template annotation of Kruise's "+which+" webhook configuration does not parse")
	}
	return names
}

// Conflicts lists the live Kruise parts that would act on what probeshim acts on, in a stable order.
func (o Observation) Conflicts() []Conflict {
	var out []Conflict
	add := func(kruise, probeshim string, w Work, why string) {
		out = append(out, Conflict{Kruise: kruise, Probeshim: probeshim, Work: w, Why: why})
	}
	// Unreadable parts are assumed live: holding off for nothing is recoverable, two actors are not.
	unsure := len(o.Unreadable) > 0
	hasHook := func(n string) bool {
		for _, w := range o.HandedOver {
			if _, h := EntryFor(w); h == n {
				return false
			}
		}
		return slices.Contains(o.Webhooks, n)
	}
	if hasHook(WebhookPPM) {
		add("webhook "+WebhookPPM, "PodProbeMarker admission and controllers", WorkProbes,
			"Kruise's webhook validates every PodProbeMarker write, and denies them all while its gate is off")
	}
	probesOn := o.Gates[GateKruiseDaemon] && o.Gates[GatePodProbeMarker]
	if (o.Manager || unsure) && probesOn {
		add("kruise-manager PodProbeMarker and NodePodProbe controllers", "nodepodprobe controller", WorkProbes,
			"both would write the spec of each node's NodePodProbe; probeshim's admission policy lets only probeshim write it, so Kruise's writes are denied")
	}
	if (o.Daemon || unsure) && probesOn {
		add("kruise-daemon prober", "node service prober", WorkProbes,
			"both would write each node's whole NodePodProbe status; probeshim's admission policy probeshim-nodepodprobe-writers lets only the node's identity write it, so kruise-daemon's writes are denied")
	}
	if hasHook(WebhookCRR) {
		add("webhook "+WebhookCRR, "ContainerRecreateRequest admission", WorkCRR,
			"Kruise's webhook admits requests for kruise-daemon, and denies them all while its gate is off")
	}
	crrOn := o.Gates[GateKruiseDaemon]
	if (o.Manager || unsure) && crrOn {
		add("kruise-manager ContainerRecreateRequest controller", "crr lifecycle controller", WorkCRR,
			"both would complete requests and hold the pod's KruisePodReady gate")
	}
	if (o.Daemon || unsure) && crrOn {
		add("kruise-daemon ContainerRecreateRequest executor", "node service executor", WorkCRR,
			"both would run the preStop hooks and stop the containers of each request")
	}
	if o.CRRStorage != "" && o.CRRStorage != "v1alpha1" {
		add("ContainerRecreateRequest CRD storing "+o.CRRStorage, "ContainerRecreateRequest v1alpha1 API", WorkCRR,
			"probeshim's node services read v1alpha1, which Kruise's CRD converts through kruise-manager's webhook")
	}
	return out
}

// Holds reports why probeshim must not do w now ("" when it may).
func (o Observation) Holds(w Work) string {
	for _, c := range o.Conflicts() {
		if c.Work == w {
			return c.Kruise + " is live"
		}
	}
	return ""
}
