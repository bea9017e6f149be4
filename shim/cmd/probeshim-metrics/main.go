// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command probeshim-metrics serves the probeshim node service's metrics to the cluster: HTTPS
// on the node's address for callers the API server authenticates and authorizes, forwarded to
// the service's loopback endpoint (see package shim/metricsproxy for why it is a process of its
// own). systemd starts it on the first connection to probeshim-metrics.socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"

	buildversion "github.com/probeshim/probeshim/internal/version"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/metricsproxy"
	"github.com/probeshim/probeshim/shim/slogrus"
	"github.com/probeshim/probeshim/systemd"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// DefaultListen is the port the kubelet's neighbours leave free (the node service's loopback
// endpoint is 10268).
const DefaultListen = ":10269"

const usage = `probeshim-metrics — the probeshim node service's metrics, for scrapers in the cluster.

Serves /metrics and /metrics/probes of the node service over HTTPS to callers whose bearer token
the API server accepts (TokenReview) and who may get the path (SubjectAccessReview; bind the
ClusterRole probeshim-metrics-reader). Normally started by systemd (probeshim-metrics.socket).

Usage:
  probeshim-metrics [flags]
  probeshim-metrics --version

Flags:
`

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println("probeshim-metrics", buildversion.String(version))
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probeshim-metrics:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("probeshim-metrics", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	cfgFile := fs.String("config", config.DefaultFile, "the node service's configuration file: its kubeconfig, node name and metricsAddress are used")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the TokenReviews and SubjectAccessReviews (default: the node service's)")
	upstream := fs.String("upstream", "", "the node service's metrics address (default: its metricsAddress)")
	listen := fs.String("listen", DefaultListen, "address to serve HTTPS on when systemd passes no socket")
	certFile := fs.String("tls-cert-file", "", "serving certificate (PEM), reloaded when it changes; default: self-signed at start")
	keyFile := fs.String("tls-private-key-file", "", "the serving certificate's key (PEM)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	lvl, err := logrus.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}

	cfg, err := nodeConfig(*cfgFile)
	if err != nil {
		return err
	}
	if *kubeconfig == "" {
		*kubeconfig = cfg.Kubeconfig
	}
	if *upstream == "" {
		*upstream = cfg.MetricsAddress
	}
	kube, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", *kubeconfig, err)
	}

	logger := logrus.New()
	logger.SetLevel(lvl)
	systemd.SetupLogging(logger, "probeshim-metrics")
	entry := logger.WithField("node", cfg.NodeName)
	log := logr.FromSlogHandler(slogrus.NewLogger(entry).Handler())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	ln, err := listener(*listen)
	if err != nil {
		return err
	}
	hosts := []string{cfg.NodeName}
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil && !net.ParseIP(host).IsUnspecified() {
		hosts = append(hosts, host)
	}
	o := metricsproxy.Options{Upstream: *upstream, Kube: kube, CertFile: *certFile, KeyFile: *keyFile, Hosts: hosts, Log: log}
	h, err := metricsproxy.Handler(o)
	if err != nil {
		return err
	}
	tlsCfg, err := metricsproxy.TLSConfig(ctx, o)
	if err != nil {
		return err
	}
	entry.WithFields(logrus.Fields{"address": ln.Addr().String(), "upstream": *upstream, "kubeconfig": *kubeconfig,
		"version": version}).Info("serving the node service's metrics to authorized callers")
	return metricsproxy.Serve(ctx, ln, h, tlsCfg)
}

// nodeConfig reads the node service's configuration as the service does (defaults filled in),
// without its flags: what a local override changes, --kubeconfig and --upstream say here.
func nodeConfig(path string) (*config.Config, error) {
	cfg, err := config.LoadFile(path)
	if errors.Is(err, os.ErrNotExist) && path == config.DefaultFile {
		cfg, err = &config.Config{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := cfg.Complete(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// listener is systemd's socket (socket activation) if it passed one, else a new one on addr.
func listener(addr string) (net.Listener, error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("systemd's sockets: %w", err)
	}
	switch len(lns) {
	case 0:
		return net.Listen("tcp", addr)
	case 1:
		if lns[0] == nil {
			return nil, errors.New("systemd passed a socket that is not a stream socket")
		}
		return lns[0], nil
	default:
		return nil, fmt.Errorf("systemd passed %d sockets, want one (probeshim-metrics.socket)", len(lns))
	}
}
