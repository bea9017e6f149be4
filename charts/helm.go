// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/action"
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
