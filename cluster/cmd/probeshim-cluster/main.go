// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command probeshim-cluster is the cluster deployment of probeshim: the admission webhooks
// (enhanced liveness, PodProbeMarker, NodePodProbe), the controllers that turn PodProbeMarkers and
// enhanced-liveness pods into NodePodProbe work and results into pod metadata, and the upkeep of
// its own webhook certificate and admission policy parameters. Manifests: cluster/deploy.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/certs"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/nodepodprobe"
	"github.com/probeshim/probeshim/cluster/kruise"
	probeshimwebhook "github.com/probeshim/probeshim/cluster/webhook"
	buildversion "github.com/probeshim/probeshim/internal/version"
)

// usage heads `probeshim-cluster -h`, before the flags.
const usage = `probeshim-cluster — probeshim's cluster part: admission webhooks, controllers, the liveness decider.

Usage:
  probeshim-cluster [flags]                   run the cluster part (the Helm chart's Deployment does)
  probeshim-cluster explain <namespace>/<pod> why a pod is (not) probed and (not) restarted
  probeshim-cluster kruise handover ...       hand probing or ContainerRecreateRequests over from OpenKruise, or back
  probeshim-cluster selftest [flags]          check that the webhooks and CRDs serve (helm test)
  probeshim-cluster uninstall-check           whether uninstalling would leave pods without liveness

Each subcommand's -h says more. The kubeconfig: --kubeconfig, $KUBECONFIG, or in-cluster.

Flags:
`

// helpAsked is whether a subcommand's arguments ask only for its help (which exits 0, as -h does
// for the command itself).
func helpAsked(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help")
}

// version is set at build time (-ldflags "-X main.version=..."; make image does).
var version = "dev"

// options are the command's flags.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	leaderElect      bool
	leaderElectionID string
	namespace        string

	webhookHost       string
	webhookPort       int
	enableHTTP2       bool
	certDir           string
	serviceName       string
	secretName        string
	webhookConfigName string
	certMode          string
	certExtraNames    string
	clientCAFile      string
	clientNames       string
	servedNodes       string

	serviceAccountUsername string
	nodeGroup              string
	nodeUserPrefix         string

	nodeProbeBudget  int
	maxProbeTimeout  int
	nodeServiceGrace time.Duration

	kruiseNamespace    string
	kruiseDetectPeriod time.Duration
	kruiseKeepPeriod   time.Duration
	heartbeatRelay     bool
	servicePort        int
	printVersion       bool
}

func (o *options) bind(fs *flag.FlagSet) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "probeshim-system"
	}
	fs.BoolVar(&o.printVersion, "version", false, "print the version, the commit and its date, and the Go version, and exit")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview; see the ClusterRole probeshim-metrics-reader); false serves plain HTTP to anyone who reaches the port")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run the controllers only on the replica holding the Lease (webhooks run on every replica)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "probeshim-cluster", "name of the leader election Lease")
	fs.StringVar(&o.namespace, "namespace", ns, "namespace of the deployment: its Lease, certificate Secret, webhook Service and admission policy parameters; defaults to $POD_NAMESPACE when set")

	fs.StringVar(&o.webhookHost, "webhook-host", "", "address the webhook server listens on (default: all)")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "serve webhooks over HTTP/2 too; off by default because of HTTP/2 stream-reset floods (CVE-2023-44487, CVE-2023-39325)")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/var/run/probeshim/certs", "directory of the webhook server's tls.crt and tls.key; written by the deployment unless the certificate is managed externally")
	fs.StringVar(&o.serviceName, "webhook-service-name", "probeshim-webhook", "the webhook Service; the certificate is issued for its DNS names")
	fs.StringVar(&o.secretName, "webhook-secret-name", "probeshim-webhook-certs", "Secret holding the webhook CA and certificate")
	fs.StringVar(&o.webhookConfigName, "webhook-configuration-name", "probeshim", "name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration whose CA bundle the deployment keeps")
	fs.StringVar(&o.certMode, "cert-mode", string(certs.ModeAuto), "who manages the webhook certificate: self; external (e.g. cert-manager; only wait for the files); auto = self unless a webhook configuration carries cert-manager.io/inject-ca-from")
	fs.StringVar(&o.clientCAFile, "webhook-client-ca-file", "", "PEM CA bundle of the client certificate the API server presents to admission webhooks (its AdmissionConfiguration's kubeConfigFile); when set, the webhooks answer only clients with a certificate it signed, not any pod that reaches the Service")
	fs.StringVar(&o.clientNames, "webhook-client-names", "", "with --webhook-client-ca-file: comma-separated common names or DNS names the API server's client certificate may have (default: any the CA signed)")
	fs.StringVar(&o.certExtraNames, "webhook-cert-extra-names", "", "comma-separated further DNS names or IPs for the webhook certificate (e.g. for running outside the cluster)")

	fs.StringVar(&o.serviceAccountUsername, "service-account-username", "", "the deployment's own username, the only one the admission policy lets write NodePodProbe specs (default: system:serviceaccount:<namespace>:probeshim-cluster)")
	fs.StringVar(&o.nodeGroup, "node-group", "probeshim:nodes", "group of dedicated node service identities; empty with --node-user-prefix to allow only the kubelet's system:node:<name>")
	fs.IntVar(&o.nodeProbeBudget, "node-probe-budget", nodepodprobe.DefaultNodeBudget, "bytes the probes of one node may cost in its NodePodProbe; enhanced liveness probes come first; over it, markers (then, past the whole budget, liveness probes) of the namespaces over their fair share are left out on that node; keep it well under etcd's request limit (1.5 MiB by default)")
	fs.StringVar(&o.servedNodes, "served-node-affinity", v1alpha1.ServedNodeRequire, "how pods opted in to enhanced liveness are tied to nodes whose node service is live (label "+v1alpha1.LabelNodeServed+"): require (they wait, Pending, until such a node can take them), prefer, or off (on a node without a node service they run without liveness); a pod's annotation "+v1alpha1.AnnotationServedNodeAffinity+" overrides it")
	fs.IntVar(&o.maxProbeTimeout, "max-probe-timeout-seconds", validation.DefaultMaxTimeoutSeconds, "the most timeoutSeconds a marker's or an enhanced liveness probe may have; admission refuses more (a running probe holds one of its node's probe runners); -1: no ceiling")
	fs.DurationVar(&o.nodeServiceGrace, "node-service-grace", heartbeat.DefaultGrace, "how old a node service's heartbeat Lease (probeshim-node-lease/<node>, renewed every 10s) may be before its node counts as silent: its pods' marker conditions go Unknown, their marks follow each marker's probeshim.io/on-node-service-silent, and liveness restarts on the node are held")
	fs.StringVar(&o.kruiseNamespace, "kruise-namespace", kruise.DefaultNamespace, "namespace of OpenKruise's kruise-controller-manager and kruise-daemon, for detecting them")
	fs.DurationVar(&o.kruiseDetectPeriod, "kruise-detect-period", kruise.DefaultPeriod, "how often to look for OpenKruise parts that do probeshim's work (status: ConfigMap probeshim-kruise-status); probeshim holds that work off while they are live; 0 turns detection and holding off (only where Kruise is certainly absent)")
	fs.DurationVar(&o.kruiseKeepPeriod, "kruise-keep-period", kruise.DefaultKeepPeriod, "after a 'kruise handover', how often to remove again the Kruise webhook entries kruise-manager puts back")
	fs.BoolVar(&o.heartbeatRelay, "heartbeat-relay", true, "serve the heartbeat endpoint on the webhook server: node services on the kubelet's identity, which may not write their Lease themselves (NodeRestriction), have it renewed through it, authenticated by the API server's client CA (kube-system/extension-apiserver-authentication)")
	fs.IntVar(&o.servicePort, "webhook-service-port", 443, "port of the webhook Service, published for the node services with the heartbeat endpoint")
	fs.StringVar(&o.nodeUserPrefix, "node-user-prefix", "probeshim:node:", "a user <prefix><node> in --node-group acts for <node> (NodePodProbe and ContainerRecreateRequest status)")
}

// complete fills defaults that depend on other flags and rejects contradictions.
func (o *options) complete() error {
	if o.serviceAccountUsername == "" {
		o.serviceAccountUsername = "system:serviceaccount:" + o.namespace + ":probeshim-cluster"
	}
	var errs []error
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	}
	switch certs.Mode(o.certMode) {
	case certs.ModeAuto, certs.ModeSelf, certs.ModeExternal:
	default:
		errs = append(errs, fmt.Errorf("--cert-mode %q: want auto, self or external", o.certMode))
	}
	if o.maxProbeTimeout == 0 || o.maxProbeTimeout < -1 || o.maxProbeTimeout > 3600 {
		errs = append(errs, fmt.Errorf("--max-probe-timeout-seconds %d: want 1-3600, or -1 for no ceiling", o.maxProbeTimeout))
	}
	if o.nodeProbeBudget < 64<<10 || o.nodeProbeBudget > 1<<20 {
		errs = append(errs, fmt.Errorf("--node-probe-budget %d: want 65536-1048576 bytes", o.nodeProbeBudget))
	}
	if o.nodeServiceGrace < 20*time.Second {
		errs = append(errs, fmt.Errorf("--node-service-grace %s: want at least 20s, two renew periods of the node service", o.nodeServiceGrace))
	}
	if o.kruiseDetectPeriod < 0 || (o.kruiseDetectPeriod > 0 && o.kruiseDetectPeriod < time.Second) {
		errs = append(errs, fmt.Errorf("--kruise-detect-period %s: want 0 or at least 1s", o.kruiseDetectPeriod))
	}
	if o.servicePort <= 0 || o.servicePort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-service-port %d: want 1-65535", o.servicePort))
	}
	if o.webhookPort <= 0 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d: want 1-65535", o.webhookPort))
	}
	switch o.servedNodes {
	case v1alpha1.ServedNodeRequire, v1alpha1.ServedNodePrefer, v1alpha1.ServedNodeOff:
	default:
		errs = append(errs, fmt.Errorf("--served-node-affinity %q: want require, prefer or off", o.servedNodes))
	}
	if o.clientNames != "" && o.clientCAFile == "" {
		errs = append(errs, errors.New("--webhook-client-names needs --webhook-client-ca-file"))
	}
	return errors.Join(errs...)
}

// clientAuth is what --webhook-client-ca-file and --webhook-client-names ask for, or nil.
func (o *options) clientAuth() (*probeshimwebhook.ClientAuth, error) {
	if o.clientCAFile == "" {
		return nil, nil
	}
	var names []string
	for _, n := range strings.Split(o.clientNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	a, err := probeshimwebhook.LoadClientAuth(o.clientCAFile, names)
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca-file: %w", err)
	}
	return a, nil
}

func (o *options) extraNames() []string {
	var out []string
	for _, n := range strings.Split(o.certExtraNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func main() {
	if code, ok := kruiseSubcommand(); ok {
		os.Exit(code)
	}
	if code, ok := explainSubcommand(); ok {
		os.Exit(code)
	}
	if code, ok := uninstallCheckSubcommand(); ok {
		os.Exit(code)
	}
	if code, ok := selftestSubcommand(); ok {
		os.Exit(code)
	}
	var o options
	o.bind(flag.CommandLine)
	flag.CommandLine.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	klog.InitFlags(flag.CommandLine) // -v and friends, as in every Kubernetes component
	flag.Parse()
	if o.printVersion {
		fmt.Println("probeshim-cluster", buildversion.String(version))
		return
	}

	// One logger for controller-runtime and client-go (leader election logs through klog).
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	log := logger.WithName("setup")
	log.Info("starting", "version", buildversion.String(version))

	if err := o.complete(); err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "loading the API server configuration")
		os.Exit(1)
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, o); err != nil {
		log.Error(err, "probeshim-cluster stopped")
		os.Exit(1)
	}
}
