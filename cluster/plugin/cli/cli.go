// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package cli is the command line of `kubectl probeshim` (cluster/cmd/kubectl-probeshim) on
// spf13/cobra and k8s.io/cli-runtime, which give it kubectl's flags (--kubeconfig, --context,
// -n, ...) and shell completion; the work is package plugin's. Kept apart from it so that
// probeshim-cluster, which shares plugin's explain, does not link cli-runtime.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/plugin"
)

// Options are what every subcommand shares.
type Options struct {
	genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags
	// ClusterNamespace is where the cluster part runs: its ConfigMaps and Deployment.
	ClusterNamespace string
	// Now is the clock ages are measured with (time.Now when nil).
	Now func() time.Time
	// PollInterval is how often restart looks at its request (a second when zero).
	PollInterval time.Duration
	// Version is what --version prints (version.String of the release's version).
	Version string
}

// NewCommand is the root command, kubectl-probeshim; o's ConfigFlags are kubectl's when nil.
func NewCommand(o *Options) *cobra.Command {
	if o.ConfigFlags == nil {
		o.ConfigFlags = genericclioptions.NewConfigFlags(true)
	}
	root := &cobra.Command{
		Use:   "kubectl-probeshim",
		Short: "What probeshim does in this cluster, and why",
		Long: `kubectl probeshim reads what probeshim's cluster part and node services record (node labels,
heartbeat Leases, NodePodProbes, pod conditions, events, ConfigMaps) and prints it: the state of the
cluster (status), one pod's probes and liveness (explain), what a PodProbeMarker would do before it is
applied (dry-run), and restarts a pod's containers through a ContainerRecreateRequest (restart).`,
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl probeshim"},
		SilenceUsage: true, // a refusal or a failed restart is no usage error
		Version:      o.Version,
	}
	root.SetVersionTemplate("kubectl-probeshim {{.Version}}\n")
	root.SetIn(o.In)
	root.SetOut(o.Out)
	root.SetErr(o.ErrOut)
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.ClusterNamespace, "probeshim-namespace", plugin.DefaultClusterNamespace,
		"namespace of probeshim's cluster part (its ConfigMaps and Deployment)")
	root.AddCommand(newStatusCommand(o), newExplainCommand(o), newDryRunCommand(o), newRestartCommand(o))
	return root
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// client is a client of the cluster the kubeconfig flags reach. Uncached: each command reads once.
func (o *Options) client() (client.Client, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: plugin.Scheme()})
}

// namespace is -n, else the kubeconfig context's namespace; explicit is true for -n.
func (o *Options) namespace() (ns string, explicit bool, err error) {
	return o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
}

// outputFlag adds -o to cmd; text is the default.
func outputFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVarP(format, "output", "o", "", "output format: json or yaml (default: text)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput rejects an unknown -o before anything is read.
func checkOutput(format string) error {
	switch format {
	case "", "text", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: want json or yaml (or none, for text)", format)
}

// write writes v as format asks: JSON or YAML of v, else text.
func write(w io.Writer, format string, v any, text func(io.Writer)) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	text(w)
	return nil
}

// podName reads a pod argument: NAME, pod/NAME (pods/, po/ too).
func podName(arg string) (string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok && arg != "" {
		return arg, nil
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		if name != "" && !strings.Contains(name, "/") {
			return name, nil
		}
	default:
		return "", fmt.Errorf("%q: only pods (pod/NAME or NAME)", arg)
	}
	return "", fmt.Errorf("%q: want pod/NAME or NAME", arg)
}

// completePods offers the pod names of the namespace for shell completion.
func (o *Options) completePods(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, _, err := o.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	c, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(cmd.Context(), &pods, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func newStatusCommand(o *Options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Nodes served, OpenKruise hand-over, the liveness decider and the markers",
		Long: `Prints on one screen: the nodes and whether a probeshim node service serves them (the node label
` + v1alpha1.LabelNodeServed + `=true, the heartbeat Lease and its age, the node service's state on the
node's NodePodProbe), who acts on probes and ContainerRecreateRequests (probeshim or OpenKruise), the liveness
decider's switches and the pods an open circuit breaker holds, and the PodProbeMarkers with their counts.
Markers of -n's namespace, else of all namespaces.`,
		Example: `  kubectl probeshim status
  kubectl probeshim status -n shop -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ns, explicit, err := o.namespace()
			if err != nil {
				return err
			}
			if !explicit {
				ns = ""
			}
			st, err := plugin.GetStatus(cmd.Context(), c, o.ClusterNamespace, ns, o.now())
			if err != nil {
				return err
			}
			return write(o.Out, format, st, st.Text)
		},
	}
	outputFlag(cmd, &format)
	return cmd
}

func newExplainCommand(o *Options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "explain (pod/NAME | NAME)",
		Short: "Why a pod is (not) probed and (not) restarted",
		Long: `Prints what probeshim knows and decided about one pod: which PodProbeMarkers of its namespace select
it and why, each probe's last result (state, reason, age, message) from its node's NodePodProbe, whether its
enhanced liveness is on and served (condition probeshim.io/LivenessProtected, the node's label
` + v1alpha1.LabelNodeServed + `), the liveness decider's last decision (condition probeshim.io/LivenessRestart),
its restart record and its latest decision events, newest first. It reads only; what the kubeconfig may not
read is named at the end.`,
		Example: `  kubectl probeshim explain pod/web-0 -n shop
  kubectl probeshim explain web-0 -n shop -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePods,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			ns, _, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ex, err := plugin.Explain(cmd.Context(), c, ns, name, o.now())
			if err != nil {
				return err
			}
			return write(o.Out, format, ex, ex.Text)
		},
	}
	outputFlag(cmd, &format)
	return cmd
}

func newDryRunCommand(o *Options) *cobra.Command {
	var file, format string
	cmd := &cobra.Command{
		Use:   "dry-run -f marker.yaml",
		Short: "What the cluster would say of a PodProbeMarker, and what it would probe where",
		Long: `Sends the PodProbeMarker in the file to the API server as a server-side dry run (a create, or an update
when it exists): the schema and probeshim's webhooks check it, and nothing is stored. Prints whether it was
admitted or the refusal, the pods of its namespace its selector matches, and per node the probes it would place
and what they would cost of the node's NodePodProbe budget (probeshim-cluster --node-probe-budget; enhanced
liveness probes first, then markers by their namespaces' fair shares). Exits 1 when refused.`,
		Example: `  kubectl probeshim dry-run -f marker.yaml
  kubectl probeshim dry-run -f - -n shop < marker.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(format); err != nil {
				return err
			}
			if file == "" {
				return errors.New("-f is required: the PodProbeMarker's file, or - for standard input")
			}
			doc, err := readFile(file, o.In)
			if err != nil {
				return err
			}
			ns, _, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			dr, err := plugin.DryRunMarker(cmd.Context(), c, doc, ns, o.ClusterNamespace)
			if err != nil {
				return err
			}
			if err := write(o.Out, format, dr, dr.Text); err != nil {
				return err
			}
			if !dr.Admitted {
				return errors.New("refused")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the PodProbeMarker's YAML or JSON file; - for standard input")
	outputFlag(cmd, &format)
	return cmd
}

func readFile(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

func newRestartCommand(o *Options) *cobra.Command {
	ro := plugin.RestartOptions{}
	cmd := &cobra.Command{
		Use:   "restart (pod/NAME | NAME) [-c CONTAINER]...",
		Short: "Restart a pod's containers through a ContainerRecreateRequest",
		Long: `Creates a ContainerRecreateRequest for the pod (every container of its spec unless -c names some), waits
until it is Completed or --timeout passes (also its activeDeadlineSeconds), and prints each container's result.
Exits 1 when a container was not recreated or the request did not complete in time. The node service of the
pod's node carries it out (or OpenKruise's kruise-daemon, while probeshim holds that work off).`,
		Example: `  kubectl probeshim restart pod/web-0 -n shop
  kubectl probeshim restart web-0 -n shop -c app -c sidecar --timeout 2m`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePods,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			if ro.Timeout < 3*time.Second {
				return fmt.Errorf("--timeout %s: want at least 3s (the least activeDeadlineSeconds a request may have)", ro.Timeout)
			}
			ns, _, err := o.namespace()
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ro.Namespace, ro.Pod, ro.Out, ro.PollInterval = ns, name, o.Out, o.PollInterval
			return plugin.RestartContainers(cmd.Context(), c, ro)
		},
	}
	cmd.Flags().StringArrayVarP(&ro.Containers, "container", "c", nil, "a container to restart (repeat for more); default: every container of the pod spec")
	cmd.Flags().DurationVar(&ro.Timeout, "timeout", 5*time.Minute, "how long to wait for the request to complete")
	return cmd
}
