package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/discovery"
)

// resolvConf names the DNS server --dns-server defaults to.
const resolvConf = "/etc/resolv.conf"

// discoverySource holds the flags saying where to look for clusters: a
// unicast DNS domain through a DNS server, or the local link by mDNS.
type discoverySource struct {
	domain, dnsServer string
	mdns              bool
	iface             string
	timeout           time.Duration
	timeoutFlag       string
}

func (s *discoverySource) bind(f *pflag.FlagSet, timeoutFlag string) {
	s.timeoutFlag = timeoutFlag
	f.StringVar(&s.domain, "domain", "", "find clusters published as DNS-SD records (_ferry._tcp) in this DNS domain")
	f.StringVar(&s.dnsServer, "dns-server", "", "DNS server to ask, host[:port] (default: the first nameserver of "+resolvConf+"); with --domain")
	f.BoolVar(&s.mdns, "mdns", false, "find clusters on the local link by multicast DNS instead of --domain")
	f.StringVar(&s.iface, "interface", "", "network interface to send the multicast DNS query on (default: the system's choice); with --mdns")
	f.DurationVar(&s.timeout, timeoutFlag, 2*time.Second, "how long to collect multicast DNS answers, and the bound of each unicast DNS query")
}

// String says where the source looks, for messages.
func (s *discoverySource) String() string {
	if s.mdns {
		if s.iface != "" {
			return "the local link (mDNS on " + s.iface + ")"
		}
		return "the local link (mDNS)"
	}
	return fmt.Sprintf("domain %s (DNS server %s)", s.domain, s.dnsServer)
}

// check refuses flag combinations that say nothing or two things, naming
// the flags.
func (s *discoverySource) check() error {
	switch {
	case s.mdns && s.domain != "":
		return errors.New("--domain and --mdns: give one, a DNS domain or the local link")
	case !s.mdns && s.domain == "":
		return errors.New("say where to look: --domain DOMAIN (unicast DNS) or --mdns (the local link)")
	case s.mdns && s.dnsServer != "":
		return errors.New("--dns-server: only with --domain (multicast DNS asks the link)")
	case !s.mdns && s.iface != "":
		return errors.New("--interface: only with --mdns")
	case s.timeout <= 0:
		return fmt.Errorf("--%s %s: must be positive", s.timeoutFlag, s.timeout)
	}
	return nil
}

// browse looks for clusters where the flags say.
func (s *discoverySource) browse(ctx context.Context) (discovery.Result, error) {
	if err := s.check(); err != nil {
		return discovery.Result{}, err
	}
	if s.mdns {
		var iface *net.Interface
		if s.iface != "" {
			var err error
			if iface, err = net.InterfaceByName(s.iface); err != nil {
				return discovery.Result{}, fmt.Errorf("--interface %q: %w", s.iface, err)
			}
		}
		return discovery.LinkBrowser{Interface: iface, Timeout: s.timeout}.Browse(ctx)
	}
	server, err := s.server()
	if err != nil {
		return discovery.Result{}, err
	}
	s.dnsServer = server
	res, err := discovery.DNSBrowser{Server: server, Timeout: s.timeout}.Browse(ctx, s.domain)
	if err != nil {
		return discovery.Result{}, fmt.Errorf("--domain %s: %w", s.domain, err)
	}
	return res, nil
}

// server is --dns-server as host:port (port 53 when none), or the
// system's first name server.
func (s *discoverySource) server() (string, error) {
	if s.dnsServer == "" {
		server, err := discovery.DefaultDNSServer(resolvConf)
		if err != nil {
			return "", fmt.Errorf("--dns-server not given, and %w", err)
		}
		return server, nil
	}
	host, port, err := net.SplitHostPort(s.dnsServer)
	if err != nil {
		host, port = s.dnsServer, "53"
		if inner, ok := strings.CutPrefix(host, "["); ok && strings.HasSuffix(inner, "]") {
			host = strings.TrimSuffix(inner, "]")
		}
	}
	_, ipErr := netip.ParseAddr(host)
	if host == "" || port == "" || strings.ContainsAny(host, "[]/ ") || strings.Contains(host, ":") && ipErr != nil {
		return "", fmt.Errorf("--dns-server %q: want host or host:port", s.dnsServer)
	}
	return net.JoinHostPort(host, port), nil
}

func newDiscoverCommand() *cobra.Command {
	var src discoverySource
	var o output
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "List ferry clusters published by DNS service discovery, in a DNS domain or on the local link",
		Long: `discover lists the clusters that publish a ferry peering endpoint as DNS-SD
records (_ferry._tcp: PTR, SRV and TXT) in a DNS domain (--domain, asking
--dns-server) or answer for it on the local link by multicast DNS (--mdns).
Each has a cluster ID, its API server's endpoint and the fingerprint of that
server's CA; peer with one by ` + "`ferryctl peer --discovered ID`" + `, which still
needs a provider kubeconfig from the provider's admin. Instances whose
records are bad are skipped with a warning naming the field.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			res, err := src.browse(cmd.Context())
			if err != nil {
				return err
			}
			warnSkipped(cmd.ErrOrStderr(), res.Skipped)
			return printDiscovered(cmd.OutOrStdout(), cmd.ErrOrStderr(), &o, &src, res.Clusters)
		},
	}
	src.bind(cmd.Flags(), "timeout")
	o.bind(cmd, "the clusters found")
	return cmd
}

func warnSkipped(w io.Writer, skipped []error) {
	for _, err := range skipped {
		fmt.Fprintf(w, "warning: skipped %v\n", err)
	}
}

// printDiscovered prints what discover found: a table (wide: the whole CA
// fingerprint), a JSON or YAML list of discovery.Cluster, or cluster IDs.
func printDiscovered(out, errOut io.Writer, o *output, src *discoverySource, clusters []discovery.Cluster) error {
	if clusters == nil {
		clusters = []discovery.Cluster{}
	}
	if !o.tables() {
		names := make([]string, 0, len(clusters))
		for _, c := range clusters {
			names = append(names, string(c.ClusterID))
		}
		return o.printData(clusters, names, out)
	}
	if len(clusters) == 0 {
		fmt.Fprintf(errOut, "No ferry cluster found in %s.\n", src)
		return nil
	}
	columns := []metav1.TableColumnDefinition{
		column("Cluster ID", 0, "the cluster's ID (TXT id)"),
		column("Instance", 0, "the DNS-SD instance name"),
		column("Endpoint", 0, "the API server (SRV target and port)"),
		column("CA", 0, "the API server CA's SHA-256 fingerprint, shortened (whole with -o wide)"),
		column("CA fingerprint", 1, "the API server CA's SHA-256 fingerprint (TXT ca)"),
		column("Version", 0, "ferry's version there (TXT version)"),
	}
	var rows [][]string
	for _, c := range clusters {
		version := c.Version
		if version == "" {
			version = "-"
		}
		rows = append(rows, []string{string(c.ClusterID), c.Instance, c.Endpoint, shortFingerprint(c.CAFingerprint), c.CAFingerprint, version})
	}
	return o.printTable(stringTable(columns, rows), out)
}

// shortFingerprint keeps a table narrow: sha256: and 16 hex digits (-o json
// has them all).
func shortFingerprint(fp string) string {
	const keep = len("sha256:") + 16
	if len(fp) <= keep {
		return fp
	}
	return fp[:keep] + "…"
}
