// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package rig brings up a Kubernetes cluster from real components on this
// machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kube-proxy, and per node (one by default, more with Config.Nodes) a
// containerd with runc and the CNI bridge and a kubelet. All of
// it runs inside a network namespace the rig creates, with no route out, and
// everything it changes on the machine is written to a state file first so
// that Teardown can undo it even after the process that started it was
// killed.
//
// Start brings a rig up (cleaning leftovers of an earlier one first), Stop
// tears it down. The suites use it through e2e/framework.
package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The rig's network, all of it inside its own namespace.
const (
	// NodeIP is the node's InternalIP, on the port-less bridge NodeLink; the
	// API server advertises it and the kubelet serves on it.
	NodeIP   = "10.217.0.1"
	nodeCIDR = NodeIP + "/24"
	NodeLink = "rig-node0"
	// PodCIDR is the range the CNI bridge plugin hands out; PodGateway is the
	// bridge's address in it.
	PodCIDR        = "10.217.16.0/20"
	PodGateway     = "10.217.16.1"
	podGatewayCIDR = PodGateway + "/20"
	// ServiceCIDR holds the ClusterIPs; APIServerServiceIP is the
	// `kubernetes` Service, served by kube-proxy's rules.
	ServiceCIDR        = "10.217.64.0/20"
	APIServerServiceIP = "10.217.64.1"
	// Bridge is the pods' bridge; its address is PodGateway.
	Bridge = "rig0"
	// APIServerPort is the API server's port on every address of the netns.
	APIServerPort = 6443
	// ContainerdNamespace is the containerd namespace of the CRI plugin.
	ContainerdNamespace = "k8s.io"
)

// Config says where and how to bring the rig up. The zero value works.
type Config struct {
	// Dir holds everything of one run: certificates, configs, logs, etcd's
	// data, containerd's root and state, the kubelet's root. It is removed at
	// teardown. Default $PROBESHIM_RIG_DIR or /var/lib/<Name>.
	Dir string
	// KubeBin is the folder with kube-apiserver, kubelet, ..., etcd. Default
	// $PROBESHIM_KUBE_BIN, else the newest complete folder under
	// $PROBESHIM_CACHE/kube (default /var/cache/probeshim/kube) of Row's
	// Kubernetes line.
	KubeBin string
	// ContainerdBin is the folder with containerd, containerd-shim-runc-v2
	// and ctr (DefaultContainerdBin); Runc the runc binary (DefaultRunc).
	// Debian's are never used: the rig runs what e2e/containerdbin built.
	ContainerdBin string
	Runc          string
	// Row is the matrix row: which Kubernetes and containerd lines the
	// default folders come from and which config format containerd gets.
	// Default CurrentRow (PROBESHIM_ROW).
	Row Row
	// NodeName is the first node's name (default rig-node); further nodes
	// are named NodeName-b, NodeName-c, ...
	NodeName string
	// Nodes is how many nodes the rig runs (default 1, at most MaxNodes).
	// Each has its own kubelet and containerd; see Node.
	Nodes int
	// Name names the rig's netns, cgroup and folder unless NetNS, Cgroup or
	// Dir say otherwise: default $PROBESHIM_RIG_NAME or probeshim-rig. Rigs
	// of different names can run side by side (each in its own netns, so
	// even the ports do not collide); one of a name replaces the other.
	Name string
	// NetNS is the name of the network namespace (default Name).
	NetNS string
	// Cgroup is the rig's top-level cgroup in every hierarchy (default Name).
	Cgroup string
	// Images are pushed to the rig's registry in addition to PauseImage and TestImage.
	Images []Image
	// SkipPackages skips the check for Debian packages.
	SkipPackages bool
	// Timeout bounds the bring-up (default 10 minutes: a cold Go build cache
	// makes the image builds take minutes, more on a busy machine).
	Timeout time.Duration
	// Logf receives progress lines (default: discarded).
	Logf func(format string, args ...any)
}

// DefaultName is the rig's name unless Config.Name or $PROBESHIM_RIG_NAME say otherwise.
const DefaultName = "probeshim-rig"

// rigsHome holds each rig's folder, /var/lib/<name>, unless Config.Dir or $PROBESHIM_RIG_DIR say
// otherwise.
const rigsHome = "/var/lib"

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = os.Getenv("PROBESHIM_RIG_NAME")
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Dir == "" {
		c.Dir = os.Getenv("PROBESHIM_RIG_DIR")
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(rigsHome, c.Name)
	}
	c.Dir = filepath.Clean(c.Dir)
	if c.Row.Name == "" {
		c.Row, _ = CurrentRow() // Start reports a bad PROBESHIM_ROW
	}
	if c.KubeBin == "" {
		c.KubeBin = defaultKubeBin(c.Row)
	}
	if c.ContainerdBin == "" {
		c.ContainerdBin = DefaultContainerdBin()
	}
	if c.Runc == "" {
		c.Runc = DefaultRunc()
	}
	if c.NodeName == "" {
		c.NodeName = "rig-node"
	}
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.NetNS == "" {
		c.NetNS = c.Name
	}
	if c.Cgroup == "" {
		c.Cgroup = c.Name
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// KubeBinaries are the programs the rig needs in Config.KubeBin.
var KubeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "kubectl"}

// DefaultKubeBin returns $PROBESHIM_KUBE_BIN, or else the most recently built
// folder under $PROBESHIM_CACHE/kube of the current row's Kubernetes line
// that has all KubeBinaries, or "".
func DefaultKubeBin() string {
	row, err := CurrentRow()
	if err != nil {
		return ""
	}
	return defaultKubeBin(row)
}

func defaultKubeBin(row Row) string {
	if d := os.Getenv("PROBESHIM_KUBE_BIN"); d != "" {
		return d
	}
	return newestComplete("kube", row.Kube, KubeBinaries)
}

// MissingKubeBinaries lists the KubeBinaries that dir lacks.
func MissingKubeBinaries(dir string) []string { return missingIn(dir, KubeBinaries) }

func modTime(p string) time.Time {
	st, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// current is the newest rig of each folder started by this process. Start
// supersedes the one before: its Stop becomes a no-op, since the rig it
// would tear down is now the new one.
var (
	currentMu sync.Mutex
	current   = map[string]*Rig{}
)

func setCurrent(r *Rig) {
	currentMu.Lock()
	defer currentMu.Unlock()
	current[r.dir] = r
}

func supersede(dir string) {
	currentMu.Lock()
	old := current[dir]
	delete(current, dir)
	currentMu.Unlock()
	if old == nil {
		return
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if !old.stopped && old.fwd != nil {
		old.fwd.Close()
	}
	old.stopped = true
}

// Rig is a running cluster.
type Rig struct {
	cfg       Config
	dir       string
	netnsPath string
	state     *state
	cgroups   *cgroups
	pki       *pki
	procs     []*process
	fwd       *forwarder
	nsHTTP    *http.Client
	admin     *rest.Config
	client    kubernetes.Interface
	mu        sync.Mutex
	stopped   bool
	nodes     []*Node
}

// Start tears down whatever an earlier rig left behind, then brings a new one
// up and returns once the node is Ready, the default ServiceAccount exists and
// the images are imported. On failure it tears down what it started and the
// error carries the end of the failing component's log.
func Start(ctx context.Context, cfg Config) (*Rig, error) {
	cfg = cfg.withDefaults()
	if cfg.Nodes < 1 || cfg.Nodes > MaxNodes {
		return nil, fmt.Errorf("rig: %d nodes asked for, 1 to %d supported", cfg.Nodes, MaxNodes)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the rig needs root")
	}
	if _, err := CurrentRow(); err != nil && cfg.Row.Name == "" {
		return nil, err
	}
	if missing := MissingKubeBinaries(cfg.KubeBin); len(missing) > 0 {
		return nil, fmt.Errorf("kube binaries folder %q lacks %v: run e2e/kubebin/build.sh %s and set PROBESHIM_KUBE_BIN", cfg.KubeBin, missing, cfg.Row.Kube)
	}
	if missing := missingIn(cfg.ContainerdBin, ContainerdBinaries); len(missing) > 0 {
		return nil, fmt.Errorf("containerd folder %q lacks %v: run e2e/containerdbin/build.sh %s and set PROBESHIM_CONTAINERD_BIN", cfg.ContainerdBin, missing, cfg.Row.ContainerdBuild)
	}
	if missing := missingIn(filepath.Dir(cfg.Runc), []string{filepath.Base(cfg.Runc)}); cfg.Runc == "" || len(missing) > 0 {
		return nil, fmt.Errorf("runc %q missing: run e2e/containerdbin/build.sh runc and set PROBESHIM_RUNC", cfg.Runc)
	}
	if err := acquireLock(ctx, cfg.Dir, cfg.Logf); err != nil {
		return nil, err
	}
	supersede(cfg.Dir)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	if err := Teardown(ctx, cfg); err != nil {
		releaseLock(cfg.Dir)
		return nil, fmt.Errorf("cleaning up an earlier rig: %w", err)
	}
	// A killed teardown's mark would let another rig's teardown take this one for gone.
	_ = os.Remove(leavingPath(cfg.Dir))
	if !cfg.SkipPackages {
		if err := EnsurePackages(ctx, cfg.Logf); err != nil {
			releaseLock(cfg.Dir)
			return nil, err
		}
	}
	r := &Rig{cfg: cfg, dir: cfg.Dir, netnsPath: filepath.Join(netnsDir, cfg.NetNS)}
	r.newNodes()
	setCurrent(r)
	if err := r.bringUp(ctx, t0); err != nil {
		if saved, saveErr := r.SaveLogs(""); saveErr == nil {
			err = fmt.Errorf("%w\n(all component logs saved in %s)", err, saved)
		}
		if stopErr := r.Stop(context.Background()); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("teardown after failed start: %w", stopErr))
		}
		return nil, err
	}
	return r, nil
}

func (r *Rig) bringUp(ctx context.Context, t0 time.Time) error {
	logf := r.cfg.Logf
	since := func() string { return time.Since(t0).Round(time.Millisecond).String() }
	if err := r.prepareHost(ctx); err != nil {
		return err
	}
	logf("rig: certificates and configs written at %s", since())

	images := make(chan error, 1)
	go func() { images <- r.buildImages(ctx, append(DefaultImages(), r.cfg.Images...), true) }()

	etcd, err := r.startProcess("etcd", r.etcdArgs()...)
	if err != nil {
		return err
	}
	var containerds []*process
	for _, n := range r.nodes {
		p, err := r.startProcess(n.Component("containerd"), r.containerdArgs(n)...)
		if err != nil {
			return err
		}
		containerds = append(containerds, p)
	}
	if err := r.waitFor(ctx, etcd, "etcd healthy", 30*time.Second, func() (bool, error) {
		return r.nsGetOK(ctx, "http://127.0.0.1:2379/health"), nil
	}); err != nil {
		return err
	}
	logf("rig: etcd ready at %s", since())
	apiserver, err := r.startProcess("kube-apiserver", r.apiserverArgs()...)
	if err != nil {
		return err
	}
	var kubelets []*process
	for i, n := range r.nodes {
		if err := r.waitFor(ctx, containerds[i], n.Component("containerd")+" serving", 30*time.Second, func() (bool, error) {
			return n.containerdServing(ctx), nil
		}); err != nil {
			return err
		}
		logf("rig: %s ready at %s", n.Component("containerd"), since())
		p, err := r.startProcess(n.Component("kubelet"), n.kubeletArgs()...)
		if err != nil {
			return err
		}
		kubelets = append(kubelets, p)
	}
	if err := r.waitFor(ctx, apiserver, "kube-apiserver /readyz", 60*time.Second, func() (bool, error) {
		return r.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil, nil
	}); err != nil {
		return err
	}
	logf("rig: kube-apiserver ready at %s", since())
	for _, c := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", r.controllerManagerArgs()},
		{"kube-scheduler", r.schedulerArgs()},
		{"kube-proxy", r.kubeProxyArgs()},
	} {
		if _, err := r.startProcess(c.name, c.args...); err != nil {
			return err
		}
	}
	select {
	case err := <-images:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("building images: %w", ctx.Err())
	}
	if err := r.startRegistry(ctx, r.registryBin()); err != nil {
		return err
	}
	if err := r.pushImages(ctx, append(DefaultImages(), r.cfg.Images...)); err != nil {
		return err
	}
	logf("rig: registry %s serving, images pushed at %s", Registry, since())
	// Every node pulls the images (CRI, by tag) before any test: tests make CRI calls with them
	// directly, and critest looks some up before it would pull. Not those built as an index (the
	// cluster part's): the kubelet pulls that by digest when the Deployment asks for it.
	for _, img := range append(DefaultImages(), r.cfg.Images...) {
		if img.Index != nil {
			continue
		}
		if _, err := r.PullImage(ctx, img.Ref); err != nil {
			return err
		}
	}
	logf("rig: nodes pulled the images from the registry at %s", since())
	for i, n := range r.nodes {
		if err := r.waitFor(ctx, kubelets[i], "node "+n.name+" Ready", 90*time.Second, func() (bool, error) {
			return r.nodeReady(ctx, n.name), nil
		}); err != nil {
			return err
		}
		logf("rig: node %s Ready at %s", n.name, since())
	}
	if err := r.waitFor(ctx, r.proc("kube-controller-manager"), "ServiceAccount default/default", 60*time.Second, func() (bool, error) {
		_, err := r.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1GetOptions)
		return err == nil, nil
	}); err != nil {
		return err
	}
	logf("rig: ServiceAccount default/default at %s", since())
	if err := r.waitFor(ctx, r.proc("kube-proxy"), "kube-proxy healthy", 60*time.Second, func() (bool, error) {
		return r.nsGetOK(ctx, "http://127.0.0.1:10256/healthz"), nil
	}); err != nil {
		return err
	}
	logf("rig: up in %s (KUBECONFIG=%s inside netns %s)", since(), r.AdminKubeconfig(), r.netnsPath)
	return nil
}

// prepareHost makes the rig's folders, state file, cgroups and network
// namespace, and writes the certificates and configs.
func (r *Rig) prepareHost(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	netnsMounted := isMountPoint(netnsDir)
	sysctls, created := machineRecord(r.dir)
	r.state = &state{
		Name: r.cfg.Name, Dir: r.dir, NetNS: r.cfg.NetNS, Cgroup: r.cfg.Cgroup,
		Sysctls: sysctls, Created: created,
		NetNSDirMounted: !netnsMounted, CNINetwork: r.cfg.Name,
	}
	if err := r.saveState(); err != nil {
		return err
	}
	for _, d := range []string{"logs", "pki", "etcd", "images"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			return err
		}
	}
	cgroupDirs := []string{daemonCgroup}
	var extraIPs []string
	for _, n := range r.nodes {
		for _, d := range []string{"containerd", "kubelet", "cni/net.d", "cni/ipam", "pod-logs", "run"} {
			if err := os.MkdirAll(n.path(d), 0o755); err != nil {
				return err
			}
		}
		cgroupDirs = append(cgroupDirs, n.podsCgroup())
		if n.index > 0 {
			extraIPs = append(extraIPs, n.ip)
		}
	}
	cg, err := newCgroups(r.cfg.Cgroup)
	if err != nil {
		return err
	}
	r.cgroups = cg
	if err := cg.create(cgroupDirs...); err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	if err := createNetNS(ctx, r.cfg.NetNS, extraIPs...); err != nil {
		return err
	}
	r.nsHTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialNetNS(ctx, r.netnsPath, network, addr)
		},
	}}
	if r.fwd, err = newForwarder(r.netnsPath, fmt.Sprintf("127.0.0.1:%d", APIServerPort)); err != nil {
		return err
	}
	return r.writeConfigs()
}

// waitFor polls cond until it holds, the process p exits, or timeout passes;
// the error names what was awaited and shows the end of p's log.
func (r *Rig) waitFor(ctx context.Context, p *process, what string, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return p.describe(fmt.Errorf("waiting for %s: %w", what, err))
		}
		if ok {
			return nil
		}
		if err := p.failed(); err != nil {
			return p.describe(fmt.Errorf("waiting for %s: %w", what, err))
		}
		for _, q := range r.procs {
			if err := q.failed(); err != nil {
				return q.describe(fmt.Errorf("waiting for %s: %w", what, err))
			}
		}
		select {
		case <-ctx.Done():
			return p.describe(fmt.Errorf("timed out after %s waiting for %s", timeout, what))
		case <-tick.C:
		}
	}
}

func (n *Node) containerdServing(ctx context.Context) bool {
	cmd := exec.CommandContext(ctx, n.r.ctr(), "--address", n.ContainerdSocket(), "version")
	cmd.SysProcAttr = diesWithRig()
	return cmd.Run() == nil
}

// diesWithRig makes a helper command (ctr, go build) die with the process
// that runs the rig: killed with -9 mid bring-up, it must leave no process
// a later teardown does not know of.
func diesWithRig() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func (r *Rig) proc(name string) *process {
	for _, p := range r.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (r *Rig) nsGetOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := r.nsHTTP.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop tears the rig down: every process it started, the containers, mounts,
// cgroups, the netns, its folder and the fixed paths of the kubelet, and puts
// the kernel settings back. It is safe to call more than once.
func (r *Rig) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	if r.fwd != nil {
		r.fwd.Close()
	}
	st := r.state
	if st == nil {
		st = &state{Name: r.cfg.Name, Dir: r.dir, NetNS: r.cfg.NetNS, Cgroup: r.cfg.Cgroup}
	}
	defer releaseLock(r.dir)
	return teardown(st, r.procs, r.cfg.Logf)
}

// SaveLogs copies the components' logs to dst (a new folder under the
// system's temp dir when dst is "") and returns the folder, so that they
// survive the teardown.
func (r *Rig) SaveLogs(dst string) (string, error) {
	if dst == "" {
		d, err := os.MkdirTemp("", "probeshim-rig-logs-"+time.Now().Format("150405")+"-")
		if err != nil {
			return "", err
		}
		dst = d
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(r.LogDir(), "*.log"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no logs in %s", r.LogDir())
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return "", err
		}
	}
	return dst, nil
}

func (r *Rig) path(elem ...string) string { return filepath.Join(append([]string{r.dir}, elem...)...) }

// Dir is the rig's folder.
func (r *Rig) Dir() string { return r.dir }

// LogDir holds one log file per component (etcd.log, kubelet.log, ...).
func (r *Rig) LogDir() string { return r.path("logs") }

// KubeBin is the folder of the Kubernetes binaries in use.
func (r *Rig) KubeBin() string { return r.cfg.KubeBin }

// Row is the matrix row the rig runs; ContainerdBin the folder of its
// containerd, containerd-shim-runc-v2 and ctr; Runc its runc.
func (r *Rig) Row() Row              { return r.cfg.Row }
func (r *Rig) ContainerdBin() string { return r.cfg.ContainerdBin }
func (r *Rig) Runc() string          { return r.cfg.Runc }

// NodeName is the name of the rig's first node (of a one-node rig, its only node).
func (r *Rig) NodeName() string { return r.cfg.NodeName }

// NetNSPath is the rig's network namespace, for nsenter --net= or setns.
func (r *Rig) NetNSPath() string { return r.netnsPath }

// ContainerdSocket is the first node's containerd gRPC socket (CRI and the
// containerd API, namespace ContainerdNamespace). It is a unix socket on the
// host's file system: no netns needed to use it.
func (r *Rig) ContainerdSocket() string { return r.nodes[0].ContainerdSocket() }

// ContainerdRoot and ContainerdState are the first node's containerd --root and --state.
func (r *Rig) ContainerdRoot() string  { return r.nodes[0].ContainerdRoot() }
func (r *Rig) ContainerdState() string { return r.nodes[0].ContainerdState() }

// PodNetNSDir is where the first node's containerd mounts the pods' network
// namespaces (netns_mounts_under_state_dir): one file per sandbox, named cni-<uuid>.
func (r *Rig) PodNetNSDir() string { return r.nodes[0].PodNetNSDir() }

// KubeletRootDir is the first node's kubelet --root-dir (pods, volumes, plugins).
func (r *Rig) KubeletRootDir() string { return r.nodes[0].KubeletRootDir() }

// CAFile is the PEM certificate of the rig's CA: the API server's and the
// kubelet's serving certificates and every client certificate chain to it.
func (r *Rig) CAFile() string { return r.pki.path("ca.crt") }

// APIServerHostAddr is a loopback address of the host (127.0.0.1:port) that
// forwards into the netns to the API server, for clients in this process.
// It exists only while this process runs.
func (r *Rig) APIServerHostAddr() string { return r.fwd.Addr() }

// AdminKubeconfig is a kubeconfig for user rig-admin in group system:masters.
// Its server is https://127.0.0.1:6443, which is reached from inside the
// netns (see Command), not from the host.
func (r *Rig) AdminKubeconfig() string { return r.path("admin.kubeconfig") }

// KubeletKubeconfig is the first node kubelet's kubeconfig
// (system:node:<node>, group system:nodes), for use inside the netns.
func (r *Rig) KubeletKubeconfig() string { return r.nodes[0].KubeletKubeconfig() }

// Kubeconfig issues a client certificate for user and groups, writes a
// kubeconfig for it that works inside the netns, and returns its path. Use it
// for the identity of a process run with Command, e.g. a node service as
// system:node:<node> or a user of its own.
func (r *Rig) Kubeconfig(user string, groups ...string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.path("kubeconfigs", fileSafe(user)+".kubeconfig")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, r.pki.kubeconfig(p, r.inNetNSServer(), user, groups...)
}

// RESTConfig is rig-admin's (system:masters) client config for this process,
// through APIServerHostAddr.
func (r *Rig) RESTConfig() *rest.Config { return rest.CopyConfig(r.admin) }

// RESTConfigFor is a client config for user and groups for this process.
func (r *Rig) RESTConfigFor(user string, groups ...string) (*rest.Config, error) {
	p, err := r.Kubeconfig(user, groups...)
	if err != nil {
		return nil, err
	}
	return r.hostRESTConfig(p)
}

// IssueServingCert writes a serving certificate signed by the rig's CA (for
// a webhook, say) and returns the paths of the certificate and the key;
// CAFile is the matching caBundle.
func (r *Rig) IssueServingCert(name string, dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	return r.pki.issue(certSpec{name: "serving-" + fileSafe(name), cn: name, server: true, dns: dnsNames, ips: ips})
}

func (r *Rig) hostRESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Host = "https://" + r.fwd.Addr()
	cfg.QPS, cfg.Burst = 200, 400
	// Inline the certificates: client-go caches TLS transports by file name,
	// and every run reuses the names with a new CA.
	for _, f := range []struct {
		file *string
		data *[]byte
	}{{&cfg.CAFile, &cfg.CAData}, {&cfg.CertFile, &cfg.CertData}, {&cfg.KeyFile, &cfg.KeyData}} {
		if *f.file == "" {
			continue
		}
		b, err := os.ReadFile(*f.file)
		if err != nil {
			return nil, err
		}
		*f.data, *f.file = b, ""
	}
	return cfg, nil
}

func (r *Rig) inNetNSServer() string { return fmt.Sprintf("https://127.0.0.1:%d", APIServerPort) }

// Command returns a command that runs name with args inside the rig's
// network namespace (through nsenter --net, which keeps the host's mounts
// and cgroup file systems visible). The caller starts and waits for it.
func (r *Rig) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + r.netnsPath, "--", name}, args...)...)
}

// Kubectl returns a command running the rig's kubectl as rig-admin inside the
// netns.
func (r *Rig) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := r.Command(ctx, filepath.Join(r.cfg.KubeBin, "kubectl"), append([]string{"--kubeconfig", r.AdminKubeconfig()}, args...)...)
	return cmd
}

// EnterHint is a shell line that opens a shell with kubectl ready inside the
// rig's netns.
func (r *Rig) EnterHint() string {
	return ShellLine(r.netnsPath, r.AdminKubeconfig(), r.cfg.KubeBin)
}

// ShellLine is a shell line that opens a shell inside the netns at netns, with
// KUBECONFIG set and the folders of path first on PATH.
func ShellLine(netns, kubeconfig string, path ...string) string {
	return fmt.Sprintf("nsenter --net=%s env KUBECONFIG=%s PATH=%s:$PATH bash", netns, kubeconfig, strings.Join(path, ":"))
}

func isMountPoint(p string) bool {
	m, err := readMountInfo()
	if err != nil {
		return false
	}
	for _, e := range m {
		if e.point == p {
			return true
		}
	}
	return false
}

// joinArgs renders flags from a map for stable, readable command lines.
func joinArgs(bin string, flags map[string]string) []string {
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []string{bin}
	for _, k := range keys {
		out = append(out, "--"+k+"="+flags[k])
	}
	return out
}
