// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var metav1GetOptions = metav1.GetOptions{}

// writeConfigs issues the certificates and writes the kubeconfigs and the
// config files of containerd, the CNI network, the kubelet and kube-proxy.
func (r *Rig) writeConfigs() error {
	p, err := newPKI(r.path("pki"))
	if err != nil {
		return err
	}
	r.pki = p
	if _, _, err := p.issue(certSpec{
		name: "apiserver", cn: "kube-apiserver", server: true,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(APIServerServiceIP)},
	}); err != nil {
		return err
	}
	if _, _, err := p.issue(certSpec{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}); err != nil {
		return err
	}
	for _, n := range r.nodes {
		if _, _, err := p.issue(certSpec{name: n.servingCertName(), cn: "system:node:" + n.name, orgs: []string{"system:nodes"}, server: true,
			dns: []string{n.name, "localhost"}, ips: []net.IP{net.ParseIP(n.ip), net.ParseIP("127.0.0.1")}}); err != nil {
			return err
		}
		if err := p.kubeconfig(n.KubeletKubeconfig(), r.inNetNSServer(), "system:node:"+n.name, "system:nodes"); err != nil {
			return err
		}
	}
	if err := p.writeClientCABundle(); err != nil {
		return err
	}
	if _, _, err := p.serviceAccountKey(); err != nil {
		return err
	}
	server := r.inNetNSServer()
	for _, k := range []struct{ file, user, group string }{
		{"admin.kubeconfig", "rig-admin", "system:masters"},
		{"controller-manager.kubeconfig", "system:kube-controller-manager", ""},
		{"scheduler.kubeconfig", "system:kube-scheduler", ""},
		{"kube-proxy.kubeconfig", "system:kube-proxy", ""},
	} {
		var groups []string
		if k.group != "" {
			groups = []string{k.group}
		}
		if err := p.kubeconfig(r.path(k.file), server, k.user, groups...); err != nil {
			return err
		}
	}
	if r.admin, err = r.hostRESTConfig(r.AdminKubeconfig()); err != nil {
		return err
	}
	if r.client, err = kubernetes.NewForConfig(r.admin); err != nil {
		return err
	}
	if err := r.writeRegistryHosts(); err != nil {
		return err
	}
	files := map[string]string{r.path("kube-proxy.yaml"): r.kubeProxyConfig()}
	for _, n := range r.nodes {
		files[n.path("containerd", "config.toml")] = n.containerdConfig()
		files[n.path("cni", "net.d", "10-rig.conflist")] = n.cniConfig()
		files[n.path("kubelet.yaml")] = n.kubeletConfig()
	}
	for f, content := range files {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rig) etcdArgs() []string {
	return joinArgs(r.bin("etcd"), map[string]string{
		"name":                        "rig",
		"data-dir":                    r.path("etcd"),
		"listen-client-urls":          "http://127.0.0.1:2379",
		"advertise-client-urls":       "http://127.0.0.1:2379",
		"listen-peer-urls":            "http://127.0.0.1:2380",
		"initial-advertise-peer-urls": "http://127.0.0.1:2380",
		"initial-cluster":             "rig=http://127.0.0.1:2380",
		"unsafe-no-fsync":             "true",
		"log-level":                   "warn",
	})
}

func (r *Rig) apiserverArgs() []string {
	pki := r.pki.path
	return joinArgs(r.bin("kube-apiserver"), map[string]string{
		"etcd-servers":         "http://127.0.0.1:2379",
		"bind-address":         "0.0.0.0",
		"secure-port":          fmt.Sprint(APIServerPort),
		"advertise-address":    NodeIP,
		"tls-cert-file":        pki("apiserver.crt"),
		"tls-private-key-file": pki("apiserver.key"),
		// A bundle: the rig's CA and the CAs of revocable identities
		// (RevocableKubeconfig), reloaded by the API server when it changes.
		"client-ca-file":                   pki(clientCABundle),
		"service-account-issuer":           "https://kubernetes.default.svc.cluster.local",
		"service-account-key-file":         pki("sa.pub"),
		"service-account-signing-key-file": pki("sa.key"),
		"service-cluster-ip-range":         ServiceCIDR,
		"authorization-mode":               "Node,RBAC",
		"enable-admission-plugins":         "NodeRestriction",
		"kubelet-client-certificate":       pki("apiserver-kubelet-client.crt"),
		"kubelet-client-key":               pki("apiserver-kubelet-client.key"),
		"kubelet-certificate-authority":    pki("ca.crt"),
		"kubelet-preferred-address-types":  "InternalIP,Hostname",
		// Services of webhooks (and aggregated APIs) resolve to pod IPs, so
		// the API server needs no kube-proxy rules of its own.
		"enable-aggregator-routing": "true",
		"allow-privileged":          "true",
		"profiling":                 "false",
		"v":                         "1",
	})
}

func (r *Rig) controllerManagerArgs() []string {
	kc := r.path("controller-manager.kubeconfig")
	return joinArgs(r.bin("kube-controller-manager"), map[string]string{
		"kubeconfig":                       kc,
		"authentication-kubeconfig":        kc,
		"authorization-kubeconfig":         kc,
		"bind-address":                     "127.0.0.1",
		"leader-elect":                     "false",
		"service-account-private-key-file": r.pki.path("sa.key"),
		"root-ca-file":                     r.pki.path("ca.crt"),
		"cluster-signing-cert-file":        r.pki.path("ca.crt"),
		"cluster-signing-key-file":         r.pki.path("ca.key"),
		"use-service-account-credentials":  "true",
		"service-cluster-ip-range":         ServiceCIDR,
		"v":                                "1",
	})
}

func (r *Rig) schedulerArgs() []string {
	kc := r.path("scheduler.kubeconfig")
	return joinArgs(r.bin("kube-scheduler"), map[string]string{
		"kubeconfig":                kc,
		"authentication-kubeconfig": kc,
		"authorization-kubeconfig":  kc,
		"bind-address":              "127.0.0.1",
		"leader-elect":              "false",
		"v":                         "1",
	})
}

func (r *Rig) kubeProxyArgs() []string {
	return []string{r.bin("kube-proxy"), "--config=" + r.path("kube-proxy.yaml"), "--v=1"}
}

func (n *Node) kubeletArgs() []string {
	return joinArgs(n.r.bin("kubelet"), map[string]string{
		"config":            n.path("kubelet.yaml"),
		"kubeconfig":        n.KubeletKubeconfig(),
		"root-dir":          n.KubeletRootDir(),
		"hostname-override": n.name,
		"node-ip":           n.ip,
		"v":                 "1",
	})
}

// servingCertName is the file name of the node kubelet's serving certificate.
func (n *Node) servingCertName() string {
	if n.index == 0 {
		return "kubelet-serving"
	}
	return "kubelet-serving-" + fileSafe(n.name)
}

func (r *Rig) bin(name string) string { return filepath.Join(r.cfg.KubeBin, name) }

// containerdArgs runs the rig's containerd (Config.ContainerdBin) with its
// folder first on PATH: containerd finds containerd-shim-runc-v2 by PATH, and
// the machine may have Debian's.
func (r *Rig) containerdArgs(n *Node) []string {
	return []string{"env", "PATH=" + r.cfg.ContainerdBin + ":" + os.Getenv("PATH"),
		filepath.Join(r.cfg.ContainerdBin, "containerd"), "--config", n.path("containerd", "config.toml")}
}

// ctr is the ctr of the rig's containerd, for image imports and readiness.
func (r *Rig) ctr() string { return filepath.Join(r.cfg.ContainerdBin, "ctr") }

// containerdConfig: own root, state and sockets; CRI with the CNI bridge;
// restrict_oom_score_adj because root here lacks CAP_SYS_RESOURCE; pod
// netns mounted under the state dir; runc (Config.Runc) with its state under
// the rig's folder. The format follows the row: 3 for containerd 2.x, whose
// CRI is split into io.containerd.cri.v1.runtime and .images, 2 for 1.7.
// (containerd 2.4's own is 4, which only moves [grpc] and [ttrpc] into
// io.containerd.server.v1.* plugins: 2.4 migrates a 3 at start, with a
// warning in its log.)
// config_path is the rig registry's hosts folder (hosts.toml per registry).
func (n *Node) containerdConfig() string {
	c := n.path("containerd")
	common := fmt.Sprintf(`root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

# NRI's socket is a fixed path (/var/run/nri/nri.sock): two rigs side by side would fight over it.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
`, filepath.Join(c, "root"), filepath.Join(c, "state"), n.ContainerdSocket(), n.ContainerdSocket()+".ttrpc",
		filepath.Join(c, "opt"))
	cni, runcRoot, runc := n.path("cni", "net.d"), n.path("run", "runc"), n.r.cfg.Runc
	if n.r.cfg.Row.ConfigVersion == 2 {
		return "version = 2\n" + common + fmt.Sprintf(`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[1]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[2]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[5]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[3]q
        BinaryName = %[4]q
`, PauseImage, cni, runcRoot, runc, n.registryHostsDir())
	}
	return "version = 3\n" + common + fmt.Sprintf(`
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[1]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[2]q
    max_conf_num = 1
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[3]q
        BinaryName = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
`, PauseImage, cni, runcRoot, runc, n.registryHostsDir())
}

// cniConfig: the rig's bridge is the pods' gateway; no masquerading, so pod
// traffic can go nowhere but the netns. The network is named after the rig.
// Every node's containerd plugs its pods into the same bridge, each from its
// own block of PodCIDR (own IPAM state) when the rig has several nodes.
func (n *Node) cniConfig() string {
	rng := fmt.Sprintf(`{"subnet": %q, "gateway": %q}`, PodCIDR, PodGateway)
	if start, end := n.ipamRange(); start != "" {
		rng = fmt.Sprintf(`{"subnet": %q, "gateway": %q, "rangeStart": %q, "rangeEnd": %q}`, PodCIDR, PodGateway, start, end)
	}
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[%s]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    }
  ]
}
`, n.r.cfg.Name, Bridge, rng, n.path("cni", "ipam"))
}

func (n *Node) kubeletConfig() string {
	r := n.r
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[2]s/%[3]s
cgroupsPerQOS: true
failSwapOn: false
makeIPTablesUtilChains: false
readOnlyPort: 0
address: %[4]s
port: 10250
tlsCertFile: %[5]s
tlsPrivateKeyFile: %[6]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[7]s
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: %[8]s
volumePluginDir: %[9]s
serializeImagePulls: false
registerNode: true
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
shutdownGracePeriod: 0s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
healthzBindAddress: 127.0.0.1
healthzPort: %[10]d
`, n.KubeletCRISocket(), r.cfg.Cgroup, n.podsCgroup(), n.ip, r.pki.path(n.servingCertName()+".crt"), r.pki.path(n.servingCertName()+".key"),
		r.pki.path("ca.crt"), n.path("pod-logs"), n.path("kubelet-plugins"), n.healthzPort())
}

// kubeProxyConfig: iptables mode inside the netns; conntrack settings left
// as they are, since they are global to the machine.
func (r *Rig) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: %[4]s
nodePortAddresses: ["primary"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, r.path("kube-proxy.kubeconfig"), r.cfg.NodeName, PodCIDR, NodeIP)
}

func (r *Rig) nodeReady(ctx context.Context, name string) bool {
	n, err := r.client.CoreV1().Nodes().Get(ctx, name, metav1GetOptions)
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// registryHostsDir is containerd's config_path, the folder of hosts.toml files
// per registry, served by the rig's own registry.
func (n *Node) registryHostsDir() string { return n.r.RegistryHostsDir() }
