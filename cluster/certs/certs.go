// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package certs keeps the webhook server's TLS certificate without cert-manager: a CA and a
// serving certificate live in a Secret in the deployment's namespace, every replica writes them
// into the webhook server's certificate directory (controller-runtime's certificate watcher
// reloads them), and the CA bundle is patched into the webhook configurations and the conversion
// webhooks of the CRDs it serves.
//
// Any replica may create or rotate the Secret. Writes are optimistic: a replica that loses a race
// (AlreadyExists, Conflict) re-reads the Secret and uses what the winner wrote, so two replicas
// always converge on one certificate.
//
// When cert-manager manages the certificate instead (its cainjector annotation on the webhook
// configurations, or Mode external), the package only waits for the files to appear.
//
// Why not open-policy-agent/cert-controller (tried, v0.16.0): its rotator reads through a cache of
// its own, which lists and watches every webhook configuration and CRD of the cluster and every
// Secret of the namespace, where this package gets its objects by name (RBAC with resourceNames);
// and it replaces the CA and the serving certificate together, so a replica still serving the old
// pair fails the API server's handshakes until it reloads, where this package keeps the old CA in
// the bundle beside the new one. cert-manager is the maintained path (certManager.enabled).
package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Mode says who manages the certificate.
type Mode string

const (
	// ModeAuto manages the certificate unless a webhook configuration carries a cert-manager
	// cainjector annotation (see InjectAnnotations).
	ModeAuto Mode = "auto"
	// ModeSelf always manages the certificate.
	ModeSelf Mode = "self"
	// ModeExternal never touches the Secret or the CA bundles; something else (cert-manager, a
	// mounted Secret) puts tls.crt and tls.key into the certificate directory.
	ModeExternal Mode = "external"
)

// InjectAnnotations are cert-manager's cainjector annotations; either one on a webhook
// configuration means cert-manager owns its CA bundle.
var InjectAnnotations = []string{"cert-manager.io/inject-ca-from", "cert-manager.io/inject-ca-from-secret"}

// Keys of the Secret. tls.crt and tls.key are the serving pair (type kubernetes.io/tls); ca.crt
// is the bundle the webhook configurations trust, the signing CA first; ca.key signs renewals.
const (
	KeyCert     = corev1.TLSCertKey
	KeyKey      = corev1.TLSPrivateKeyKey
	KeyCABundle = "ca.crt"
	KeyCAKey    = "ca.key"
)

// Options configure a Manager.
type Options struct {
	// Namespace and SecretName locate the Secret.
	Namespace  string
	SecretName string
	// ServiceName is the webhook Service; the certificate is issued for its in-cluster DNS names.
	ServiceName string
	// ExtraNames are further DNS names or IP addresses for the certificate (e.g. for a local test).
	ExtraNames []string
	// CertDir is the webhook server's certificate directory (tls.crt, tls.key).
	CertDir string
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name the configurations
	// whose every webhook gets the CA bundle.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// ConversionCRDs name the CustomResourceDefinitions whose conversion webhook gets the CA
	// bundle, as long as it calls ServiceName in Namespace (a CRD of OpenKruise's, converted by
	// kruise-manager, is left alone).
	ConversionCRDs []string
	// Mode defaults to ModeAuto.
	Mode Mode
	// CAValidity defaults to 10 years, CertValidity to 1 year; each is renewed after two thirds.
	CAValidity   time.Duration
	CertValidity time.Duration
	// Interval between checks in Start; defaults to 1 minute. A check is a few GETs.
	Interval time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Manager keeps the certificate; see the package documentation.
type Manager struct {
	opts   Options
	reader client.Reader // uncached: a cached client would watch every Secret in the cluster
	client client.Client
	log    logr.Logger

	mu    sync.Mutex
	ready error // nil once the certificate files are in place
}

// New returns a Manager. reader should be uncached (a manager's APIReader).
func New(reader client.Reader, c client.Client, opts Options) (*Manager, error) {
	if opts.CertDir == "" {
		return nil, errors.New("certs: a certificate directory is required")
	}
	if opts.Mode == "" {
		opts.Mode = ModeAuto
	}
	switch opts.Mode {
	case ModeAuto, ModeSelf, ModeExternal:
	default:
		return nil, fmt.Errorf("certs: unknown mode %q (auto, self or external)", opts.Mode)
	}
	if opts.Mode != ModeExternal && (opts.Namespace == "" || opts.SecretName == "" || opts.ServiceName == "") {
		return nil, errors.New("certs: namespace, secret name and service name are required")
	}
	if opts.CAValidity <= 0 {
		opts.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if opts.CertValidity <= 0 {
		opts.CertValidity = 365 * 24 * time.Hour
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{opts: opts, reader: reader, client: c, log: logf.Log.WithName("certs"),
		ready: errors.New("webhook certificate not in place yet")}, nil
}

// DNSNames are the names the serving certificate is issued for: the Service's in-cluster names
// and the extra names.
func (m *Manager) DNSNames() []string {
	s, ns := m.opts.ServiceName, m.opts.Namespace
	return append([]string{s + "." + ns + ".svc", s + "." + ns + ".svc.cluster.local", s + "." + ns, s}, m.opts.ExtraNames...)
}

// Ensure makes one pass: the Secret holds a valid certificate for DNSNames (created or renewed
// as needed), the certificate directory holds it, and the webhook configurations trust its CA.
func (m *Manager) Ensure(ctx context.Context) error {
	err := m.ensure(ctx)
	m.mu.Lock()
	if err == nil {
		m.ready = nil
	} else if m.ready != nil {
		m.ready = err // once in place, the files keep serving while a later pass fails
	}
	m.mu.Unlock()
	return err
}

func (m *Manager) ensure(ctx context.Context) error {
	external, err := m.external(ctx)
	if err != nil {
		return err
	}
	if external {
		for _, name := range []string{KeyCert, KeyKey} {
			if _, err := os.Stat(filepath.Join(m.opts.CertDir, name)); err != nil {
				return fmt.Errorf("certificate managed externally, waiting for it: %w", err)
			}
		}
		return nil
	}
	secret, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	if err := m.writeFiles(secret); err != nil {
		return err
	}
	return m.injectCABundle(ctx, secret.Data[KeyCABundle])
}

// Start re-runs Ensure every Interval until ctx ends: renewals, the other replica's rotation and
// a CA bundle someone reset all converge within one interval.
func (m *Manager) Start(ctx context.Context) error {
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := m.Ensure(ctx); err != nil && ctx.Err() == nil {
				m.log.Error(err, "keeping the webhook certificate")
			}
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks and needs its own files.
func (m *Manager) NeedLeaderElection() bool { return false }

// ReadyCheck is a healthz.Checker that passes once the certificate files are in place.
func (m *Manager) ReadyCheck(_ *http.Request) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// external decides who manages the certificate in this pass.
func (m *Manager) external(ctx context.Context) (bool, error) {
	switch m.opts.Mode {
	case ModeExternal:
		return true, nil
	case ModeSelf:
		return false, nil
	}
	for _, obj := range m.bundleHolders() {
		if err := m.reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("reading webhook configuration %s: %w", obj.GetName(), err)
		}
		for _, a := range InjectAnnotations {
			if _, ok := obj.GetAnnotations()[a]; ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// bundleHolders are the objects that carry the CA bundle: the webhook configurations and the
// conversion CRDs.
func (m *Manager) bundleHolders() []client.Object {
	var objs []client.Object
	for _, n := range m.opts.MutatingWebhookConfigurations {
		objs = append(objs, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	for _, n := range m.opts.ValidatingWebhookConfigurations {
		objs = append(objs, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	for _, n := range m.opts.ConversionCRDs {
		objs = append(objs, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	return objs
}

// ensureSecret returns a Secret holding a usable certificate, creating or renewing it. Losing a
// race to the other replica is not an error: re-read and take what it wrote.
func (m *Manager) ensureSecret(ctx context.Context) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	var lastErr error
	for range 5 {
		secret := &corev1.Secret{}
		err := m.reader.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			data, err := m.issue(nil)
			if err != nil {
				return nil, err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels: map[string]string{"app.kubernetes.io/name": "probeshim", "app.kubernetes.io/component": "webhook"}},
				Type: corev1.SecretTypeTLS,
				Data: data,
			}
			err = m.client.Create(ctx, secret)
			if apierrors.IsAlreadyExists(err) {
				lastErr = err
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating secret %s: %w", key, err)
			}
			m.log.Info("created the webhook certificate", "secret", key, "names", m.DNSNames())
			return secret, nil
		case err != nil:
			return nil, fmt.Errorf("reading secret %s: %w", key, err)
		}

		reason := m.problem(secret.Data)
		if reason == "" {
			return secret, nil
		}
		data, err := m.issue(secret.Data)
		if err != nil {
			return nil, err
		}
		updated := secret.DeepCopy()
		updated.Data = data
		err = m.client.Update(ctx, updated) // carries the resourceVersion read above
		if apierrors.IsConflict(err) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("renewing secret %s: %w", key, err)
		}
		m.log.Info("renewed the webhook certificate", "secret", key, "reason", reason)
		return updated, nil
	}
	return nil, fmt.Errorf("secret %s keeps changing under us: %w", key, lastErr)
}

// problem says why the Secret's certificate must be replaced, or "" when it is fine.
func (m *Manager) problem(data map[string][]byte) string {
	now := m.opts.Now()
	ca, err := parsePair(data[KeyCABundle], data[KeyCAKey])
	if err != nil {
		return "CA unusable: " + err.Error()
	}
	if renewalDue(ca.cert, now) {
		return "CA due for renewal"
	}
	serving, err := parsePair(data[KeyCert], data[KeyKey])
	if err != nil {
		return "certificate unusable: " + err.Error()
	}
	if p := servingCertProblem(serving.cert, ca.cert, m.DNSNames(), now); p != "" {
		return "certificate " + p
	}
	return ""
}

// issue returns new Secret data: a serving certificate, signed by the current CA when that is
// still good and by a new one otherwise. A new CA is put in front of the bundle and the old ones
// stay in it until they expire.
func (m *Manager) issue(old map[string][]byte) (map[string][]byte, error) {
	now := m.opts.Now()
	ca, err := parsePair(old[KeyCABundle], old[KeyCAKey])
	if err != nil || renewalDue(ca.cert, now) {
		if ca, err = newCA(now, m.opts.CAValidity); err != nil {
			return nil, fmt.Errorf("creating a CA: %w", err)
		}
	}
	serving, err := newServingCert(ca, m.DNSNames(), now, m.opts.CertValidity)
	if err != nil {
		return nil, fmt.Errorf("creating the serving certificate: %w", err)
	}
	return map[string][]byte{
		KeyCert:     serving.certPEM,
		KeyKey:      serving.keyPEM,
		KeyCABundle: bundle(ca.cert, old[KeyCABundle], now),
		KeyCAKey:    ca.keyPEM,
	}, nil
}

// writeFiles puts the serving pair into the certificate directory when it differs from what is
// there. Each file is replaced by a rename, so the certificate watcher never reads half a file.
func (m *Manager) writeFiles(secret *corev1.Secret) error {
	if err := os.MkdirAll(m.opts.CertDir, 0o700); err != nil {
		return err
	}
	changed := false
	// The key first: a watcher that reads between the two renames sees a new key with the old
	// certificate, fails to pair them and keeps serving the old pair until the certificate lands.
	for _, name := range []string{KeyKey, KeyCert} {
		path := filepath.Join(m.opts.CertDir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, secret.Data[name]) {
			continue
		}
		tmp, err := os.CreateTemp(m.opts.CertDir, "."+name+".*")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(secret.Data[name])
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", path, err)
		}
		changed = true
	}
	if changed {
		m.log.Info("wrote the webhook certificate", "dir", m.opts.CertDir)
	}
	return nil
}

// injectCABundle sets caBundle on every webhook of the named configurations and CRDs. One that
// does not exist (yet) is skipped; the next pass picks it up.
func (m *Manager) injectCABundle(ctx context.Context, caBundle []byte) error {
	var errs []error
	for _, obj := range m.bundleHolders() {
		// A conflict means someone else (typically the other replica, with the same bundle) wrote
		// in between: read again and see whether anything is left to do.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := m.reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			orig := obj.DeepCopyObject().(client.Object)
			if !m.setCABundle(obj, caBundle) {
				return nil
			}
			// Optimistic lock: the merge patch replaces the whole webhooks list, so it must be
			// the list we read.
			if err := m.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return err
			}
			m.log.Info("patched the CA bundle", "kind", kindOf(obj), "name", obj.GetName())
			return nil
		})
		_, crd := obj.(*apiextensionsv1.CustomResourceDefinition)
		switch {
		case apierrors.IsNotFound(err):
			m.log.Info("not found; its CA bundle is set once it exists", "kind", kindOf(obj), "name", obj.GetName())
		case err != nil && crd:
			// Only the v1beta1 API waits on a conversion bundle; admission must not wait on it (an
			// image upgraded before its RBAC would otherwise stay unready, and fail-closed
			// webhooks refuse pods). Retried every pass.
			m.log.Error(err, "cannot set the CA bundle of the CRD's conversion webhook: the other API versions of its kind "+
				"cannot be read or written until it is set (is the deployment's RBAC current?)", "name", obj.GetName())
		case err != nil:
			errs = append(errs, fmt.Errorf("setting the CA bundle of %s: %w", obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// kindOf names obj's kind for a log line (the typed objects here carry no TypeMeta).
func kindOf(obj client.Object) string { return reflect.TypeOf(obj).Elem().Name() }

// setCABundle sets caBundle on every webhook of obj and reports whether anything changed.
func (m *Manager) setCABundle(obj client.Object, caBundle []byte) bool {
	changed := false
	set := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if !bytes.Equal(cc.CABundle, caBundle) {
			cc.CABundle = caBundle
			changed = true
		}
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig)
		}
	case *apiextensionsv1.CustomResourceDefinition:
		if c := o.Spec.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil && c.Webhook.ClientConfig != nil {
			cc := c.Webhook.ClientConfig
			if svc := cc.Service; svc != nil && svc.Namespace == m.opts.Namespace && svc.Name == m.opts.ServiceName && !bytes.Equal(cc.CABundle, caBundle) {
				cc.CABundle = caBundle
				changed = true
			}
		}
	}
	return changed
}
