// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// detect fakes the host: its name, whether the kubelet's kubeconfig exists,
// and containerd's socket.
func detect(name string, kubeletConf bool) host {
	return host{
		hostname:      func() (string, error) { return name, nil },
		fileExists:    func(p string) bool { return kubeletConf && p == KubeletKubeconfig },
		defaultSocket: func() string { return "/run/containerd/containerd.sock" },
	}
}

func loadOn(t *testing.T, h host, args ...string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("probeshim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return load(fs, args, h)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	h := detect("Worker-1.Example.COM", false)
	_, err := loadOn(t, h, "--config", filepath.Join(t.TempDir(), "none.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing --config file must be an error, got %v", err)
	}
	c, err := loadOn(t, h, "--config="+writeFile(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		NodeName: "worker-1.example.com", Kubeconfig: DedicatedKubeconfig, KubeAPIQPS: 5, KubeAPIBurst: 10,
		ContainerdSocket: "/run/containerd/containerd.sock", CRISocket: "/run/containerd/containerd.sock",
		HealthAddress: "127.0.0.1:10268", MetricsAddress: "127.0.0.1:10268",
		StatusSocket: "/run/probeshim/probeshim.sock", LogLevel: "info", MaxProcs: 1,
		CRIProxy: CRIProxy{Enabled: false, Socket: "/run/probeshim/cri.sock"},
		Probes: Probes{MaxConcurrentExecs: 32, MaxConcurrentNetwork: 256, MaxConcurrentExecsPerNamespace: 8,
			MaxConcurrentNetworkPerNamespace: 64, MaxTimeoutSeconds: 30, MessageIntervalSeconds: 10},
		Heartbeat: Heartbeat{Namespace: "probeshim-node-lease", LeaseDurationSeconds: 40, RenewIntervalSeconds: 10},
	}
	if *c != want {
		t.Fatalf("defaults = %+v\nwant       %+v", *c, want)
	}

	h = detect("node-a", true)
	c, err = loadOn(t, h, "--config="+writeFile(t, "{}"))
	if err != nil || c.Kubeconfig != KubeletKubeconfig {
		t.Fatalf("with the kubelet's kubeconfig present: %+v, %v", c, err)
	}
}

func TestMissingDefaultFileIsFine(t *testing.T) {
	h := detect("node-a", false)
	if _, err := os.Stat(DefaultFile); err == nil {
		t.Skip(DefaultFile + " exists on this machine")
	}
	if c, err := loadOn(t, h); err != nil || c.NodeName != "node-a" {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestFileAndFlags(t *testing.T) {
	h := detect("ignored", false)
	path := writeFile(t, `
nodeName: from-file
kubeconfig: /etc/probeshim/kubeconfig
kubeAPIQPS: 20
kubeAPIBurst: 40
containerdSocket: /var/run/containerd/containerd.sock
healthAddress: 127.0.0.1:9000
metricsAddress: "[::1]:9001"
statusSocket: /run/ps/status.sock
logLevel: debug
`)
	c, err := loadOn(t, h, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "from-file" || c.KubeAPIQPS != 20 || c.KubeAPIBurst != 40 || c.CRISocket != "/var/run/containerd/containerd.sock" ||
		c.HealthAddress != "127.0.0.1:9000" || c.MetricsAddress != "[::1]:9001" || c.StatusSocket != "/run/ps/status.sock" || c.LogLevel != "debug" {
		t.Fatalf("from file: %+v", c)
	}

	// Flags override the file; fields no flag names keep the file's value.
	c, err = loadOn(t, h, "--config", path, "--node-name=from-flag", "--kube-api-qps=2.5", "--log-level", "warn", "--cri-socket", "/run/cri.sock")
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "from-flag" || c.KubeAPIQPS != 2.5 || c.LogLevel != "warn" || c.Level().String() != "warning" ||
		c.KubeAPIBurst != 40 || c.CRISocket != "/run/cri.sock" || c.ContainerdSocket != "/var/run/containerd/containerd.sock" {
		t.Fatalf("flags over file: %+v", c)
	}
}

func TestCRIProxy(t *testing.T) {
	h := detect("node-a", false)
	path := writeFile(t, "criProxy:\n  enabled: true\n  socket: /run/p/cri.sock\n")
	c, err := loadOn(t, h, "--config", path)
	if err != nil || !c.CRIProxy.Enabled || c.CRIProxy.Socket != "/run/p/cri.sock" {
		t.Fatalf("from file: %+v, %v", c, err)
	}
	c, err = loadOn(t, h, "--config", path, "--cri-proxy=false", "--cri-proxy-socket", "/run/q/cri.sock")
	if err != nil || c.CRIProxy.Enabled || c.CRIProxy.Socket != "/run/q/cri.sock" {
		t.Fatalf("flags over file: %+v, %v", c, err)
	}
	c, err = loadOn(t, h, "--config", writeFile(t, ""), "--cri-proxy")
	if err != nil || !c.CRIProxy.Enabled || c.CRIProxy.Socket != DefaultCRIProxySocket {
		t.Fatalf("--cri-proxy alone: %+v, %v", c, err)
	}
	_, err = loadOn(t, h, "--config", writeFile(t, "criProxy:\n  enable: true\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "enable"`) {
		t.Fatalf("unknown nested field: %v", err)
	}
	// The proxy must never be its own upstream, nor the service's runtime.
	for _, args := range [][]string{
		{"--cri-socket", "/run/probeshim/cri.sock"},
		{"--cri-proxy-socket", "/var/run/containerd/containerd.sock"},
		{"--cri-proxy", "--containerd-socket", "/run/probeshim/../probeshim/cri.sock"},
	} {
		_, err := loadOn(t, h, append([]string{"--config", writeFile(t, "")}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "is the CRI proxy's own socket") {
			t.Errorf("%v: error %v, want a refusal", args, err)
		}
	}
	_, err = loadOn(t, h, "--config", writeFile(t, ""), "--cri-proxy-socket", "cri.sock")
	if err == nil || !strings.Contains(err.Error(), `criProxy.socket: "cri.sock" must be an absolute path`) {
		t.Fatalf("relative socket: %v", err)
	}
}

func TestUnknownFieldNamed(t *testing.T) {
	h := detect("node-a", false)
	_, err := loadOn(t, h, "--config", writeFile(t, "nodeName: a\nnodeNmae: b\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "nodeNmae"`) || !strings.Contains(err.Error(), "nodeName") {
		t.Fatalf("unknown field: %v", err)
	}
	_, err = loadOn(t, h, "--config", writeFile(t, "healthAddress: a\nhealthAddress: b\n"))
	if err == nil || !strings.Contains(err.Error(), "healthAddress") {
		t.Fatalf("repeated field: %v", err)
	}
	_, err = loadOn(t, h, "--config", writeFile(t, "kubeAPIQPS: many\n"))
	if err == nil || !strings.Contains(err.Error(), "kubeAPIQPS") {
		t.Fatalf("wrong type: %v", err)
	}
	_, err = loadOn(t, h, "--config", writeFile(t, "nodeName: [\n"))
	if err == nil || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("bad YAML: %v", err)
	}
}

func TestValidation(t *testing.T) {
	h := detect("node-a", false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-name", "Not_A_Node"}, `nodeName: "Not_A_Node" is not a valid node name`},
		{[]string{"--kubeconfig", "kube.conf"}, `kubeconfig: "kube.conf" must be an absolute path`},
		{[]string{"--containerd-socket", "containerd.sock"}, `containerdSocket: "containerd.sock" must be an absolute path`},
		{[]string{"--status-socket", "x.sock"}, `statusSocket: "x.sock" must be an absolute path`},
		{[]string{"--kube-api-qps", "-1"}, "kubeAPIQPS: -1 must be above 0"},
		{[]string{"--kube-api-burst", "-3"}, "kubeAPIBurst: -3 must be at least 1"},
		{[]string{"--health-address", "10268"}, `healthAddress: "10268": must be IP:port`},
		{[]string{"--metrics-address", "example.com:80"}, `metricsAddress: "example.com:80": host "example.com" must be an IP address`},
		{[]string{"--metrics-address", "127.0.0.1:99999"}, `port "99999" must be a number`},
		{[]string{"--log-level", "loud"}, `logLevel: "loud" is not one of`},
		{[]string{"--max-concurrent-execs", "-1"}, "probes.maxConcurrentExecs: -1 must be from 1 to 10000"},
		{[]string{"--max-concurrent-network-probes", "100000"}, "probes.maxConcurrentNetwork: 100000 must be from 1 to 10000"},
		{[]string{"--max-procs", "-2"}, "maxProcs: -2 must be from 1 to 1024, or -1 for one per CPU"},
		{[]string{"--max-procs", "5000"}, "maxProcs: 5000 must be from 1 to 1024"},
		{[]string{"--message-interval-seconds", "-2"}, "probes.messageIntervalSeconds: -2 must be from 1 to 3600, or -1 for no bound"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "not defined"},
	} {
		_, err := loadOn(t, h, append([]string{"--config", writeFile(t, "")}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}

	// Every problem is reported at once.
	_, err := loadOn(t, h, "--config", writeFile(t, ""), "--node-name", "BAD", "--log-level", "x", "--kube-api-burst", "-1")
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("want three problems, got %v", err)
	}
	for _, ok := range []string{"127.0.0.1:0", "localhost:10268", "[::1]:10268", ":10268", "0.0.0.0:10268"} {
		if _, err := loadOn(t, h, "--config", writeFile(t, ""), "--health-address", ok); err != nil {
			t.Errorf("%s rejected: %v", ok, err)
		}
	}
}

// The probe pools' sizes come from the file, a flag overriding it; a namespace's share defaults
// to a quarter of its pool and must leave the others room.
func TestProbeConcurrency(t *testing.T) {
	h := detect("node-a", false)
	f := writeFile(t, "probes:\n  maxConcurrentExecs: 4\n  maxConcurrentNetwork: 64\n  messageIntervalSeconds: 30\n")
	c, err := loadOn(t, h, "--config", f)
	if err != nil || c.Probes != (Probes{MaxConcurrentExecs: 4, MaxConcurrentNetwork: 64, MaxConcurrentExecsPerNamespace: 1,
		MaxConcurrentNetworkPerNamespace: 16, MaxTimeoutSeconds: 30, MessageIntervalSeconds: 30}) {
		t.Fatalf("from the file: %+v, %v", c.Probes, err)
	}
	c, err = loadOn(t, h, "--config", f, "--max-concurrent-network-probes", "8", "--message-interval-seconds", "-1",
		"--max-concurrent-execs-per-namespace", "3", "--max-probe-timeout-seconds", "-1")
	if err != nil || c.Probes != (Probes{MaxConcurrentExecs: 4, MaxConcurrentNetwork: 8, MaxConcurrentExecsPerNamespace: 3,
		MaxConcurrentNetworkPerNamespace: 2, MaxTimeoutSeconds: -1, MessageIntervalSeconds: -1}) {
		t.Fatalf("with a flag: %+v, %v", c.Probes, err)
	}
	for _, args := range [][]string{
		{"--max-concurrent-execs-per-namespace", "4"},
		{"--max-concurrent-network-probes-per-namespace", "-2"},
	} {
		_, err := loadOn(t, h, append([]string{"--config", f}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "so that one namespace cannot hold every runner") {
			t.Errorf("%v: error %v, want the share refused", args, err)
		}
	}
}

// The heartbeat's lease has defaults agreed with the cluster part, may be
// set from the file or flags, and renews more often than it expires.
func TestHeartbeat(t *testing.T) {
	h := detect("node-a", false)
	c, err := loadOn(t, h, "--config", writeFile(t, ""))
	if err != nil || c.Heartbeat != (Heartbeat{Namespace: "probeshim-node-lease", LeaseDurationSeconds: 40, RenewIntervalSeconds: 10}) {
		t.Fatalf("defaults: %+v, %v", c.Heartbeat, err)
	}
	f := writeFile(t, "heartbeat:\n  namespace: example-leases\n  leaseDurationSeconds: 60\n  renewIntervalSeconds: 15\n")
	c, err = loadOn(t, h, "--config", f, "--heartbeat-renew-interval-seconds", "5")
	if err != nil || c.Heartbeat != (Heartbeat{Namespace: "example-leases", LeaseDurationSeconds: 60, RenewIntervalSeconds: 5}) {
		t.Fatalf("file and flag: %+v, %v", c.Heartbeat, err)
	}
	f = writeFile(t, "heartbeat:\n  endpoint: https://10.96.0.12:443\n  endpointCAFile: /etc/probeshim/heartbeat-ca.crt\n")
	c, err = loadOn(t, h, "--config", f)
	if err != nil || c.Heartbeat.Endpoint != "https://10.96.0.12:443" || c.Heartbeat.EndpointCAFile != "/etc/probeshim/heartbeat-ca.crt" {
		t.Fatalf("endpoint: %+v, %v", c.Heartbeat, err)
	}
	for _, bad := range [][]string{
		{"--heartbeat-endpoint", "http://10.96.0.12:443"},
		{"--heartbeat-endpoint", "https://10.96.0.12:443/probeshim"},
		{"--heartbeat-renew-interval-seconds", "40"},
		{"--heartbeat-renew-interval-seconds", "-1"},
		{"--heartbeat-lease-duration-seconds", "5"},
		{"--heartbeat-namespace", "Not_A_Namespace"},
	} {
		_, err := loadOn(t, h, append([]string{"--config", writeFile(t, "")}, bad...)...)
		if err == nil || !strings.Contains(err.Error(), "heartbeat.") {
			t.Errorf("%v: want an error naming the heartbeat field, got %v", bad, err)
		}
	}
}

func TestFileFields(t *testing.T) {
	got := strings.Join(fileFields(), ",")
	if got != "nodeName,kubeconfig,kubeAPIQPS,kubeAPIBurst,containerdSocket,criSocket,healthAddress,metricsAddress,statusSocket,logLevel,maxProcs,criProxy,probes,heartbeat" {
		t.Fatalf("fileFields = %s", got)
	}
}

// Every flag sets a field of the file, found by its address: the generated reference
// (hack/configdoc) shows each beside its field.
func TestFlagFields(t *testing.T) {
	fields := map[string]string{}
	for _, f := range FlagFields() {
		if f.Field == "" {
			t.Errorf("flag --%s sets no field of the file", f.Flag)
		}
		fields[f.Flag] = f.Field
	}
	for flag, field := range map[string]string{"node-name": "nodeName", "cri-proxy": "criProxy.enabled",
		"max-concurrent-network-probes-per-namespace": "probes.maxConcurrentNetworkPerNamespace", "heartbeat-endpoint": "heartbeat.endpoint"} {
		if fields[flag] != field {
			t.Errorf("flag --%s sets %q, want %q", flag, fields[flag], field)
		}
	}
}
