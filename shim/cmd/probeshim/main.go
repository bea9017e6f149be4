// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command probeshim is the probeshim node service: it runs the probes of its
// node's NodePodProbe through containerd and inside the pods' network
// namespaces and writes the results back. `probeshim status` shows what the
// running service probes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"

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
  probeshim [flags]            run the service (normally started by systemd: probeshim.service);
                               SIGHUP (systemctl reload probeshim) applies logLevel and maxProcs
  probeshim status [flags]     show what the running service probes and each probe's last result;
                               -o json|yaml for scripts; exit code 0 live, 1 degraded, 3 not running
  probeshim config check FILE  check a config file as the service would read it (0 valid, 1 not)
  probeshim version            print the version, the commit and its date, and the Go version (also --version)

The service reads /etc/probeshim/config.yaml (see --config); flags override the file.
Logs go to journald with fields under systemd (journalctl -u probeshim POD_NAME=web-0), else to stderr.

Flags:
`

func main() {
	args := os.Args[1:]
	cmd := ""
	if len(args) > 0 && (args[0] == "status" || args[0] == "version" || args[0] == "run" || args[0] == "config") {
		cmd, args = args[0], args[1:]
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		cmd = "version" // as probeshim-cluster --version
	}
	var err error
	switch cmd {
	case "version":
		fmt.Println("probeshim", buildversion.String(version))
	case "status":
		err = status(args, os.Stdout)
	case "config":
		err = configCommand(args)
	default:
		err = run(args)
	}
	var ex exitCode
	switch {
	case errors.As(err, &ex):
		if ex.err != nil {
			fmt.Fprintln(os.Stderr, "probeshim:", ex.err)
		}
		os.Exit(ex.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "probeshim:", err)
		os.Exit(1)
	}
}

// exitCode ends the command with code, saying err (if any) first.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }

// Exit codes of `probeshim status`, for scripts: documented in docs/install/node.md, "Check that it runs".
const (
	exitLive       = 0
	exitDegraded   = 1
	exitUsage      = 2
	exitNotRunning = 3 // as LSB init scripts' status: the program is not running
)

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

func run(args []string) error {
	// SIGHUP (systemctl reload probeshim) reloads the configuration. Asked for before anything
	// else: Go's default for SIGHUP is to exit. One waiting signal is enough: a reload reads the
	// file as it is then.
	reloads := make(chan os.Signal, 1)
	signal.Notify(reloads, syscall.SIGHUP)
	defer signal.Stop(reloads)

	fs := newFlagSet("probeshim")
	cfg, err := config.Load(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	service.SetMaxProcs(cfg.MaxProcs)
	logger := logrus.New()
	logger.SetLevel(cfg.Level())
	systemd.SetupLogging(logger, "probeshim")
	logger.WithFields(logrus.Fields{"node": cfg.NodeName, "version": version, "kubeconfig": cfg.Kubeconfig,
		"containerdSocket": cfg.ContainerdSocket, "maxProcs": runtime.GOMAXPROCS(0)}).Info("starting probeshim")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A reload reads what start-up read: the same flags, the file they name, the same detection.
	load := func() (*config.Config, error) {
		fs := flag.NewFlagSet("probeshim", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return config.Load(fs, args)
	}
	return service.Run(ctx, cfg, logger, version, service.WithReload(reloads, fs.Lookup("config").Value.String(), load))
}

func status(args []string, out io.Writer) error {
	fs := newFlagSet("probeshim status")
	socket := fs.String("status-socket", config.DefaultStatusSocket, "the running service's status socket")
	output := fs.String("o", "text", "output format: text (for a person), json or yaml (the status socket's document)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode{exitUsage, err}
	}
	if *output != "text" && *output != "json" && *output != "yaml" {
		return exitCode{exitUsage, fmt.Errorf("-o %q: want text, json or yaml", *output)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := server.FetchStatus(ctx, *socket)
	if err != nil {
		return exitCode{exitNotRunning, fmt.Errorf("%w (is probeshim running? systemctl status probeshim)", err)}
	}
	st.State, st.Problems = server.Assess(st)
	switch *output {
	case "json":
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
			return err
		}
	case "yaml":
		b, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
	default:
		if err := server.WriteStatus(out, st); err != nil {
			return err
		}
	}
	if st.State != server.StateLive {
		return exitCode{code: exitDegraded}
	}
	return nil
}

// configCommand is `probeshim config check FILE`: the file read strictly, filled with the
// defaults and validated as the service would at start, without starting anything.
func configCommand(args []string) error {
	if len(args) != 2 || args[0] != "check" {
		return exitCode{exitUsage, errors.New("usage: probeshim config check FILE")}
	}
	cfg, err := config.LoadFile(args[1])
	if err == nil {
		err = cfg.Complete()
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return exitCode{1, err}
	}
	fmt.Printf("%s: valid\n", args[1])
	return nil
}
