// Command ferry-gateway runs a cluster's network gateway (the WireGuard
// tunnel to every peer, with its NAT and routes), or, as
// `ferry-gateway route-agent`, the agent that routes a node's traffic for
// peers to the gateway.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	memlimit "github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/cmd/ferry-gateway/app"
	"github.com/ferry-io/ferry/fabric/gateway"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
)

// parse parses args into fs, then prints the version and exits when asked,
// and sets up logging and the build metric.
func parse(c *app.Common, fs *pflag.FlagSet, args []string) {
	_ = fs.Parse(args)
	c.Version.ExitIfSet("ferry-gateway")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-gateway"))
}

func main() {
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
	if len(os.Args) > 1 && os.Args[1] == app.RouteAgent {
		err = routeAgent(os.Args[2:])
	} else {
		err = runGateway(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferry-gateway:", err)
		os.Exit(1)
	}
}

func runGateway(args []string) error {
	var f app.GatewayFlags
	fs := app.NewGatewayFlagSet(&f, pflag.ExitOnError)
	parse(&f.Common, fs, args)
	c, g := &f.Common, &f.Gateway
	endpoint, service, nodeAddress, podAddress := f.Endpoint, f.Service, f.NodeAddress, f.PodAddress

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
	ns, err := netns.Open(c.NetnsPath)
	if err != nil {
		return fmt.Errorf("--netns: %w", err)
	}
	defer ns.Close()
	g.DataPlane.NS, g.DataPlane.Links = ns, gateway.Links{Prefix: c.Prefix}
	g.DataPlane.ForceUserspace, g.DataPlane.Log = f.ForceUserspace, ctrl.Log.WithName("dataplane")
	g.Options = c.Opts
	g.ClusterID = ferryv1alpha1.ClusterID(c.ClusterID)
	cfg, err := kubeconfig.ForComponent("--kubeconfig", c.Kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := gateway.NewGateway(cfg, *g)
	if err != nil {
		return err
	}
	return startAndWait(mgr.Start)
}

func routeAgent(args []string) error {
	var c app.Common
	fs := app.NewRouteAgentFlagSet(&c, pflag.ExitOnError)
	parse(&c, fs, args)
	ns, err := netns.Open(c.NetnsPath)
	if err != nil {
		return fmt.Errorf("--netns: %w", err)
	}
	defer ns.Close()
	c.Opts.ClusterID = ferryv1alpha1.ClusterID(c.ClusterID)
	cfg, err := kubeconfig.ForComponent("--kubeconfig", c.Kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := gateway.NewRouteAgent(cfg, c.Opts, &gateway.NodePlane{NS: ns, Links: gateway.Links{Prefix: c.Prefix}})
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
