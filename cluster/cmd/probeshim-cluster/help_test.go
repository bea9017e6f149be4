// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// Asked for, a subcommand's help is a success on standard output (docs/reference/cli.md is made from
// it); it never reaches the API server.
func TestSubcommandHelp(t *testing.T) {
	noConfig := func() (*rest.Config, error) { return nil, errors.New("help must not load a kubeconfig") }
	type run func(context.Context, []string, io.Writer, io.Writer, func() (*rest.Config, error)) int
	for _, c := range []struct {
		name string
		run  run
		args []string
		want string
	}{
		{"explain", runExplain, []string{"-h"}, "usage: probeshim-cluster explain"},
		{"uninstall-check", runUninstallCheck, []string{"--help"}, "usage: probeshim-cluster uninstall-check"},
		{"selftest", runSelftest, []string{"-h"}, "-timeout duration"},
		{"kruise", runKruise, []string{"-h"}, "usage: probeshim-cluster kruise handover"},
		{"kruise handover", runKruise, []string{"handover", "-help"}, "-rollback"},
	} {
		var out, errOut bytes.Buffer
		if code := c.run(context.Background(), c.args, &out, &errOut, noConfig); code != 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 0 and %q", c.name, c.args, code, out.String(), errOut.String(), c.want)
		}
	}
}
