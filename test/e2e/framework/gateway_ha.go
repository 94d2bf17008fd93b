package framework

import (
	"context"
	"fmt"

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
	election := []string{"--leader-elect", "--leader-elect-identity", gw.Name, "--pod-name", ""}
	return startGateway(bin, c, id, lab, gw, GatewayReplicaPrefix(lab, c, n), "gateway-"+c.Name+"-"+gw.Name,
		"ferry-gateway-"+gw.Name+".log", append(election, extra...)...)
}
