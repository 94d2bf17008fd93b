package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/discovery"
	"github.com/ferry-io/ferry/version"
)

func newAdvertiseCommand() *cobra.Command {
	var kubeconfig, context, clusterID, server, domain, iface string
	var mdns bool
	cmd := &cobra.Command{
		Use:   "advertise",
		Short: "Publish this cluster's peering endpoint by DNS service discovery: print the records for a DNS zone, or answer on the local link",
		Long: `advertise publishes the cluster of --kubeconfig for ` + "`ferryctl discover`" + `: its
cluster ID, its API server's endpoint and the fingerprint of that server's CA
(from the kubeconfig; --server and --cluster-id override). It publishes no
credential: peers still need a kubeconfig from this cluster's admin.

With --domain it prints the DNS-SD records (PTR, SRV, TXT) as zone-file lines
for the domain's administrator to add; with --mdns it answers multicast DNS
queries on the local link until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case mdns == (domain != ""):
				return errors.New("give one of --domain DOMAIN (print zone records) or --mdns (answer on the local link)")
			case iface != "" && !mdns:
				return errors.New("--interface: only with --mdns")
			}
			cfg, err := loadConfig("--kubeconfig", kubeconfig, context)
			if err != nil {
				return err
			}
			ad, err := advertisement(cmd.Context(), cfg, server, clusterID)
			if err != nil {
				return err
			}
			if !mdns {
				return discovery.WriteZone(cmd.OutOrStdout(), ad, domain)
			}
			return answerOnLink(cmd, ad, iface)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to advertise (default: $KUBECONFIG or ~/.kube/config); its server and CA are published")
	f.StringVar(&context, "context", "", "context in the kubeconfig (default: the current one)")
	f.StringVar(&clusterID, "cluster-id", "", "the cluster's ferry ID (default: read from the cluster, ConfigMap ferry-system/ferry-cluster-identity)")
	f.StringVar(&server, "server", "", "the API server's URL as peers reach it, https://host[:port] (default: the kubeconfig's server)")
	f.StringVar(&domain, "domain", "", "print the DNS-SD records of this DNS domain, for its zone")
	f.BoolVar(&mdns, "mdns", false, "answer multicast DNS queries on the local link until interrupted")
	f.StringVar(&iface, "interface", "", "network interface to answer on (default: the system's multicast interface); with --mdns")
	return cmd
}

// advertisement is what advertise publishes for the cluster of cfg.
func advertisement(ctx context.Context, cfg *rest.Config, server, clusterID string) (discovery.Advertisement, error) {
	ad := discovery.Advertisement{ClusterID: clusterID, Server: server, Version: version.Get().Version}
	if ad.Server == "" {
		ad.Server = cfg.Host
	}
	bundle := cfg.CAData
	if len(bundle) == 0 && cfg.CAFile != "" {
		var err error
		if bundle, err = os.ReadFile(cfg.CAFile); err != nil {
			return ad, fmt.Errorf("--kubeconfig: read its CA: %w", err)
		}
	}
	if len(bundle) == 0 {
		return ad, fmt.Errorf("--kubeconfig: no certificate authority for %s: peers check the advertised CA fingerprint against theirs, so the kubeconfig must name the CA", cfg.Host)
	}
	fps, err := discovery.Fingerprints(bundle)
	if err != nil {
		return ad, fmt.Errorf("--kubeconfig: %w", err)
	}
	ad.CAFingerprint = fps[0]
	if ad.ClusterID == "" {
		c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
		if err != nil {
			return ad, fmt.Errorf("--kubeconfig: %w", err)
		}
		id, err := peering.ReadClusterIdentity(ctx, c)
		if err != nil {
			return ad, fmt.Errorf("read the cluster ID from %s (or give --cluster-id): %w", cfg.Host, err)
		}
		ad.ClusterID = string(id)
	} else if err := ferryv1alpha1.ValidateClusterID("--cluster-id", ad.ClusterID); err != nil {
		return ad, err
	}
	return ad, nil
}

// answerOnLink answers for ad on the local link until the command's
// context ends.
func answerOnLink(cmd *cobra.Command, ad discovery.Advertisement, ifaceName string) error {
	var iface *net.Interface
	if ifaceName != "" {
		var err error
		if iface, err = net.InterfaceByName(ifaceName); err != nil {
			return fmt.Errorf("--interface %q: %w", ifaceName, err)
		}
	}
	// The local link's answers carry the server's addresses: look up a
	// name here, once.
	if u, err := url.Parse(ad.Server); err == nil && u.Hostname() != "" {
		if _, err := netip.ParseAddr(u.Hostname()); err != nil {
			addrs, err := net.DefaultResolver.LookupNetIP(cmd.Context(), "ip", u.Hostname())
			if err != nil {
				return fmt.Errorf("server %s: look up %s for the local link's address records: %w", ad.Server, u.Hostname(), err)
			}
			ad.Addresses = addrs
		}
	}
	r, err := discovery.NewResponder(iface, ad, logr.FromContextOrDiscard(cmd.Context()))
	if err != nil {
		return err
	}
	defer r.Close()
	fmt.Fprintf(cmd.OutOrStdout(), "Answering for cluster %q (%s, CA %s) as %s.%s on the local link; interrupt to stop.\n",
		ad.ClusterID, ad.Server, ad.CAFingerprint, ad.ClusterID, discovery.ServiceDomain(discovery.LinkDomain))
	<-cmd.Context().Done()
	return nil
}
