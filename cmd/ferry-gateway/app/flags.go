// Package app holds ferry-gateway's command lines (the gateway's and
// `ferry-gateway route-agent`'s): every flag the binary parses, importable
// so that hack/docgen documents exactly these.
package app

import (
	"flag"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/ferry-io/ferry/fabric/gateway"
	"github.com/ferry-io/ferry/version"
)

// Name is the binary's name; RouteAgent the subcommand running the route
// agent.
const (
	Name       = "ferry-gateway"
	RouteAgent = "route-agent"
)

// Common are the values of the flags both the gateway and the route agent
// take.
type Common struct {
	Kubeconfig, ClusterID, NetnsPath, Prefix string
	Opts                                     gateway.Options
	Version                                  version.Flag
}

// Register adds the flags both commands take to fs.
func (c *Common) Register(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&c.ClusterID, "cluster-id", "", "this cluster's ID, as given to ferry-controller-manager")
	fs.StringVar(&c.NetnsPath, "netns", "", "network namespace to configure, such as /proc/<pid>/ns/net (default: this process's)")
	fs.StringVar(&c.Prefix, "link-prefix", gateway.DefaultPrefix, "prefix of the links made (<prefix>-wg, <prefix>-vx) and name of the nftables table")
	fs.StringVar(&c.Opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&c.Opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&c.Opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
	c.Version = version.AddFlag(fs)
}

// GatewayFlags are the values of the gateway's flags.
type GatewayFlags struct {
	Common
	Endpoint, PodAddress, Service, NodeAddress string
	ForceUserspace                             bool
	Gateway                                    gateway.GatewayOptions
}

// NewGatewayFlagSet is the gateway's whole command line: its flags (into
// f), klog's and --version.
func NewGatewayFlagSet(f *GatewayFlags, errorHandling pflag.ErrorHandling) *pflag.FlagSet {
	f.Gateway = gateway.GatewayOptions{Settings: gateway.Settings{DataPlane: &gateway.DataPlane{}}}
	g := &f.Gateway
	fs := pflag.NewFlagSet(Name, errorHandling)
	f.Register(fs)
	fs.StringVar(&f.Endpoint, "endpoint", "", "address:port peers reach this gateway's WireGuard UDP port at (default: found from --service)")
	fs.StringVar(&f.Service, "service", "ferry-gateway", "the gateway's Service in ferry-system, which --endpoint defaults from: a LoadBalancer's address and port, or --node-address and the node port of a NodePort Service (its port named wireguard)")
	fs.StringVar(&f.NodeAddress, "node-address", os.Getenv("HOST_IP"), "IP address of this gateway pod's node, advertised with a NodePort Service (default: $HOST_IP, the downward API's status.hostIP)")
	fs.StringVar(&f.PodAddress, "pod-address", os.Getenv("POD_IP"), "this gateway pod's IP, which nodes' VXLAN links reach (default: $POD_IP)")
	fs.IntVar(&g.DataPlane.ListenPort, "listen-port", gateway.DefaultListenPort, "WireGuard UDP port")
	fs.IntVar(&g.DataPlane.MTU, "mtu", 0, "tunnel MTU (0: the underlay's MTU less WireGuard's 80 bytes)")
	fs.IntVar(&g.DataPlane.VXLANPort, "vxlan-port", gateway.DefaultVXLANPort, "UDP port of the nodes' VXLAN links to the gateway")
	fs.IntVar(&g.DataPlane.VNI, "vni", gateway.DefaultVNI, "VXLAN network identifier of the nodes' links to the gateway")
	fs.BoolVar(&f.ForceUserspace, "userspace", false, "use wireguard-go even when the kernel has WireGuard")
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
	fs.AddGoFlagSet(klogFlags())
	return fs
}

// NewRouteAgentFlagSet is `ferry-gateway route-agent`'s whole command line:
// its flags (into c), klog's and --version.
func NewRouteAgentFlagSet(c *Common, errorHandling pflag.ErrorHandling) *pflag.FlagSet {
	fs := pflag.NewFlagSet(Name+" "+RouteAgent, errorHandling)
	c.Register(fs)
	fs.AddGoFlagSet(klogFlags())
	return fs
}

func klogFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	return fs
}
