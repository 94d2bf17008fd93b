package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/netlab"
	"github.com/ferry-io/ferry/test/testbed"
)

// BuildGateway builds ferry-gateway into a folder removed when the suite
// ends, and returns its path.
func BuildGateway(ctx context.Context) string {
	GinkgoHelper()
	return buildBinary(ctx, "ferry-gateway")
}

// LinkPrefix starts the names of the links ferry makes in the lab: the
// lab's prefix and an x, which none of the lab's own links has there.
func LinkPrefix(lab *netlab.Lab) string { return lab.Prefix + "x" }

// StartGateway runs ferry-gateway for cluster c with its data plane in the
// lab pod gw (its endpoint: the pod's WAN address).
func StartGateway(ctx context.Context, bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, gw *netlab.Pod, extra ...string) *Proc {
	GinkgoHelper()
	// One prefix per gateway: userspace WireGuard's control socket is
	// named after the link, in one folder for the whole host.
	return startGateway(bin, c, id, lab, gw, LinkPrefix(lab)+c.Name[:1], "gateway-"+c.Name, "ferry-gateway.log", extra...)
}

// startGateway runs ferry-gateway for cluster c in the lab pod gw with the
// link prefix given, logging to file in the cluster's folder; it stops
// when the spec's node ends.
func startGateway(bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, gw *netlab.Pod, prefix, name, file string, extra ...string) *Proc {
	GinkgoHelper()
	args := append([]string{"--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--netns", lab.Path(gw.NS),
		"--link-prefix", prefix, "--endpoint", fmt.Sprintf("%s:51820", gw.WANIP), "--pod-address", gw.IP.String(),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "-v=2"}, extra...)
	p := newProc(name, bin, filepath.Join(c.Dir, file), args, false)
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	return p
}

// StartRouteAgent runs the route agent of cluster c for the lab node n.
func StartRouteAgent(ctx context.Context, bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, n *netlab.Node) *Proc {
	GinkgoHelper()
	args := []string{"route-agent", "--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--netns", lab.Path(n.NS),
		"--link-prefix", LinkPrefix(lab), "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "-v=2"}
	p := newProc("route-agent-"+n.Name, bin, filepath.Join(c.Dir, "ferry-route-agent-"+n.Name+".log"), args, false)
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	return p
}
