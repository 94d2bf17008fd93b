package overlay

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// bed is the test bed of TestOverlayCarriesPodTraffic:
//
//	pod ──veth── node ══underlay veth 198.18.0.0/24══ gateway ──veth── remote
//	10.244.1.5        198.18.0.1            198.18.0.2          10.70.0.5
//
// The remote namespace stands in for the gateway's tunnel to a peer
// cluster. The pod's way out is the node's VXLAN device to the gateway; the
// replies come back the way a cluster network would bring them: the
// gateway routes the pod range to the node over the underlay.
type bed struct {
	n                         names
	pod, node, gateway, remot *netns.Namespace
}

const (
	nodeIP    = "198.18.0.1"
	gatewayIP = "198.18.0.2"
	podIP     = "10.244.1.5"
	remoteIP  = "10.70.0.5"
	remoteNet = "10.70.0.0/16"
)

func newBed(t *testing.T) *bed {
	b := &bed{
		n:       newNames(),
		pod:     netlab.Namespace(t, "pod"),
		node:    netlab.Namespace(t, "node"),
		gateway: netlab.Namespace(t, "gateway"),
		remot:   netlab.Namespace(t, "remote"),
	}
	n := b.n
	// Underlay.
	veth(t, b.node, n.Bed("ul"), b.gateway, n.Bed("ul"))
	addAddr(t, b.node, n.Bed("ul"), nodeIP+"/24")
	addAddr(t, b.gateway, n.Bed("ul"), gatewayIP+"/24")
	// The pod, behind the node the way point-to-point CNIs attach pods.
	veth(t, b.node, n.Bed("pod"), b.pod, n.Bed("eth"))
	addAddr(t, b.node, n.Bed("pod"), "10.244.1.1/32")
	addRoute(t, b.node, podIP+"/32", n.Bed("pod"), "", unix.RTPROT_BOOT)
	addAddr(t, b.pod, n.Bed("eth"), podIP+"/32")
	addRoute(t, b.pod, "10.244.1.1/32", n.Bed("eth"), "", unix.RTPROT_BOOT)
	addRoute(t, b.pod, "0.0.0.0/0", n.Bed("eth"), "10.244.1.1", unix.RTPROT_BOOT)
	// The remote cluster, behind the gateway.
	veth(t, b.gateway, n.Bed("tun"), b.remot, n.Bed("eth"))
	addAddr(t, b.gateway, n.Bed("tun"), "198.19.0.1/24")
	addAddr(t, b.remot, n.Bed("eth"), "198.19.0.2/24")
	addAddr(t, b.remot, n.Bed("eth"), remoteIP+"/32")
	addRoute(t, b.remot, "0.0.0.0/0", n.Bed("eth"), "198.19.0.1", unix.RTPROT_BOOT)
	// The cluster network's way back from the gateway to the node's pods.
	addRoute(t, b.gateway, "10.244.1.0/24", n.Bed("ul"), nodeIP, unix.RTPROT_BOOT)
	return b
}

func stats(t *testing.T, ns *netns.Namespace, name string) netlink.LinkStatistics {
	t.Helper()
	s := link(t, ns, name).Attrs().Statistics
	if s == nil {
		t.Fatalf("link %s in %s: no statistics", name, ns)
	}
	return *s
}

// TestOverlayCarriesPodTraffic builds node and gateway the way ferry does
// and proves that a pod reaches a remote cluster's pod through the node's
// VXLAN device and the gateway, with the route's MTU in force (the pod
// learns it by path MTU discovery), that the replies come back outside the
// overlay and the gateway never sends through its VXLAN device, and that
// Remove leaves nothing of ferry's behind while other routes stay.
func TestOverlayCarriesPodTraffic(t *testing.T) {
	netlab.Require(t)
	b := newBed(t)
	n := b.n
	vx := n.Link("vx")
	peers := echoServer(t, b.remot, remoteIP+":7000")
	target := remoteIP + ":7000"

	// Without ferry, the node has no route to the remote range.
	if reachable(b.pod, target) {
		t.Fatal("the pod reached the remote cluster before the overlay existed")
	}

	// The gateway.
	gw := VXLAN{Name: vx, MTU: 1450, MAC: GatewayMAC, Address: netip.PrefixFrom(GatewayOverlayIP, 32)}
	if err := EnsureVXLAN(b.gateway, gw); err != nil {
		t.Fatal(err)
	}
	if err := SyncRoutes(b.gateway, []Route{{Dst: netip.MustParsePrefix(remoteNet), Link: n.Bed("tun")}}); err != nil {
		t.Fatal(err)
	}
	if err := EnableForwarding(b.gateway, vx); err != nil {
		t.Fatal(err)
	}

	// The node.
	underlay, err := UnderlayMTU(b.node)
	if err != nil {
		t.Fatal(err)
	}
	if underlay != 1500 {
		t.Fatalf("node's underlay MTU = %d, want the veths' 1500", underlay)
	}
	routeMTU := underlay - VXLANOverhead - WireGuardOverhead
	nodeVX := VXLAN{Name: vx, MTU: underlay - VXLANOverhead, Remote: netip.MustParseAddr(gatewayIP)}
	if err := EnsureVXLAN(b.node, nodeVX); err != nil {
		t.Fatal(err)
	}
	if err := SetNeighbor(b.node, vx, GatewayOverlayIP, GatewayMAC); err != nil {
		t.Fatal(err)
	}
	overlayRoute := Route{Dst: netip.MustParsePrefix(remoteNet), Link: vx, Via: GatewayOverlayIP, MTU: routeMTU}
	if err := SyncRoutes(b.node, []Route{overlayRoute}); err != nil {
		t.Fatal(err)
	}
	if err := EnableForwarding(b.node, n.Bed("ul")); err != nil {
		t.Fatal(err)
	}

	nodeBefore, gwBefore := stats(t, b.node, vx), stats(t, b.gateway, vx)
	const size = 1 << 20
	if err := echo(b.pod, target, size); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-peers:
		if p.Addr() != netip.MustParseAddr(podIP) {
			t.Errorf("the remote saw the pod as %s, want %s untranslated", p.Addr(), podIP)
		}
	case <-time.After(5 * time.Second):
		t.Error("the remote's server saw no connection")
	}
	nodeAfter, gwAfter := stats(t, b.node, vx), stats(t, b.gateway, vx)
	sent := nodeAfter.TxBytes - nodeBefore.TxBytes
	if sent < size {
		t.Errorf("node's VXLAN device sent %d bytes, want the pod's %d and more", sent, size)
	}
	if got := gwAfter.RxBytes - gwBefore.RxBytes; got < size {
		t.Errorf("gateway's VXLAN device received %d bytes, want the pod's %d and more", got, size)
	}
	if nodeAfter.RxPackets != 0 {
		t.Errorf("node's VXLAN device received %d packets: replies should come back over the underlay", nodeAfter.RxPackets)
	}
	// Nothing ever left the gateway's device, nor tried to: not even the
	// kernel's own MLD reports, which turning IPv6 forwarding on sends on
	// a multicast-capable device.
	if gwAfter.TxPackets != 0 || gwAfter.TxDropped != 0 {
		t.Errorf("gateway's VXLAN device sent %d packets and dropped %d, want none", gwAfter.TxPackets, gwAfter.TxDropped)
	}

	// The route's MTU was in force: the pod's first full-size segments
	// drew "fragmentation needed" from the node, and the pod's kernel
	// remembers the path MTU to the remote.
	var learned int
	do(t, b.pod, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		rs, err := h.RouteGet(netip.MustParseAddr(remoteIP).AsSlice())
		if err != nil {
			return fmt.Errorf("route get %s in the pod: %w", remoteIP, err)
		}
		learned = rs[0].MTU
		return nil
	})
	if learned != routeMTU {
		t.Errorf("the pod's path MTU to %s = %d, want the overlay route's %d", remoteIP, learned, routeMTU)
	}

	// What List shows, then unpeering: Remove leaves nothing.
	nodeInv, err := List(b.node, n.Ferry)
	if err != nil {
		t.Fatal(err)
	}
	gwInv, err := List(b.gateway, n.Ferry)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node:\n%sgateway:\n%s", nodeInv, gwInv)
	wantNode := Inventory{
		Links:     []string{fmt.Sprintf("%s vxlan id %d remote %s port %d", vx, DefaultVNI, gatewayIP, DefaultPort)},
		Routes:    []string{fmt.Sprintf("%s via %s dev %s proto %d onlink mtu %d", remoteNet, GatewayOverlayIP, vx, RouteProtocol, routeMTU)},
		Neighbors: []string{fmt.Sprintf("%s lladdr %s dev %s permanent", GatewayOverlayIP, GatewayMAC, vx)},
	}
	wantGW := Inventory{
		Links:  []string{fmt.Sprintf("%s vxlan id %d port %d lladdr %s mtu 1450 up", vx, DefaultVNI, DefaultPort, GatewayMAC)},
		Routes: []string{fmt.Sprintf("%s dev %s proto %d scope link", remoteNet, n.Bed("tun"), RouteProtocol)},
	}
	checkInventory(t, "node", nodeInv, wantNode)
	checkInventory(t, "gateway", gwInv, wantGW)

	if err := Remove(b.node, vx); err != nil {
		t.Fatal(err)
	}
	if err := Remove(b.gateway, vx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*netns.Namespace{b.node, b.gateway} {
		inv, err := List(ns, n.Ferry)
		if err != nil {
			t.Fatal(err)
		}
		if !inv.Empty() {
			t.Errorf("after Remove, %s still has:\n%s", ns, inv)
		}
	}
	// The test bed's own routes are untouched.
	if !contains(routeLines(t, b.node), podIP+"/32 dev "+n.Bed("pod")+" proto boot") {
		t.Errorf("Remove took the node's pod route: %q", routeLines(t, b.node))
	}
	if !contains(routeLines(t, b.gateway), "10.244.1.0/24 via "+nodeIP) {
		t.Errorf("Remove took the gateway's route to the pods: %q", routeLines(t, b.gateway))
	}
	if reachable(b.pod, target) {
		t.Error("the pod still reaches the remote cluster after Remove")
	}
	// Idempotent: nothing left to remove is fine.
	if err := Remove(b.node, vx); err != nil {
		t.Errorf("Remove again: %v", err)
	}
}

// checkInventory compares got with want line by line, each of want's
// lines a prefix of got's.
func checkInventory(t *testing.T, who string, got, want Inventory) {
	t.Helper()
	for _, sec := range []struct {
		name      string
		got, want []string
	}{{"links", got.Links, want.Links}, {"routes", got.Routes, want.Routes}, {"neighbours", got.Neighbors, want.Neighbors}} {
		ok := len(sec.got) == len(sec.want)
		for i := 0; ok && i < len(sec.got); i++ {
			ok = strings.HasPrefix(sec.got[i], sec.want[i])
		}
		if !ok {
			t.Errorf("%s's %s = %q, want lines starting %q", who, sec.name, sec.got, sec.want)
		}
	}
}
