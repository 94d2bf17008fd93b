package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/fabric/netdetect"
	"github.com/ferry-io/ferry/install"
	"github.com/ferry-io/ferry/version"
)

// The chart values ferryctl install sets from its flags and what it detects.
var (
	valueClusterID       = []string{"clusterID"}
	valueCreateNamespace = []string{"createNamespace"}
	valuePodCIDR         = []string{"network", "podCIDR"}
	valueServiceCIDR     = []string{"network", "serviceCIDR"}
	valueCertificates    = []string{"webhook", "certificates"}
)

// certManagerCRD marks a cluster running cert-manager.
const certManagerCRD = "certificates.cert-manager.io"

type installFlags struct {
	kubeconfig, context string
	clusterID           string
	valueFiles          []string
	sets, setStrings    []string
	dryRun              bool
	output              string
	wait                bool
	timeout             time.Duration
}

func newInstallCommand() *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install ferry into the cluster of a kubeconfig, from the chart embedded in ferryctl",
		Long: `install renders the ferry Helm chart embedded in ferryctl (no network needed)
with the values given, detects what it can (the pod and Service CIDRs, a
running cert-manager) for the values not given, and applies the objects by
server-side apply in dependency order, waiting for the CRDs and, once the
admission webhooks are applied too (a webhook with self-managed certificates
is ready only once they exist), the workloads to be ready. Running it again
applies the changes and removes what the new values no longer render; it changes nothing when nothing changed.
What it applied is listed in the ConfigMap ferry-system/ferry-install, which
ferryctl uninstall reads.`,
		Example: `  ferryctl install --cluster-id=rome
  ferryctl install --cluster-id=rome --set images.registry=registry.example.com/ferry --set images.tag=v0.1.0
  ferryctl install --cluster-id=rome -f values.yaml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInstall(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "context in the kubeconfig (default: the current one)")
	fl.StringVar(&f.clusterID, "cluster-id", "", "this cluster's ID among its peers (a DNS label; the chart value clusterID)")
	fl.StringArrayVarP(&f.valueFiles, "values", "f", nil, "chart values from a YAML file (repeatable; later ones win)")
	fl.StringArrayVar(&f.sets, "set", nil, "a chart value, as helm's --set: key=value, a.b=value, list={a,b} (repeatable; wins over -f)")
	fl.StringArrayVar(&f.setStrings, "set-string", nil, "a chart value taken as a string, as helm's --set-string (repeatable)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the objects that would be applied, apply nothing")
	fl.StringVarP(&f.output, "output", "o", outputYAML, "format of --dry-run: yaml or json")
	fl.BoolVar(&f.wait, "wait", true, "wait for the workloads to be ready")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up waiting for each step after this long")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputYAML, outputJSON}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func runInstall(ctx context.Context, out, errOut io.Writer, f installFlags) error {
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.timeout)
	}
	if f.output != outputYAML && f.output != outputJSON {
		return fmt.Errorf("-o %q: must be yaml or json", f.output)
	}
	vals, err := f.userValues()
	if err != nil {
		return err
	}
	if f.clusterID != "" {
		if err := ferryv1alpha1.ValidateClusterID("--cluster-id", f.clusterID); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(vals, f.clusterID, valueClusterID...); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	if id, _, _ := unstructured.NestedString(vals, valueClusterID...); id == "" {
		return errors.New("--cluster-id: required (or the value clusterID): this cluster's ID among its peers")
	}
	// ferryctl applies the namespace itself, with everything else.
	if err := unstructured.SetNestedField(vals, true, valueCreateNamespace...); err != nil {
		return err
	}
	cfg, c, err := installClient(f)
	var detected []string
	if err == nil {
		detected, err = detect(ctx, c, vals)
	}
	if err != nil {
		if !f.dryRun {
			return err
		}
		// A dry run renders without a cluster too, like helm template.
		fmt.Fprintf(errOut, "ferryctl: nothing detected (%v); the values given are rendered as they are\n", err)
	}
	objs, err := charts.Render(vals, ferryv1alpha1.SystemNamespace)
	if err != nil {
		return err
	}
	if f.dryRun {
		list := make([]runtime.Object, 0, len(objs))
		for _, o := range objs {
			list = append(list, o)
		}
		return (&output{format: f.output}).printObjects(list, out)
	}
	fmt.Fprintf(out, "Installing ferry %s into %s:\n", version.Get().Version, cfg.Host)
	for _, d := range detected {
		fmt.Fprintf(out, "  · %s\n", d)
	}
	start := time.Now()
	in := &install.Installer{Client: c, Out: out, Namespace: ferryv1alpha1.SystemNamespace}
	res, err := in.Install(ctx, objs, install.Options{Version: version.Get().Version, Wait: f.wait, Timeout: f.timeout})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Installed in %s: %d objects, %d created, %d changed, %d unchanged, %d pruned.\n",
		time.Since(start).Round(100*time.Millisecond), len(objs), res.Created, res.Changed, res.Unchanged, res.Pruned)
	return nil
}

func installClient(f installFlags) (*rest.Config, client.Client, error) {
	cfg, err := loadConfig("--kubeconfig", f.kubeconfig, f.context)
	if err != nil {
		return nil, nil, err
	}
	return installerClient(cfg)
}

// installerClient is a client for install and uninstall: they read every
// object they wait for once a second, so client-go's default rate limit
// (5/s) would hold them back; 50/s with bursts of 100, as kubectl allows.
func installerClient(cfg *rest.Config) (*rest.Config, client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return cfg, c, nil
}

// userValues merges the -f files (later ones win), then --set and
// --set-string, with helm's own parser of --set; errors name the flag.
func (f installFlags) userValues() (map[string]any, error) {
	vals := map[string]any{}
	for _, name := range f.valueFiles {
		raw, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--values %s: %w", name, err)
		}
		file := map[string]any{}
		if err := yaml.Unmarshal(raw, &file); err != nil {
			return nil, fmt.Errorf("--values %s: %w", name, err)
		}
		vals = chartutil.MergeTables(file, vals)
	}
	for _, s := range f.sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %q: %w", s, err)
		}
	}
	for _, s := range f.setStrings {
		if err := strvals.ParseIntoString(s, vals); err != nil {
			return nil, fmt.Errorf("--set-string %q: %w", s, err)
		}
	}
	return vals, nil
}

// detect fills the values the user left unset with what the cluster shows:
// its pod CIDR (the nodes' ranges) and Service CIDR (the ServiceCIDR
// kubernetes), by the fabric's own rules, and cert-manager for the webhook's
// certificates when it is installed. It says what it found and where from.
func detect(ctx context.Context, c client.Reader, vals map[string]any) ([]string, error) {
	var said []string
	if v, _, _ := unstructured.NestedString(vals, valuePodCIDR...); v == "" {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return nil, fmt.Errorf("detect the pod CIDR: list nodes: %w", err)
		}
		if p, n, ok := netdetect.PodCIDR(nodes.Items); ok {
			said = append(said, fmt.Sprintf("pod CIDR %s: detected from the spec.podCIDRs of %d nodes (set network.podCIDR to be exact)", p, n))
			if err := unstructured.SetNestedField(vals, p.String(), valuePodCIDR...); err != nil {
				return nil, err
			}
		} else {
			said = append(said, "pod CIDR: no node has spec.podCIDRs; the controller manager detects it later or set network.podCIDR")
		}
	}
	if v, _, _ := unstructured.NestedString(vals, valueServiceCIDR...); v == "" {
		var sc networkingv1.ServiceCIDR
		err := c.Get(ctx, client.ObjectKey{Name: netdetect.ServiceCIDRName}, &sc)
		switch {
		case err == nil:
			pod, _, _ := unstructured.NestedString(vals, valuePodCIDR...)
			ipv4 := true
			if p, err := netip.ParsePrefix(pod); err == nil {
				ipv4 = p.Addr().Is4()
			}
			if p, ok := netdetect.ServiceCIDR(&sc, ipv4); ok {
				said = append(said, fmt.Sprintf("Service CIDR %s: read from the ServiceCIDR %s", p, netdetect.ServiceCIDRName))
				if err := unstructured.SetNestedField(vals, p.String(), valueServiceCIDR...); err != nil {
					return nil, err
				}
			}
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			said = append(said, "Service CIDR: the API server serves no ServiceCIDR kubernetes; set network.serviceCIDR")
		default:
			return nil, fmt.Errorf("detect the Service CIDR: %w", err)
		}
	}
	if v, found, _ := unstructured.NestedString(vals, valueCertificates...); !found || v == "" {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := c.Get(ctx, client.ObjectKey{Name: certManagerCRD}, crd)
		switch {
		case err == nil:
			said = append(said, "webhook certificates: cert-manager (its CRD "+certManagerCRD+" is installed)")
			if err := unstructured.SetNestedField(vals, "cert-manager", valueCertificates...); err != nil {
				return nil, err
			}
		case apierrors.IsNotFound(err):
			said = append(said, "webhook certificates: self-managed by ferry-webhook (no cert-manager found)")
		default:
			return nil, fmt.Errorf("detect cert-manager: %w", err)
		}
	}
	return said, nil
}

func newUninstallCommand() *cobra.Command {
	var kubeconfig, context string
	var opts install.UninstallOptions
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what ferryctl install made from the cluster of a kubeconfig",
		Long: `uninstall removes exactly the objects ferryctl install made, as listed in the
ConfigMap ferry-system/ferry-install: first the admission configurations, then
every object of ferry's CRDs (while its controllers still run to finalize
them), then the workloads (until their pods are gone, so that no controller
makes objects again), then the objects of ferry's CRDs made again meanwhile,
then the rest, CRDs and the ferry-system namespace last. Objects that
were there before the install are left. It refuses while the cluster has
peerings (ForeignClusters), unless --force, which deletes them first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Timeout <= 0 {
				return fmt.Errorf("--timeout %s: must be positive", opts.Timeout)
			}
			cfg, err := loadConfig("--kubeconfig", kubeconfig, context)
			if err != nil {
				return err
			}
			return runUninstall(cmd.Context(), cmd.OutOrStdout(), cfg, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&context, "context", "", "context in the kubeconfig (default: the current one)")
	fl.BoolVar(&opts.Force, "force", false, "uninstall although peerings exist: delete them first, and remove finalizers nobody removes")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "print what would be deleted, delete nothing")
	fl.DurationVar(&opts.Timeout, "timeout", 3*time.Minute, "give up waiting for each step after this long")
	return cmd
}

func runUninstall(ctx context.Context, out io.Writer, cfg *rest.Config, opts install.UninstallOptions) error {
	cfg, c, err := installerClient(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Uninstalling ferry from %s:\n", cfg.Host)
	start := time.Now()
	in := &install.Installer{Client: c, Out: out, Namespace: ferryv1alpha1.SystemNamespace}
	n, err := in.Uninstall(ctx, opts)
	if errors.Is(err, install.ErrNotInstalled) {
		fmt.Fprintf(out, "Nothing to uninstall: %v.\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	if !opts.DryRun {
		fmt.Fprintf(out, "Uninstalled in %s: %d objects deleted.\n", time.Since(start).Round(100*time.Millisecond), n)
	}
	return nil
}
