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

// GatewayReplicaPrefix is the link prefix of replica n (0, 1, ...) of
// cluster c's gateway in the lab: userspace WireGuard's control socket is
// named after the link, in one folder for the whole host.
func GatewayReplicaPrefix(lab *netlab.Lab, c *testbed.Cluster, n int) string {
	return fmt.Sprintf("%s%s%d", LinkPrefix(lab), c.Name[:1], n)
}

// StartGatewayReplica runs replica n of cluster c's gateway with leader
// election (identity: the lab pod's name) in the lab pod gw, logging to
// ferry-gateway-<pod>.log.
func StartGatewayReplica(ctx context.Context, bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, gw *netlab.Pod, n int, extra ...string) *Proc {
	GinkgoHelper()
	args := append([]string{"--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--netns", lab.Path(gw.NS),
		"--link-prefix", GatewayReplicaPrefix(lab, c, n), "--endpoint", fmt.Sprintf("%s:51820", gw.WANIP), "--pod-address", gw.IP.String(),
		"--leader-elect", "--leader-elect-identity", gw.Name, "--pod-name", "",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "-v=2"}, extra...)
	p := newProc("gateway-"+c.Name+"-"+gw.Name, bin, filepath.Join(c.Dir, "ferry-gateway-"+gw.Name+".log"), args, false)
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	return p
}
