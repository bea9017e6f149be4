// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package config is the node service's configuration: defaults, the file
// /etc/probeshim/config.yaml, and command-line flags, in that order of
// precedence from lowest to highest, then validated.
//
// An example file (every field is optional):
//
//	nodeName: worker-1                 # default: the host name, lowercased
//	kubeconfig: /etc/probeshim/kubeconfig
//	kubeAPIQPS: 5
//	kubeAPIBurst: 10
//	containerdSocket: /run/containerd/containerd.sock
//	criSocket: /run/containerd/containerd.sock
//	healthAddress: 127.0.0.1:10268     # /healthz and /readyz
//	metricsAddress: 127.0.0.1:10268    # /metrics and /metrics/probes; may share the health address
//	statusSocket: /run/probeshim/probeshim.sock
//	logLevel: info
//	maxProcs: 1                        # CPUs running Go code at once (GOMAXPROCS); -1: one per CPU
//	criProxy:                          # CRI proxy mode, off by default
//	  enabled: false
//	  socket: /run/probeshim/cri.sock
//	probes:                            # how many probes run at once
//	  maxConcurrentExecs: 32
//	  maxConcurrentNetwork: 256        # HTTP, TCP and gRPC
//	heartbeat:                         # the node's Lease, renewed while healthy
//	  namespace: probeshim-node-lease
//	  leaseDurationSeconds: 40
//	  renewIntervalSeconds: 10         # above 0, below leaseDurationSeconds
//	  endpoint: https://10.96.0.12:443 # the heartbeat endpoint (kubelet identity); default: published
//	  endpointCAFile: /etc/probeshim/heartbeat-ca.crt  # default: the published CA
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	probevalidation "github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/heartbeat"
	"github.com/probeshim/probeshim/shim/runtime"
)

// Defaults.
const (
	DefaultFile           = "/etc/probeshim/config.yaml"
	KubeletKubeconfig     = "/etc/kubernetes/kubelet.conf"
	DedicatedKubeconfig   = "/etc/probeshim/kubeconfig"
	DefaultKubeAPIQPS     = 5
	DefaultKubeAPIBurst   = 10
	DefaultHealthAddress  = "127.0.0.1:10268"
	DefaultMetricsAddress = DefaultHealthAddress
	DefaultStatusSocket   = "/run/probeshim/probeshim.sock"
	DefaultLogLevel       = "info"
	// DefaultMaxProcs is GOMAXPROCS's default: a node agent whose work is mostly waiting on
	// sockets spends less CPU in Go's scheduler with one (node_exporter's default too).
	DefaultMaxProcs         = 1
	DefaultCRIProxySocket   = "/run/probeshim/cri.sock"
	defaultContainerdSocket = "" // detected: runtime.DefaultSocket
)

// maxProcs is far above any node's CPUs; past it a typo would undo the bound.
const maxProcs = 1024

// maxConcurrency is far above what a node needs; past it a typo would undo
// the bound of a probe pool.
const maxConcurrency = 10000

// Config is the node service's configuration. The JSON names are the
// file's field names.
type Config struct {
	// NodeName is this node's name in the API server; the service reads and
	// writes only this node's objects.
	NodeName string `json:"nodeName,omitempty"`
	// Kubeconfig is the API server credentials: the kubelet's own (identity
	// system:node:<name>) or a dedicated one.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// KubeAPIQPS and KubeAPIBurst bound each kind of API traffic on its own (shim/kube): probe
	// status writes with pod reads, events, ContainerRecreateRequest steps. Lease renewals are not
	// limited.
	KubeAPIQPS   float64 `json:"kubeAPIQPS,omitempty"`
	KubeAPIBurst int     `json:"kubeAPIBurst,omitempty"`
	// ContainerdSocket and CRISocket are containerd's socket and the CRI
	// socket (by default the same).
	ContainerdSocket string `json:"containerdSocket,omitempty"`
	CRISocket        string `json:"criSocket,omitempty"`
	// HealthAddress serves /healthz and /readyz, MetricsAddress /metrics;
	// both on localhost by default, and one listener when they are equal.
	HealthAddress  string `json:"healthAddress,omitempty"`
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// StatusSocket is the local unix socket `probeshim status` reads.
	StatusSocket string `json:"statusSocket,omitempty"`
	// LogLevel is a logrus level: panic, fatal, error, warn, info, debug, trace.
	LogLevel string `json:"logLevel,omitempty"`
	// MaxProcs is how many CPUs run the service's Go code at once (GOMAXPROCS; system calls and
	// the kernel's network work are not bounded by it). Default 1 (DefaultMaxProcs); -1: one per CPU
	// the service may use, Go's own default.
	MaxProcs int `json:"maxProcs,omitempty"`
	// CRIProxy is the optional CRI proxy the kubelet may use as its runtime
	// endpoint; it forwards to CRISocket.
	CRIProxy CRIProxy `json:"criProxy,omitzero"`
	// Probes bounds the probe engine's work.
	Probes Probes `json:"probes,omitzero"`
	// Heartbeat is the node service's Lease, which the cluster part reads
	// to tell a silent node service.
	Heartbeat Heartbeat `json:"heartbeat,omitzero"`
}

// Heartbeat configures the Lease (coordination.k8s.io/v1) named after the
// node that the service renews while it is healthy.
type Heartbeat struct {
	// Namespace holds the leases of every node (default probeshim-node-lease).
	Namespace string `json:"namespace,omitempty"`
	// LeaseDurationSeconds is written to the lease as spec.leaseDurationSeconds
	// (default 40); the cluster part's own grace decides when a node counts
	// as silent.
	LeaseDurationSeconds int `json:"leaseDurationSeconds,omitempty"`
	// RenewIntervalSeconds is how often the lease is renewed (default 10).
	RenewIntervalSeconds int `json:"renewIntervalSeconds,omitempty"`
	// Endpoint is the cluster deployment's heartbeat endpoint (https://host:port), which renews
	// the lease for an identity that may not write it (the kubelet's); by default it is found
	// through the ConfigMap the deployment publishes in Namespace.
	Endpoint string `json:"endpoint,omitempty"`
	// EndpointCAFile verifies the endpoint; by default the published CA does.
	EndpointCAFile string `json:"endpointCAFile,omitempty"`
}

// Probes bounds how many probes run at once, so that targets which hang
// until their timeout cannot make the service run thousands of probes (and
// hold their memory) at once. A due probe that finds its pool full waits and
// is counted in probeshim_probes_started_late_total.
type Probes struct {
	// MaxConcurrentExecs bounds exec probes (each a process in a container).
	MaxConcurrentExecs int `json:"maxConcurrentExecs,omitempty"`
	// MaxConcurrentNetwork bounds HTTP, TCP and gRPC probes.
	MaxConcurrentNetwork int `json:"maxConcurrentNetwork,omitempty"`
	// MaxConcurrentExecsPerNamespace and MaxConcurrentNetworkPerNamespace bound one
	// namespace's share of those (default a quarter), so that one tenant's hanging probes
	// leave runners to the others.
	MaxConcurrentExecsPerNamespace   int `json:"maxConcurrentExecsPerNamespace,omitempty"`
	MaxConcurrentNetworkPerNamespace int `json:"maxConcurrentNetworkPerNamespace,omitempty"`
	// MaxTimeoutSeconds caps every probe's timeout (default 30, the cluster part's admission
	// ceiling; -1: none): a NodePodProbe written past admission cannot hold runners longer.
	MaxTimeoutSeconds int `json:"maxTimeoutSeconds,omitempty"`
	// MessageIntervalSeconds is the least time between two NodePodProbe status writes that only
	// publish new probe messages (a state change is written at once; a held message goes with
	// the next write, at the latest after the interval). Default 10; -1: every message at once.
	MessageIntervalSeconds int `json:"messageIntervalSeconds,omitempty"`
}

// DefaultMessageIntervalSeconds is probes.messageIntervalSeconds's default.
const DefaultMessageIntervalSeconds = 10

// CRIProxy configures CRI proxy mode.
type CRIProxy struct {
	// Enabled makes the service create and serve Socket itself. A socket
	// passed by systemd (probeshim-cri.socket) is served either way: the
	// kubelet may already be waiting on it.
	Enabled bool `json:"enabled,omitempty"`
	// Socket is where the proxy listens when it creates the socket itself.
	Socket string `json:"socket,omitempty"`
}

// host is what Complete detects on the machine; tests pass a fake one.
type host struct {
	hostname      func() (string, error)
	defaultSocket func() string
	fileExists    func(string) bool
}

func realHost() host {
	return host{hostname: os.Hostname, defaultSocket: runtime.DefaultSocket,
		fileExists: func(p string) bool { _, err := os.Stat(p); return err == nil }}
}

// flagSpec ties a command-line flag to a field.
type flagSpec struct {
	name, usage string
	field       func(*Config) any // pointer to the field
}

var flagSpecs = []flagSpec{
	{"node-name", "this node's name (default: the host name, lowercased)", func(c *Config) any { return &c.NodeName }},
	{"kubeconfig", "kubeconfig for the API server (default: " + KubeletKubeconfig + " if present, else " + DedicatedKubeconfig + ")", func(c *Config) any { return &c.Kubeconfig }},
	{"kube-api-qps", fmt.Sprintf("API server requests per second (default %d)", DefaultKubeAPIQPS), func(c *Config) any { return &c.KubeAPIQPS }},
	{"kube-api-burst", fmt.Sprintf("API server request burst (default %d)", DefaultKubeAPIBurst), func(c *Config) any { return &c.KubeAPIBurst }},
	{"containerd-socket", "containerd's socket (default: detected, /run/containerd/containerd.sock)", func(c *Config) any { return &c.ContainerdSocket }},
	{"cri-socket", "the CRI socket (default: containerd's socket)", func(c *Config) any { return &c.CRISocket }},
	{"health-address", "address for /healthz and /readyz (default " + DefaultHealthAddress + ")", func(c *Config) any { return &c.HealthAddress }},
	{"metrics-address", "address for /metrics (default " + DefaultMetricsAddress + ")", func(c *Config) any { return &c.MetricsAddress }},
	{"status-socket", "unix socket that probeshim status reads (default " + DefaultStatusSocket + ")", func(c *Config) any { return &c.StatusSocket }},
	{"log-level", "log level: error, warn, info, debug, trace (default " + DefaultLogLevel + ")", func(c *Config) any { return &c.LogLevel }},
	{"cri-proxy", "serve the CRI proxy on --cri-proxy-socket (a socket passed by systemd is served anyway)", func(c *Config) any { return &c.CRIProxy.Enabled }},
	{"cri-proxy-socket", "the CRI proxy's socket (default " + DefaultCRIProxySocket + ")", func(c *Config) any { return &c.CRIProxy.Socket }},
	{"max-procs", fmt.Sprintf("CPUs running the service's Go code at once (GOMAXPROCS); -1: one per CPU (default %d)", DefaultMaxProcs), func(c *Config) any { return &c.MaxProcs }},
	{"max-concurrent-execs", fmt.Sprintf("exec probes running at once at most (default %d)", prober.DefaultExecConcurrency), func(c *Config) any { return &c.Probes.MaxConcurrentExecs }},
	{"heartbeat-namespace", "namespace of the node's heartbeat Lease (default " + heartbeat.DefaultNamespace + ")", func(c *Config) any { return &c.Heartbeat.Namespace }},
	{"heartbeat-lease-duration-seconds", fmt.Sprintf("the heartbeat Lease's leaseDurationSeconds (default %d)", int(heartbeat.DefaultLeaseDuration/time.Second)), func(c *Config) any { return &c.Heartbeat.LeaseDurationSeconds }},
	{"heartbeat-renew-interval-seconds", fmt.Sprintf("how often the heartbeat Lease is renewed (default %d)", int(heartbeat.DefaultRenewInterval/time.Second)), func(c *Config) any { return &c.Heartbeat.RenewIntervalSeconds }},
	{"heartbeat-endpoint", "the cluster deployment's heartbeat endpoint, https://host:port, for an identity that may not write its Lease (the kubelet's) (default: published in the ConfigMap probeshim-heartbeat of the Lease namespace)", func(c *Config) any { return &c.Heartbeat.Endpoint }},
	{"heartbeat-endpoint-ca-file", "CA bundle that verifies the heartbeat endpoint (default: the published one)", func(c *Config) any { return &c.Heartbeat.EndpointCAFile }},
	{"max-concurrent-network-probes", fmt.Sprintf("HTTP, TCP and gRPC probes running at once at most (default %d)", prober.DefaultNetworkConcurrency), func(c *Config) any { return &c.Probes.MaxConcurrentNetwork }},
	{"max-probe-timeout-seconds", fmt.Sprintf("the longest a probe may run, whatever its timeoutSeconds; -1: no cap (default %d, as the cluster part's admission ceiling)", probevalidation.DefaultMaxTimeoutSeconds), func(c *Config) any { return &c.Probes.MaxTimeoutSeconds }},
	{"max-concurrent-execs-per-namespace", "exec probes of one namespace running at once at most (default: a quarter of max-concurrent-execs)", func(c *Config) any { return &c.Probes.MaxConcurrentExecsPerNamespace }},
	{"max-concurrent-network-probes-per-namespace", "network probes of one namespace running at once at most (default: a quarter of max-concurrent-network-probes)", func(c *Config) any { return &c.Probes.MaxConcurrentNetworkPerNamespace }},
	{"message-interval-seconds", fmt.Sprintf("least seconds between two status writes that only change probe messages; -1: no bound (default %d)", DefaultMessageIntervalSeconds), func(c *Config) any { return &c.Probes.MessageIntervalSeconds }},
}

// Load registers the flags on fs, parses args, reads the config file
// (--config, default DefaultFile; a missing default file is fine, a missing
// named one is not), lets set flags override the file, fills in defaults and
// validates. Errors name the file, field or flag at fault.
func Load(fs *flag.FlagSet, args []string) (*Config, error) { return load(fs, args, realHost()) }

func load(fs *flag.FlagSet, args []string, h host) (*Config, error) {
	var fromFlags Config
	file := fs.String("config", DefaultFile, "configuration file")
	for _, s := range flagSpecs {
		switch p := s.field(&fromFlags).(type) {
		case *string:
			fs.StringVar(p, s.name, "", s.usage)
		case *int:
			fs.IntVar(p, s.name, 0, s.usage)
		case *float64:
			fs.Float64Var(p, s.name, 0, s.usage)
		case *bool:
			fs.BoolVar(p, s.name, false, s.usage)
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })

	cfg, err := LoadFile(*file)
	switch {
	case errors.Is(err, os.ErrNotExist) && !explicit:
		cfg = &Config{}
	case err != nil:
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		for _, s := range flagSpecs {
			if s.name != f.Name {
				continue
			}
			switch dst := s.field(cfg).(type) {
			case *string:
				*dst = *s.field(&fromFlags).(*string)
			case *int:
				*dst = *s.field(&fromFlags).(*int)
			case *float64:
				*dst = *s.field(&fromFlags).(*float64)
			case *bool:
				*dst = *s.field(&fromFlags).(*bool)
			}
		}
	})
	if err := cfg.complete(h); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

var (
	unknownField = regexp.MustCompile(`unknown field "([^"]*)"`)
	// yamlNoise strips the decoder layers from messages such as "error
	// unmarshaling JSON: while decoding JSON: json: cannot unmarshal string
	// into Go struct field Config.kubeAPIQPS of type float64".
	yamlNoise = strings.NewReplacer("error converting YAML to JSON: ", "", "error unmarshaling JSON: ", "",
		"while decoding JSON: ", "", "json: ", "", "Go struct field Config.", "field ")
)

// LoadFile reads a config file strictly: an unknown or repeated field is an
// error that names it. It neither fills defaults nor validates.
func LoadFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("config file %s: unknown field %q (known fields: %s)", path, m[1], strings.Join(fileFields(), ", "))
		}
		return nil, fmt.Errorf("config file %s: %s", path, yamlNoise.Replace(err.Error()))
	}
	return &c, nil
}

// fileFields lists the file's field names, from the JSON tags.
func fileFields() []string {
	t := reflect.TypeFor[Config]()
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		names = append(names, jsonName(f))
	}
	return names
}

// Complete fills every field left empty with its default, detecting the
// node name, the kubeconfig and the containerd socket.
func (c *Config) Complete() error { return c.complete(realHost()) }

func (c *Config) complete(h host) error {
	if c.NodeName == "" {
		name, err := h.hostname()
		if err != nil {
			return fmt.Errorf("nodeName not set and the host name is unknown: %w", err)
		}
		// The kubelet lowercases the host name for the node's name too.
		c.NodeName = strings.ToLower(strings.TrimSpace(name))
	}
	if c.Kubeconfig == "" {
		c.Kubeconfig = DedicatedKubeconfig
		if h.fileExists(KubeletKubeconfig) {
			c.Kubeconfig = KubeletKubeconfig
		}
	}
	if c.KubeAPIQPS == 0 {
		c.KubeAPIQPS = DefaultKubeAPIQPS
	}
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if c.MaxProcs == 0 {
		c.MaxProcs = DefaultMaxProcs
	}
	if c.ContainerdSocket == defaultContainerdSocket {
		c.ContainerdSocket = h.defaultSocket()
	}
	if c.CRISocket == "" {
		c.CRISocket = c.ContainerdSocket
	}
	if c.HealthAddress == "" {
		c.HealthAddress = DefaultHealthAddress
	}
	if c.MetricsAddress == "" {
		c.MetricsAddress = DefaultMetricsAddress
	}
	if c.StatusSocket == "" {
		c.StatusSocket = DefaultStatusSocket
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.CRIProxy.Socket == "" {
		c.CRIProxy.Socket = DefaultCRIProxySocket
	}
	if c.Probes.MaxConcurrentExecs == 0 {
		c.Probes.MaxConcurrentExecs = prober.DefaultExecConcurrency
	}
	if c.Probes.MaxConcurrentNetwork == 0 {
		c.Probes.MaxConcurrentNetwork = prober.DefaultNetworkConcurrency
	}
	if c.Probes.MaxTimeoutSeconds == 0 {
		c.Probes.MaxTimeoutSeconds = probevalidation.DefaultMaxTimeoutSeconds
	}
	if c.Probes.MaxConcurrentExecsPerNamespace == 0 {
		c.Probes.MaxConcurrentExecsPerNamespace = prober.DefaultNamespaceShare(c.Probes.MaxConcurrentExecs)
	}
	if c.Probes.MaxConcurrentNetworkPerNamespace == 0 {
		c.Probes.MaxConcurrentNetworkPerNamespace = prober.DefaultNamespaceShare(c.Probes.MaxConcurrentNetwork)
	}
	if c.Probes.MessageIntervalSeconds == 0 {
		c.Probes.MessageIntervalSeconds = DefaultMessageIntervalSeconds
	}
	if c.Heartbeat.Namespace == "" {
		c.Heartbeat.Namespace = heartbeat.DefaultNamespace
	}
	if c.Heartbeat.LeaseDurationSeconds == 0 {
		c.Heartbeat.LeaseDurationSeconds = int(heartbeat.DefaultLeaseDuration / time.Second)
	}
	if c.Heartbeat.RenewIntervalSeconds == 0 {
		c.Heartbeat.RenewIntervalSeconds = int(heartbeat.DefaultRenewInterval / time.Second)
	}
	return nil
}

// Validate checks a completed Config and reports every problem, each
// naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		bad("nodeName", "%q is not a valid node name: %s", c.NodeName, strings.Join(msgs, "; "))
	}
	for _, p := range []struct{ field, path string }{
		{"kubeconfig", c.Kubeconfig}, {"containerdSocket", c.ContainerdSocket}, {"criSocket", c.CRISocket}, {"statusSocket", c.StatusSocket},
		{"criProxy.socket", c.CRIProxy.Socket},
	} {
		if !filepath.IsAbs(p.path) {
			bad(p.field, "%q must be an absolute path", p.path)
		}
	}
	// The proxy forwards to criSocket, and the service's own calls never go
	// through the proxy: either pointing at the proxy's socket would loop.
	for _, p := range []struct{ field, path string }{{"criSocket", c.CRISocket}, {"containerdSocket", c.ContainerdSocket}} {
		if sameSocket(p.path, c.CRIProxy.Socket) {
			bad(p.field, "%q is the CRI proxy's own socket (criProxy.socket); it must be containerd's socket", p.path)
		}
	}
	if c.KubeAPIQPS <= 0 {
		bad("kubeAPIQPS", "%v must be above 0", c.KubeAPIQPS)
	}
	if c.KubeAPIBurst < 1 {
		bad("kubeAPIBurst", "%d must be at least 1", c.KubeAPIBurst)
	}
	if c.MaxProcs < -1 || c.MaxProcs == 0 || c.MaxProcs > maxProcs {
		bad("maxProcs", "%d must be from 1 to %d, or -1 for one per CPU", c.MaxProcs, maxProcs)
	}
	for _, a := range []struct{ field, addr string }{{"healthAddress", c.HealthAddress}, {"metricsAddress", c.MetricsAddress}} {
		if err := checkListenAddress(a.addr); err != nil {
			bad(a.field, "%q: %v", a.addr, err)
		}
	}
	c.Probes.validate(bad)
	if msgs := validation.IsDNS1123Label(c.Heartbeat.Namespace); len(msgs) > 0 {
		bad("heartbeat.namespace", "%q is not a valid namespace: %s", c.Heartbeat.Namespace, strings.Join(msgs, "; "))
	}
	if hb := c.Heartbeat; hb.RenewIntervalSeconds <= 0 || hb.RenewIntervalSeconds >= hb.LeaseDurationSeconds {
		bad("heartbeat.renewIntervalSeconds", "%d must be above 0 and below heartbeat.leaseDurationSeconds (%d)",
			hb.RenewIntervalSeconds, hb.LeaseDurationSeconds)
	}
	if e := c.Heartbeat.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("heartbeat.endpoint", "%q is not https://host[:port]", e)
		}
	}
	if _, err := logrus.ParseLevel(c.LogLevel); err != nil {
		bad("logLevel", "%q is not one of panic, fatal, error, warn, info, debug, trace", c.LogLevel)
	}
	return errors.Join(errs...)
}

// sameSocket compares socket paths; /var/run is /run on every distribution
// probeshim targets.

// validate checks the probe limits, reporting each problem through bad.
func (p *Probes) validate(bad func(field, format string, args ...any)) {
	for _, q := range []struct {
		field string
		n     int
	}{{"probes.maxConcurrentExecs", p.MaxConcurrentExecs}, {"probes.maxConcurrentNetwork", p.MaxConcurrentNetwork}} {
		if q.n < 1 || q.n > maxConcurrency {
			bad(q.field, "%d must be from 1 to %d", q.n, maxConcurrency)
		}
	}
	// A share as large as its pool would let one namespace hold every runner again.
	for _, q := range []struct {
		field, pool string
		n, max      int
	}{
		{"probes.maxConcurrentExecsPerNamespace", "probes.maxConcurrentExecs", p.MaxConcurrentExecsPerNamespace, p.MaxConcurrentExecs},
		{"probes.maxConcurrentNetworkPerNamespace", "probes.maxConcurrentNetwork", p.MaxConcurrentNetworkPerNamespace, p.MaxConcurrentNetwork},
	} {
		if q.n < 1 || (q.n >= q.max && q.max > 1) {
			bad(q.field, "%d must be from 1 to %d, less than %s (%d), so that one namespace cannot hold every runner", q.n, max(1, q.max-1), q.pool, q.max)
		}
	}
	if n := p.MaxTimeoutSeconds; n < -1 || n > 3600 {
		bad("probes.maxTimeoutSeconds", "%d must be from 1 to 3600, or -1 for no cap", n)
	}
	if n := p.MessageIntervalSeconds; n < -1 || n > 3600 {
		bad("probes.messageIntervalSeconds", "%d must be from 1 to 3600, or -1 for no bound", n)
	}
}

func sameSocket(a, b string) bool {
	norm := func(p string) string {
		p = filepath.Clean(p)
		if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
			p = "/run/" + rest
		}
		return p
	}
	return norm(a) == norm(b)
}

func checkListenAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("must be IP:port, e.g. 127.0.0.1:10268")
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q must be an IP address or localhost", host)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q must be a number from 0 to 65535", port)
	}
	return nil
}

// Level is the parsed log level of a validated Config.
func (c *Config) Level() logrus.Level {
	l, err := logrus.ParseLevel(c.LogLevel)
	if err != nil {
		return logrus.InfoLevel
	}
	return l
}
