// Command ferry-gateway runs a cluster's network gateway (the WireGuard
// tunnel to every peer, with its NAT and routes), or, as
// `ferry-gateway route-agent`, the agent that routes a node's traffic for
// peers to the gateway.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"

	memlimit "github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/gateway"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
)

type common struct {
	kubeconfig, clusterID, netnsPath, prefix string
	opts                                     gateway.Options
	version                                  version.Flag
}

func (c *common) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&c.clusterID, "cluster-id", "", "this cluster's ID, as given to ferry-controller-manager")
	fs.StringVar(&c.netnsPath, "netns", "", "network namespace to configure, such as /proc/<pid>/ns/net (default: this process's)")
	fs.StringVar(&c.prefix, "link-prefix", gateway.DefaultPrefix, "prefix of the links made (<prefix>-wg, <prefix>-vx) and name of the nftables table")
	fs.StringVar(&c.opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&c.opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&c.opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
	c.version = version.AddFlag(fs)
}

// parse parses args into fs, then prints the version and exits when asked,
// and sets up logging and the build metric.
func (c *common) parse(fs *pflag.FlagSet, args []string) {
	_ = fs.Parse(args)
	c.version.ExitIfSet("ferry-gateway")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-gateway"))
}

func main() {
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	// wireguard-go holds every packet in flight in a 64 KiB buffer, so a
	// bulk transfer keeps well over a hundred MiB live, and the Go runtime's
	// default heap target (twice the live heap) then crosses the container's
	// limit: a 256 MiB copy through the tunnel got the gateway OOM-killed.
	// A memory limit at 90% of the cgroup's makes the collector run before.
	// GOMEMLIMIT set by hand wins; no cgroup limit leaves none.
	if _, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup)); err != nil {
		fmt.Fprintln(os.Stderr, "ferry-gateway: set the Go memory limit from the cgroup's:", err)
	}
	var err error
	if len(os.Args) > 1 && os.Args[1] == "route-agent" {
		err = routeAgent(os.Args[2:], klogFlags)
	} else {
		err = runGateway(os.Args[1:], klogFlags)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferry-gateway:", err)
		os.Exit(1)
	}
}

func runGateway(args []string, klogFlags *flag.FlagSet) error {
	var c common
	var endpoint, podAddress, service, nodeAddress string
	var forceUserspace bool
	g := gateway.GatewayOptions{Settings: gateway.Settings{DataPlane: &gateway.DataPlane{}}}
	fs := pflag.NewFlagSet("ferry-gateway", pflag.ExitOnError)
	c.register(fs)
	fs.StringVar(&endpoint, "endpoint", "", "address:port peers reach this gateway's WireGuard UDP port at (default: found from --service)")
	fs.StringVar(&service, "service", "ferry-gateway", "the gateway's Service in ferry-system, which --endpoint defaults from: a LoadBalancer's address and port, or --node-address and the node port of a NodePort Service (its port named wireguard)")
	fs.StringVar(&nodeAddress, "node-address", os.Getenv("HOST_IP"), "IP address of this gateway pod's node, advertised with a NodePort Service (default: $HOST_IP, the downward API's status.hostIP)")
	fs.StringVar(&podAddress, "pod-address", os.Getenv("POD_IP"), "this gateway pod's IP, which nodes' VXLAN links reach (default: $POD_IP)")
	fs.IntVar(&g.DataPlane.ListenPort, "listen-port", gateway.DefaultListenPort, "WireGuard UDP port")
	fs.IntVar(&g.DataPlane.MTU, "mtu", 0, "tunnel MTU (0: the underlay's MTU less WireGuard's 80 bytes)")
	fs.IntVar(&g.DataPlane.VXLANPort, "vxlan-port", gateway.DefaultVXLANPort, "UDP port of the nodes' VXLAN links to the gateway")
	fs.IntVar(&g.DataPlane.VNI, "vni", gateway.DefaultVNI, "VXLAN network identifier of the nodes' links to the gateway")
	fs.BoolVar(&forceUserspace, "userspace", false, "use wireguard-go even when the kernel has WireGuard")
	fs.StringVar(&g.KeySecret, "key-secret", "ferry-gateway-key", "Secret in ferry-system holding the WireGuard keys (made on first start)")
	fs.DurationVar(&g.KeyRotation, "key-rotation", 0, "replace the WireGuard key this often (0: only when the key Secret is annotated ferry.io/rotate-key)")
	fs.DurationVar(&g.RotationGrace, "key-rotation-grace", gateway.DefaultRotationGrace, "notice given to peers between publishing a new key and switching to it")
	e := &g.Election
	fs.BoolVar(&e.Enabled, "leader-elect", false, "run active/passive with the other replicas by a Lease in ferry-system: only the holder installs the tunnel, NAT and routes and publishes its endpoint")
	fs.StringVar(&e.LeaseName, "leader-elect-lease-name", gateway.DefaultLeaseName, "the Lease in ferry-system the replicas elect the active one by")
	fs.StringVar(&e.Identity, "leader-elect-identity", os.Getenv("POD_NAME"), "this replica's name in the Lease (default: $POD_NAME)")
	fs.StringVar(&e.PodName, "pod-name", os.Getenv("POD_NAME"), "this replica's pod in ferry-system, labelled "+gateway.LabelActive+"=true while active so that the gateway Service selects only it (default: $POD_NAME; empty: no label)")
	fs.DurationVar(&e.LeaseDuration, "leader-elect-lease-duration", gateway.DefaultLeaseDuration, "a passive replica takes the Lease once it has seen it unrenewed this long")
	fs.DurationVar(&e.RenewDeadline, "leader-elect-renew-deadline", gateway.DefaultRenewDeadline, "the active replica tears its tunnel down when it has not renewed the Lease this long after sending its last renewal (at least 100ms less than the lease duration)")
	fs.DurationVar(&e.RetryPeriod, "leader-elect-retry-period", gateway.DefaultRetryPeriod, "how often the active renews the Lease and a passive tries to take it")
	fs.AddGoFlagSet(klogFlags)
	c.parse(fs, args)

	if endpoint != "" {
		host, port, err := gateway.ParseEndpoint(endpoint)
		if err != nil {
			return fmt.Errorf("--endpoint %q: %w", endpoint, err)
		}
		g.EndpointAddress, g.EndpointPort = host, port
	} else {
		if service == "" {
			return fmt.Errorf("--endpoint or --service is required")
		}
		g.EndpointService = &gateway.ServiceEndpoint{Service: service, PortName: gateway.ServicePortName, NodeAddress: nodeAddress}
	}
	var err error
	if g.PodAddress, err = netip.ParseAddr(podAddress); err != nil {
		return fmt.Errorf("--pod-address %q: not an IP address (set it, or $POD_IP from the downward API)", podAddress)
	}
	ns, err := netns.Open(c.netnsPath)
	if err != nil {
		return fmt.Errorf("--netns: %w", err)
	}
	defer ns.Close()
	g.DataPlane.NS, g.DataPlane.Links = ns, gateway.Links{Prefix: c.prefix}
	g.DataPlane.ForceUserspace, g.DataPlane.Log = forceUserspace, ctrl.Log.WithName("dataplane")
	g.Options = c.opts
	g.ClusterID = ferryv1alpha1.ClusterID(c.clusterID)
	cfg, err := kubeconfig.ForComponent("--kubeconfig", c.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := gateway.NewGateway(cfg, g)
	if err != nil {
		return err
	}
	return startAndWait(mgr.Start)
}

func routeAgent(args []string, klogFlags *flag.FlagSet) error {
	var c common
	fs := pflag.NewFlagSet("ferry-gateway route-agent", pflag.ExitOnError)
	c.register(fs)
	fs.AddGoFlagSet(klogFlags)
	c.parse(fs, args)
	ns, err := netns.Open(c.netnsPath)
	if err != nil {
		return fmt.Errorf("--netns: %w", err)
	}
	defer ns.Close()
	c.opts.ClusterID = ferryv1alpha1.ClusterID(c.clusterID)
	cfg, err := kubeconfig.ForComponent("--kubeconfig", c.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := gateway.NewRouteAgent(cfg, c.opts, &gateway.NodePlane{NS: ns, Links: gateway.Links{Prefix: c.prefix}})
	if err != nil {
		return err
	}
	return startAndWait(mgr.Start)
}

// startAndWait runs a manager until SIGTERM or SIGINT; on the way out it
// removes what it made.
func startAndWait(start func(context.Context) error) error {
	return start(ctrl.SetupSignalHandler())
}
