// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command probeshim is the probeshim node service: it runs the probes of its
// node's NodePodProbe through containerd and inside the pods' network
// namespaces and writes the results back. `probeshim status` shows what the
// running service probes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	buildversion "github.com/probeshim/probeshim/internal/version"
	"github.com/probeshim/probeshim/shim/config"
	"github.com/probeshim/probeshim/shim/server"
	"github.com/probeshim/probeshim/shim/service"
	"github.com/probeshim/probeshim/systemd"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

const usage = `probeshim — the probeshim node service.

Usage:
  probeshim [flags]           run the service (normally started by systemd: probeshim.service)
  probeshim status [flags]    show what the running service probes and each probe's last result
  probeshim version           print the version, the commit and the Go version

The service reads /etc/probeshim/config.yaml (see --config); flags override the file.
Logs go to journald with fields under systemd (journalctl -u probeshim POD_NAME=web-0), else to stderr.

Flags:
`

func main() {
	args := os.Args[1:]
	cmd := ""
	if len(args) > 0 && (args[0] == "status" || args[0] == "version" || args[0] == "run") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "version":
		fmt.Println("probeshim", buildversion.String(version))
	case "status":
		err = status(args)
	default:
		err = run(args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probeshim:", err)
		os.Exit(1)
	}
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

func run(args []string) error {
	fs := newFlagSet("probeshim")
	cfg, err := config.Load(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.MaxProcs > 0 {
		runtime.GOMAXPROCS(cfg.MaxProcs)
	}
	logger := logrus.New()
	logger.SetLevel(cfg.Level())
	systemd.SetupLogging(logger, "probeshim")
	logger.WithFields(logrus.Fields{"node": cfg.NodeName, "version": version, "kubeconfig": cfg.Kubeconfig,
		"containerdSocket": cfg.ContainerdSocket, "maxProcs": runtime.GOMAXPROCS(0)}).Info("starting probeshim")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return service.Run(ctx, cfg, logger, version)
}

func status(args []string) error {
	fs := newFlagSet("probeshim status")
	socket := fs.String("status-socket", config.DefaultStatusSocket, "the running service's status socket")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := server.FetchStatus(ctx, *socket)
	if err != nil {
		return fmt.Errorf("%w (is probeshim running? systemctl status probeshim)", err)
	}
	return server.WriteStatus(os.Stdout, st)
}
