package app

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/fabric/nettest"
)

func newTestCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Check that what ferry set up works",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTestNetworkCommand())
	return cmd
}

func newTestNetworkCommand() *cobra.Command {
	var kubeconfig, kubecontext, pullPolicy string
	var o output
	opts := nettest.Options{}
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Check the network fabric end to end, both ways, with short-lived pods in this cluster and in each provider",
		Long: `network runs agnhost netexec pods in this cluster (a consumer) and, by
offloading a temporary namespace, one in each provider; it needs this
cluster's credential only. It checks, both ways where the path has two:
pod to pod, pod to Service by DNS name, the offloaded pod to this cluster's
API server (kubernetes.default), a UDP datagram of the path MTU and a 64 KiB
HTTP request, and prints one row per check with its latency and, for a
failure, its cause: gateway not running, tunnel down, NAT missing, DNS, MTU,
no route (see docs/usage/network-checks.md). It exits non-zero when a check
fails.

Everything it makes (a namespace labelled ferry.io/test-network, its
offloading, pods and Services, the twins in the providers) is removed before
it exits, on success, failure and Ctrl-C; a run killed before its cleanup is
removed by the next run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if o.format == outputName {
				return fmt.Errorf("-o name: not for checks (table, wide, json or yaml)")
			}
			for flag, d := range map[string]time.Duration{"--timeout": opts.Timeout, "--setup-timeout": opts.SetupTimeout, "--check-timeout": opts.CheckTimeout, "--cleanup-timeout": opts.CleanupTimeout} {
				if d <= 0 {
					return fmt.Errorf("%s %s: must be positive", flag, d)
				}
			}
			pp, err := oneOf("--image-pull-policy", pullPolicy, corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
			if err != nil {
				return err
			}
			opts.PullPolicy = pp
			if opts.Image == "" {
				return fmt.Errorf("--image: must not be empty")
			}
			cfg, err := loadConfig("--kubeconfig", kubeconfig, kubecontext)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Log = cmd.ErrOrStderr()
			report, err := nettest.Run(ctx, cfg, opts)
			if report != nil && len(report.Checks) > 0 {
				if perr := printNetworkReport(cmd.OutOrStdout(), &o, report); perr != nil {
					return perr
				}
			}
			switch {
			case err != nil && report != nil && report.Cleanup != "":
				return fmt.Errorf("%w; cleanup: %s", err, report.Cleanup)
			case err != nil:
				return err
			case report.Cleanup != "":
				return fmt.Errorf("cleanup: %s (the next run removes it)", report.Cleanup)
			case !report.Passed:
				return fmt.Errorf("%d of %d checks failed", report.Failed(), len(report.Checks))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the consumer (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&kubecontext, "context", "", "context in the kubeconfig (default: the current one)")
	f.StringVar(&opts.Image, "image", nettest.DefaultImage, "agnhost image of the test pods")
	f.StringVar(&pullPolicy, "image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of the test pods' image: Always, IfNotPresent or Never")
	f.StringSliceVar(&opts.Peers, "peer", nil, "check these providers only (cluster IDs; default: every provider this cluster offloads to)")
	f.DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "give up after this long (cleanup aside)")
	f.DurationVar(&opts.SetupTimeout, "setup-timeout", 3*time.Minute, "wait this long for the namespace to be offloaded and the test pods to be Ready")
	f.DurationVar(&opts.CheckTimeout, "check-timeout", 15*time.Second, "time each check, retries included, before it fails (agnhost gives each try 5s)")
	f.DurationVar(&opts.CleanupTimeout, "cleanup-timeout", 2*time.Minute, "wait this long for what the run made to be gone")
	o.bind(cmd, "the report: checks, the peers' fabric state")
	return cmd
}

// networkCheckColumns are the checks table's.
var networkCheckColumns = []metav1.TableColumnDefinition{
	column("Path", 0, "what is checked"),
	column("From", 0, "the cluster of the client pod"),
	column("To", 0, "the cluster of the target"),
	column("Target", 0, "the address, name or datagram"),
	column("Result", 0, "ok or FAIL"),
	column("Latency", 0, "one request from the client pod: (the least of three runs of 21 requests − the least of three single requests) ÷ 20, so the port-forward's share cancels"),
	column("Cause", 0, "why it failed"),
	column("Detail", 1, "what points to the cause"),
}

// printNetworkReport prints the checks' table and, under it, each failure's
// detail; or the report as JSON or YAML.
func printNetworkReport(out io.Writer, o *output, r *nettest.Report) error {
	if !o.tables() {
		return o.printData(r, nil, out)
	}
	var rows [][]string
	for _, c := range r.Checks {
		result := "ok"
		if !c.Passed {
			result = "FAIL"
		}
		rows = append(rows, []string{string(c.Path), c.From, c.To, c.Target, result, orDash(c.Latency), orDash(string(c.Cause)), orDash(c.Detail)})
	}
	if err := o.printTable(stringTable(networkCheckColumns, rows), out); err != nil {
		return err
	}
	if o.format == outputWide {
		return nil
	}
	for _, c := range r.Checks {
		if !c.Passed {
			fmt.Fprintf(out, "\n%s %s → %s (%s): %s: %s", c.Path, c.From, c.To, c.Target, c.Cause, c.Detail)
		}
	}
	if r.Failed() > 0 {
		fmt.Fprintln(out)
	}
	return nil
}
