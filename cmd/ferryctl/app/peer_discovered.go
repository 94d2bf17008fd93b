package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/ferry-io/ferry/discovery"
)

// discoveredPeer is `ferryctl peer --discovered NAME`: discovery gives the
// provider's API server endpoint and the fingerprint of its CA; the
// credentials still come from the provider's admin, as
// --provider-kubeconfig.
type discoveredPeer struct {
	name string
	src  discoverySource
}

func (d *discoveredPeer) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&d.name, "discovered", "", "peer with the provider of this cluster ID (or DNS-SD instance name) that `ferryctl discover` finds with --domain or --mdns: its endpoint replaces --provider-kubeconfig's server, whose CA must match the advertised one")
	d.src.bind(cmd.Flags(), "discovery-timeout")
	cmd.PreRunE = d.check
}

// check refuses flags that do not go together, before anything is loaded.
func (d *discoveredPeer) check(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	if d.name == "" {
		for _, flag := range []string{"domain", "dns-server", "mdns", "interface", "discovery-timeout"} {
			if f.Changed(flag) {
				return fmt.Errorf("--%s: only with --discovered", flag)
			}
		}
		return nil
	}
	if kubeconfig, _ := f.GetString("provider-kubeconfig"); kubeconfig == "" {
		return fmt.Errorf("--discovered %q: needs --provider-kubeconfig: discovery gives the provider's endpoint and CA fingerprint, not credentials; ask the provider's admin for a kubeconfig (see docs/usage/peer.md)", d.name)
	}
	if reissue, _ := f.GetBool("reissue-credential"); reissue {
		return errors.New("--discovered: not with --reissue-credential (the peering knows its provider)")
	}
	return d.src.check()
}

// apply points provider, loaded from --provider-kubeconfig, at the
// discovered cluster: it checks that the kubeconfig's CA is the advertised
// one, uses the advertised endpoint, and that the cluster there has the
// advertised ID. Without --discovered it does nothing.
func (d *discoveredPeer) apply(cmd *cobra.Command, timeout time.Duration, provider *rest.Config) error {
	if d.name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	res, err := d.src.browse(ctx)
	if err != nil {
		return err
	}
	warnSkipped(cmd.ErrOrStderr(), res.Skipped)
	c, err := d.pick(res.Clusters)
	if err != nil {
		return err
	}
	if err := checkCA(provider, c); err != nil {
		return fmt.Errorf("--discovered %q: %w", d.name, err)
	}
	note := ""
	if provider.Host != c.Endpoint {
		note = fmt.Sprintf(" instead of the kubeconfig's %s", provider.Host)
	}
	provider.Host = c.Endpoint
	fmt.Fprintf(cmd.OutOrStdout(), "Discovered provider %q in %s: using %s%s; its CA %s is the provider kubeconfig's\n", c.ClusterID, &d.src, c.Endpoint, note, c.CAFingerprint)
	found, err := connect(ctx, "provider", provider)
	if err != nil {
		return fmt.Errorf("--discovered %q: %w", d.name, err)
	}
	if string(found.id) != c.ClusterID {
		return fmt.Errorf("--discovered %q: the cluster at %s has cluster ID %q, not the advertised %q", d.name, c.Endpoint, found.id, c.ClusterID)
	}
	return nil
}

// pick is the one cluster named d.name, by cluster ID or instance name.
func (d *discoveredPeer) pick(clusters []discovery.Cluster) (discovery.Cluster, error) {
	var match []discovery.Cluster
	var names []string
	for _, c := range clusters {
		if c.ClusterID == d.name || strings.EqualFold(c.Instance, d.name) {
			match = append(match, c)
		}
		names = append(names, c.ClusterID)
	}
	slices.Sort(names)
	switch len(match) {
	case 0:
		found := "none"
		if len(names) > 0 {
			found = strings.Join(names, ", ")
		}
		return discovery.Cluster{}, fmt.Errorf("--discovered %q: no such ferry cluster in %s (found: %s)", d.name, &d.src, found)
	case 1:
		return match[0], nil
	}
	var endpoints []string
	for _, c := range match {
		endpoints = append(endpoints, c.Endpoint)
	}
	return discovery.Cluster{}, fmt.Errorf("--discovered %q: advertised more than once in %s (%s); peer with --provider-kubeconfig alone", d.name, &d.src, strings.Join(endpoints, ", "))
}

// checkCA makes sure the provider kubeconfig trusts the CA the cluster
// advertises: discovery says where the provider is, the kubeconfig from
// its admin says whom to trust.
func checkCA(provider *rest.Config, c discovery.Cluster) error {
	if provider.Insecure {
		return errors.New("the provider kubeconfig skips TLS verification (insecure-skip-tls-verify), so the advertised CA cannot be checked; use one with the provider's CA")
	}
	bundle := provider.CAData
	if len(bundle) == 0 && provider.CAFile != "" {
		var err error
		if bundle, err = os.ReadFile(provider.CAFile); err != nil {
			return fmt.Errorf("read the provider kubeconfig's CA: %w", err)
		}
	}
	if len(bundle) == 0 {
		return fmt.Errorf("the provider kubeconfig names no CA, so the advertised %s cannot be checked; use one with the provider's CA", c.CAFingerprint)
	}
	fps, err := discovery.Fingerprints(bundle)
	if err != nil {
		return fmt.Errorf("the provider kubeconfig's CA: %w", err)
	}
	if !slices.Contains(fps, c.CAFingerprint) {
		return fmt.Errorf("the provider kubeconfig's CA (%s) is not the CA %q advertises (%s): the kubeconfig is for another cluster, or the advertisement is not the provider's", strings.Join(fps, ", "), c.ClusterID, c.CAFingerprint)
	}
	return nil
}
