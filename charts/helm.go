// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ActionConfig is Helm's action configuration for the API server rc reaches, releases kept in
// Secrets of namespace ns as the helm command keeps them. Helm reads a kubeconfig: it is written
// into dir from rc.
func ActionConfig(rc *rest.Config, ns, dir string, logf func(string, ...any)) (*action.Configuration, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile,
		CertificateAuthorityData: rc.CAData, TLSServerName: rc.ServerName}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificate: rc.CertFile, ClientKey: rc.KeyFile,
		ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: ns}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, err
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", logf); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Render renders the chart in dir as `helm install --dry-run` does without a cluster (client
// only): release "probeshim" in namespace ns, on Kubernetes kubeVersion (e.g. "v1.37.2"). The
// release's Manifest holds the objects, its Hooks the hooks.
func Render(dir, ns, kubeVersion string, vals map[string]any) (*release.Release, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "probeshim", ns
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	inst.KubeVersion = kv
	if vals == nil {
		vals = map[string]any{}
	}
	return inst.Run(ch, vals)
}
