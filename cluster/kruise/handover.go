// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// HandoverOptions says what to hand over (or give back) and how.
type HandoverOptions struct {
	Probes, CRR bool
	DryRun      bool
	Rollback    bool
	// Namespace is probeshim's (the handover record); KruiseNamespace Kruise's.
	Namespace       string
	KruiseNamespace string
	// ServiceAccount is the deployment's, in Namespace (default probeshim-cluster): its keeper
	// is given the right to edit Kruise's webhook configurations while the record lists work.
	ServiceAccount string
	// Secrets reaches the Secrets of a namespace, where Helm keeps its releases: the last step
	// marks the CRDs kept in the release that owns them (Kruise's chart), see KeepCRDs.
	Secrets func(namespace string) typedcorev1.SecretInterface
	Out     io.Writer
}

// KeeperRole is the ClusterRole (cluster/deploy/rbac.yaml) that lets the keeper update Kruise's
// two webhook configurations. It is bound, by a ClusterRoleBinding of the same name, only while
// the handover record lists work: the deployment holds no right over Kruise's objects otherwise.
const KeeperRole = "probeshim-kruise-keeper"

func (o HandoverOptions) works() []Work {
	var ws []Work
	if o.Probes {
		ws = append(ws, WorkProbes)
	}
	if o.CRR {
		ws = append(ws, WorkCRR)
	}
	return ws
}

// Handover hands the chosen work over from Kruise to probeshim, or back with Rollback. Every step
// checks before it writes, so running it again does nothing more; DryRun prints what it would do.
func Handover(ctx context.Context, c client.Client, o HandoverOptions) error {
	if !o.Probes && !o.CRR {
		return errors.New("say what to hand over: --probes, --crr or both")
	}
	if o.KruiseNamespace == "" {
		o.KruiseNamespace = DefaultNamespace
	}
	p := o.printer()
	if o.Rollback {
		return rollback(ctx, c, o, p)
	}

	obs := Observe(ctx, c, o.KruiseNamespace)
	if err := preflight(obs, o); err != nil {
		return err
	}
	rec, cm, err := ReadRecord(ctx, c, o.Namespace)
	if err != nil {
		return fmt.Errorf("reading the handover record %s/%s: %w", o.Namespace, HandoverConfigMap, err)
	}
	for _, w := range o.works() {
		rm, wrote, err := Strip(ctx, c, w, o.DryRun)
		if err != nil {
			return err
		}
		if wrote {
			p("removed webhook %s from %s (.webhooks and its template annotation)", rm.Webhook, rm.Config)
		} else {
			p("webhook %s: already absent from %s", rm.Webhook, rm.Config)
		}
		if prev, ok := rec[w]; ok && len(rm.Entry) == 0 && len(rm.Template) == 0 {
			rm = prev // a second run keeps what the first removed, for --rollback
		}
		rec[w] = rm
	}
	if err := writeRecord(ctx, c, o.Namespace, cm, rec, o.DryRun); err != nil {
		return err
	}
	if err := bindKeeper(ctx, c, o, p); err != nil {
		return err
	}
	p("handover record %s/%s lists %v: probeshim-cluster keeps those entries removed", o.Namespace, HandoverConfigMap, o.works())
	if o.Probes {
		if err := adoptProbes(ctx, c, o, p); err != nil {
			return err
		}
	}
	if o.CRR {
		if err := adoptCRR(ctx, c, o, p); err != nil {
			return err
		}
	}
	return KeepCRDs(ctx, c, o)
}

// printer prints one line of the report to Out, marked as a dry run's.
func (o HandoverOptions) printer() func(string, ...any) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	return func(format string, a ...any) {
		prefix := ""
		if o.DryRun {
			prefix = "(dry run) "
		}
		fmt.Fprintf(out, prefix+format+"\n", a...)
	}
}

// bindKeeper binds KeeperRole to the deployment's service account, so that its keeper may edit
// Kruise's webhook configurations while the record lists work.
func bindKeeper(ctx context.Context, c client.Client, o HandoverOptions, p func(string, ...any)) error {
	sa := o.ServiceAccount
	if sa == "" {
		sa = "probeshim-cluster"
	}
	if err := c.Get(ctx, client.ObjectKey{Name: KeeperRole}, &rbacv1.ClusterRole{}); err != nil {
		return fmt.Errorf("ClusterRole %s (cluster/deploy/rbac.yaml, or the chart) is needed for the deployment to keep the entries removed: %w", KeeperRole, err)
	}
	want := rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: KeeperRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: KeeperRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: o.Namespace, Name: sa}},
	}
	var have rbacv1.ClusterRoleBinding
	err := c.Get(ctx, client.ObjectKey{Name: KeeperRole}, &have)
	switch {
	case err == nil && equality.Semantic.DeepEqual(have.Subjects, want.Subjects) && have.RoleRef == want.RoleRef:
		return nil
	case err == nil:
		// A roleRef cannot change: replace the binding.
		if !o.DryRun {
			if err := c.Delete(ctx, &have); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("replacing ClusterRoleBinding %s: %w", KeeperRole, err)
			}
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", KeeperRole, err)
	}
	if !o.DryRun {
		if err := c.Create(ctx, &want); err != nil {
			return fmt.Errorf("binding ClusterRole %s: %w", KeeperRole, err)
		}
	}
	p("bound ClusterRole %s to %s/%s: the deployment may edit Kruise's two webhook configurations while the record lists work", KeeperRole, o.Namespace, sa)
	return nil
}

// unbindKeeper removes the keeper's binding once the record lists no work.
func unbindKeeper(ctx context.Context, c client.Client, p func(string, ...any), dryRun bool) error {
	b := &rbacv1.ClusterRoleBinding{}
	if err := c.Get(ctx, client.ObjectKey{Name: KeeperRole}, b); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", KeeperRole, err)
	}
	if !dryRun {
		if err := c.Delete(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing ClusterRoleBinding %s: %w", KeeperRole, err)
		}
	}
	p("removed ClusterRoleBinding %s: the deployment no longer may edit Kruise's webhook configurations", KeeperRole)
	return nil
}

// preflight refuses a handover that would leave two actors: Kruise's gates must be off first.
func preflight(obs Observation, o HandoverOptions) error {
	var errs []error
	if len(obs.Unreadable) > 0 {
		errs = append(errs, fmt.Errorf("cannot see all of Kruise, so cannot tell it is stopped: %v", obs.Unreadable))
	}
	if o.Probes && obs.Gates[GatePodProbeMarker] && (obs.Manager || obs.Daemon) {
		errs = append(errs, fmt.Errorf("OpenKruise still probes (feature gate %s is on): set it to false in Kruise's featureGates "+
			"(e.g. helm upgrade kruise openkruise/kruise --reuse-values --set featureGates=%s=false), then run this again", GatePodProbeMarker, GatePodProbeMarker))
	}
	if o.CRR && obs.Gates[GateKruiseDaemon] && (obs.Manager || obs.Daemon) {
		errs = append(errs, fmt.Errorf("OpenKruise still carries out ContainerRecreateRequests (feature gate %s is on): set it to false "+
			"(this also stops kruise-daemon's image pulling and every other daemon feature), then run this again", GateKruiseDaemon))
	}
	if o.CRR && obs.Daemon {
		errs = append(errs, fmt.Errorf("DaemonSet %s/%s still exists: its pods would carry out requests too; wait for Kruise's chart to remove it", o.KruiseNamespace, DaemonName))
	}
	if o.CRR && obs.CRRStorage != "" && obs.CRRStorage != "v1alpha1" {
		errs = append(errs, fmt.Errorf("this cluster stores ContainerRecreateRequests as %s (a Kruise build newer than v1.9) in Kruise's CRD, "+
			"which kruise-manager's webhook converts: probeshim's node services read v1alpha1, and once Kruise goes no version could be read "+
			"(probeshim converts only on a CRD of its own): hand over --probes only, and keep Kruise for ContainerRecreateRequests", obs.CRRStorage))
	}
	return errors.Join(errs...)
}

func writeRecord(ctx context.Context, c client.Client, ns string, cm *corev1.ConfigMap, rec Record, dryRun bool) error {
	data := map[string]string{}
	for w, rm := range rec {
		b, err := json.Marshal(rm)
		if err != nil {
			return err
		}
		data[string(w)] = string(b)
	}
	if dryRun {
		return nil
	}
	if cm == nil {
		if len(data) == 0 {
			return nil
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: HandoverConfigMap}, Data: data}
		return c.Create(ctx, cm)
	}
	if len(data) == 0 {
		return client.IgnoreNotFound(c.Delete(ctx, cm))
	}
	cm.Data = data
	return c.Update(ctx, cm)
}

// adoptProbes: Kruise's PodProbeMarker finalizer would keep deleted markers Terminating forever
// now that Kruise's controller is off; probeshim keeps no finalizer (its NodePodProbe entries go
// with the pods and markers they come from). The rest is the controllers' once they stop holding:
// status.observedGeneration and matchedPods, each node's NodePodProbe (probeshim adds its Node
// owner reference and replaces Kruise's "<marker>#<probe>" entries with its own), and the pod
// conditions Kruise left (the next result rewrites each and records it as probeshim's).
func adoptProbes(ctx context.Context, c client.Client, o HandoverOptions, p func(string, ...any)) error {
	var ppms v1alpha1.PodProbeMarkerList
	if err := c.List(ctx, &ppms); err != nil {
		return fmt.Errorf("listing PodProbeMarkers: %w", err)
	}
	for i := range ppms.Items {
		m := &ppms.Items[i]
		if !slices.Contains(m.Finalizers, FinalizerPPM) {
			continue
		}
		if !o.DryRun {
			patch := client.MergeFrom(m.DeepCopy())
			m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == FinalizerPPM })
			if err := c.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("PodProbeMarker %s/%s: removing %s: %w", m.Namespace, m.Name, FinalizerPPM, err)
			}
		}
		p("PodProbeMarker %s/%s: removed Kruise's finalizer %s", m.Namespace, m.Name, FinalizerPPM)
	}
	var npps v1alpha1.NodePodProbeList
	if err := c.List(ctx, &npps); err != nil {
		return fmt.Errorf("listing NodePodProbes: %w", err)
	}
	for _, n := range npps.Items {
		if !slices.ContainsFunc(n.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "Node" }) {
			p("NodePodProbe %s: Kruise's (%d pods); probeshim's nodepodprobe controller adopts it and rewrites its entries", n.Name, len(n.Spec.PodProbes))
		}
	}
	p("PodProbeMarkers: %d; probeshim writes their status (observedGeneration, matchedPods) and pod conditions from now on", len(ppms.Items))
	return nil
}

// adoptCRR hands the requests Kruise admitted to probeshim's node services (by removing the label
// that kept them away) and drops Kruise's unready-acquired finalizer, which only kruise-manager
// removes: probeshim's lifecycle controller keeps the pod's KruisePodReady holders in the same
// form ({userAgent: ContainerRecreateRequest, key: <ns>/<name>}) and releases them when a request
// ends.
func adoptCRR(ctx context.Context, c client.Client, o HandoverOptions, p func(string, ...any)) error {
	var crrs v1alpha1.ContainerRecreateRequestList
	if err := c.List(ctx, &crrs); err != nil {
		return fmt.Errorf("listing ContainerRecreateRequests: %w", err)
	}
	for i := range crrs.Items {
		r := &crrs.Items[i]
		_, labelled := r.Labels[v1alpha1.LabelCRRExecutor]
		fin := slices.Contains(r.Finalizers, FinalizerCRRUnready)
		if !labelled && !fin {
			continue
		}
		if !o.DryRun {
			patch := client.MergeFrom(r.DeepCopy())
			delete(r.Labels, v1alpha1.LabelCRRExecutor)
			r.Finalizers = slices.DeleteFunc(r.Finalizers, func(f string) bool { return f == FinalizerCRRUnready })
			if err := c.Patch(ctx, r, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("ContainerRecreateRequest %s/%s: %w", r.Namespace, r.Name, err)
			}
		}
		state := "completed"
		if r.Labels[v1alpha1.LabelCRRActive] == "true" || r.Status.CompletionTime == nil {
			state = "in flight (phase " + string(r.Status.Phase) + ")"
		}
		p("ContainerRecreateRequest %s/%s, %s: adopted (executor label removed: %t, finalizer %s removed: %t)",
			r.Namespace, r.Name, state, labelled, FinalizerCRRUnready, fin)
	}
	return nil
}

// rollback gives the work back: the record loses it (the keeper stops), the webhook entries come
// back as they were. Kruise's gates are the admin's to turn on afterwards. ContainerRecreateRequests
// in flight with probeshim are waited for, not handed over midway.
func rollback(ctx context.Context, c client.Client, o HandoverOptions, p func(string, ...any)) error {
	rec, cm, err := ReadRecord(ctx, c, o.Namespace)
	if err != nil {
		return err
	}
	if o.CRR {
		var crrs v1alpha1.ContainerRecreateRequestList
		if err := c.List(ctx, &crrs, client.MatchingLabels{v1alpha1.LabelCRRActive: "true"}); err != nil {
			return fmt.Errorf("listing ContainerRecreateRequests: %w", err)
		}
		var busy []string
		for _, r := range crrs.Items {
			if r.Labels[v1alpha1.LabelCRRExecutor] == "" {
				busy = append(busy, r.Namespace+"/"+r.Name)
			}
		}
		if len(busy) > 0 {
			return fmt.Errorf("probeshim is carrying out %d ContainerRecreateRequests (%v): run the rollback again once they completed", len(busy), busy)
		}
	}
	// The record first: once it lost the work the keeper no longer strips what is restored.
	given := Record{}
	for _, w := range o.works() {
		if rm, ok := rec[w]; ok {
			given[w] = rm
			delete(rec, w)
		} else {
			p("%s: not handed over (nothing in %s/%s)", w, o.Namespace, HandoverConfigMap)
		}
	}
	if err := writeRecord(ctx, c, o.Namespace, cm, rec, o.DryRun); err != nil {
		return err
	}
	if len(rec) == 0 {
		if err := unbindKeeper(ctx, c, p, o.DryRun); err != nil {
			return err
		}
	}
	for _, w := range o.works() {
		rm, ok := given[w]
		if !ok {
			continue
		}
		restored, err := Restore(ctx, c, rm, o.DryRun)
		switch {
		case apierrors.IsNotFound(err):
			p("%s: Kruise's %s is gone; nothing to restore", w, rm.Config)
		case err != nil:
			return fmt.Errorf("restoring %s in %s: %w", rm.Webhook, rm.Config, err)
		case restored:
			p("restored webhook %s in %s", rm.Webhook, rm.Config)
		default:
			p("webhook %s: already in %s", rm.Webhook, rm.Config)
		}
	}
	if o.Probes {
		p("next: set Kruise's %s=true; probeshim holds its probe work off as soon as it sees Kruise's probe path live", GatePodProbeMarker)
	}
	if o.CRR {
		p("next: set Kruise's %s=true; new requests are then admitted for kruise-daemon", GateKruiseDaemon)
	}
	// Harmless with Kruise back, and what keeps the objects should Kruise be uninstalled later.
	p("the CRDs stay marked %s=%s (in Kruise's Helm release too, if the handover marked them there)", HelmResourcePolicy, HelmKeep)
	return nil
}
