// Package app implements ferryctl, ferry's command line (also `kubectl
// ferry`): peering two clusters, showing peers, and offloading namespaces to
// the providers. Everything it does can be done by applying the same objects
// by hand; it is a convenience, the controllers do the work.
package app

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
)

// NewCommand is ferryctl's root command.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ferryctl",
		Short:         "Peer Kubernetes clusters with ferry, inspect peerings and offload namespaces",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	root.AddCommand(newPeerCommand(), newUnpeerCommand(), newStatusCommand(), newOffloadCommand(), newUnoffloadCommand(), newMoveCommand(), newVersionCommand())
	root.AddCommand(newDiscoverCommand(), newAdvertiseCommand())
	root.AddCommand(newInstallCommand(), newUninstallCommand())
	root.AddCommand(newTestCommand())
	return root
}

// pair holds the flags naming the consumer and the provider.
type pair struct {
	consumerKubeconfig, consumerContext string
	providerKubeconfig, providerContext string
	timeout                             time.Duration
}

func (p *pair) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.consumerKubeconfig, "consumer-kubeconfig", "", "kubeconfig of the consumer (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&p.consumerContext, "consumer-context", "", "context of the consumer in its kubeconfig (default: the current one)")
	f.StringVar(&p.providerKubeconfig, "provider-kubeconfig", "", "kubeconfig of the provider (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&p.providerContext, "provider-context", "", "context of the provider in its kubeconfig (default: the current one)")
	f.DurationVar(&p.timeout, "timeout", 2*time.Minute, "give up after this long")
}

func (p *pair) configs() (consumer, provider *rest.Config, err error) {
	if consumer, err = loadConfig("--consumer-kubeconfig", p.consumerKubeconfig, p.consumerContext); err != nil {
		return nil, nil, err
	}
	if provider, err = loadConfig("--provider-kubeconfig", p.providerKubeconfig, p.providerContext); err != nil {
		return nil, nil, err
	}
	if p.timeout <= 0 {
		return nil, nil, fmt.Errorf("--timeout %s: must be positive", p.timeout)
	}
	return consumer, provider, nil
}

// loadConfig reads a kubeconfig (the default loading rules when path is
// empty) at a context (the current one when empty); errors name the flag.
func loadConfig(flag, path, context string) (*rest.Config, error) {
	cfg, err := kubeconfig.ForCLI(flag, path, context)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 15 * time.Second
	return cfg, nil
}

func newPeerCommand() *cobra.Command {
	var p pair
	var resources string
	var lifetime time.Duration
	var leaseDuration, fencingMargin time.Duration
	var outOfService, selfFencing bool
	var reissue bool
	var providerURL, poolLabel string
	var discovered discoveredPeer
	cmd := &cobra.Command{
		Use:   "peer",
		Short: "Let the consumer run pods in the provider: a virtual node appears in the consumer",
		Long: `peer makes the provider create a tenant for the consumer and issue it a
credential (a service-account token reaching the tenant only), stores it in the
consumer, declares each cluster to the other with a ForeignCluster, and waits
until the consumer's virtual node is Ready. A failure removes what was made.

When the provider already offloads to the consumer, peer sets up this
direction too: both ForeignClusters become ConsumerAndProvider.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			consumer, provider, err := p.configs()
			if err != nil {
				return err
			}
			if err := discovered.apply(cmd, p.timeout, provider); err != nil {
				return err
			}
			req, err := ParseResources(resources)
			if err != nil {
				return err
			}
			if lifetime < 10*time.Minute {
				return fmt.Errorf("--credential-lifetime %s: must be at least 10m (the API server's minimum)", lifetime)
			}
			start := time.Now()
			if err := checkAPIServerURL(providerURL); err != nil {
				return fmt.Errorf("--provider-api-server-url: %w", err)
			}
			fencing, err := FencingFlags(leaseDuration, fencingMargin, outOfService, selfFencing)
			if err != nil {
				return err
			}
			if poolLabel != "" {
				if err := ferryv1alpha1.ValidateNodePoolLabelKey("--node-pool-label", poolLabel); err != nil {
					return err
				}
			}
			opts := PeerOptions{Resources: req, Timeout: p.timeout, TokenLifetime: lifetime, ProviderAPIServerURL: providerURL, NodePoolLabel: poolLabel, Fencing: fencing}
			if reissue {
				if poolLabel != "" {
					return fmt.Errorf("--node-pool-label: not with --reissue-credential (the peering keeps its pools)")
				}
				if resources != "" {
					return fmt.Errorf("--resources: not with --reissue-credential (the peering keeps its request)")
				}
				if providerURL != "" {
					return fmt.Errorf("--provider-api-server-url: not with --reissue-credential (the peering keeps its address)")
				}
				if err := ReissueCredential(cmd.Context(), cmd.OutOrStdout(), consumer, provider, opts); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Credential reissued in %s.\n", time.Since(start).Round(100*time.Millisecond))
				return nil
			}
			if err := Peer(cmd.Context(), cmd.OutOrStdout(), consumer, provider, opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Peered in %s.\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		},
	}
	p.bind(cmd)
	cmd.Flags().StringVar(&resources, "resources", "", "fixed request instead of the provider's default share, e.g. cpu=8,memory=32Gi,nvidia.com/gpu=1")
	cmd.Flags().DurationVar(&lifetime, "credential-lifetime", 30*24*time.Hour, "lifetime of the token issued to the consumer")
	cmd.Flags().DurationVar(&leaseDuration, "lease-duration", 0, "fencing lease duration T: the provider stops the consumer's pods after T without a renewal (default 5m)")
	cmd.Flags().DurationVar(&fencingMargin, "fencing-margin", 0, "safety margin added to T before the consumer fails the provider's pods over (default 30s)")
	cmd.Flags().BoolVar(&outOfService, "out-of-service-failover", false, "after T + margin without a renewal, mark the provider's virtual nodes out of service so their pods (StatefulSets too) run elsewhere")
	cmd.Flags().BoolVar(&selfFencing, "self-fencing", true, "the provider stops the consumer's pods when the consumer's lease expires")
	cmd.Flags().BoolVar(&reissue, "reissue-credential", false, "give an existing peering a new credential (after a revocation), replacing the consumer's")
	cmd.Flags().StringVar(&providerURL, "provider-api-server-url", "", "the provider's API server as the consumer cluster's pods reach it (https://host:port), when it differs from --provider-kubeconfig's server (a NAT, proxy or private address between you and the clusters); the provider's serving certificate must be valid for it")
	cmd.Flags().StringVar(&poolLabel, "node-pool-label", "", "split the provider's nodes into pools by this node label key (e.g. gpu-model or node.kubernetes.io/instance-type): one virtual node per value, sized from its own nodes and labelled KEY=VALUE; nodes without the label are not offered (default: one virtual node for the whole provider)")
	discovered.bind(cmd)
	return cmd
}

func newUnpeerCommand() *cobra.Command {
	var p pair
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "unpeer",
		Short: "Undo a peering: remove the virtual node, the provider's tenant and the credential",
		Long: `unpeer removes the consumer's use of the provider: the virtual node, the
request, the credential and the provider's tenant for the consumer. Of a
peering both ways it removes this direction only: the ForeignClusters become
Consumer (on the consumer) and Provider (on the provider), and the other
direction keeps working.

When the consumer does not offload to the provider (nothing of that peering
is on either cluster), unpeer says so, changes nothing and fails, as kubectl
delete of a missing object does; with --ignore-not-found it says so and
succeeds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			consumer, provider, err := p.configs()
			if err != nil {
				return err
			}
			err = Unpeer(cmd.Context(), cmd.OutOrStdout(), consumer, provider, p.timeout)
			switch {
			case ignoreNotFound && errors.Is(err, ErrNotPeered):
				fmt.Fprintf(cmd.OutOrStdout(), "Nothing to unpeer: %v.\n", err)
				return nil
			case err != nil:
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Unpeered.")
			return nil
		},
	}
	p.bind(cmd)
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "succeed when the two clusters are not peered in this direction (nothing to remove)")
	return cmd
}

// checkAPIServerURL accepts an empty value or an https URL with a host and
// nothing after it but a port.
func checkAPIServerURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q: want https://host[:port]", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q: want https://host[:port], nothing after it", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not 1-65535", s, p)
		}
	}
	return nil
}

// ParseResources parses a fixed request like "cpu=8,memory=32Gi"; errors name
// the flag and the bad entry. Empty is no request.
func ParseResources(s string) (corev1.ResourceList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for entry := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--resources: %q is not name=quantity", entry)
		}
		if errs := validation.IsQualifiedName(name); len(errs) > 0 {
			return nil, fmt.Errorf("--resources: resource name %q: %s", name, errs[0])
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("--resources: %s=%q: %w", name, value, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("--resources: %s=%s: must be positive", name, value)
		}
		if _, dup := out[corev1.ResourceName(name)]; dup {
			return nil, fmt.Errorf("--resources: %s is given twice", name)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}
