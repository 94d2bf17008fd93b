package gateway

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/overlay"
	"github.com/ferry-io/ferry/test/netlab"
)

// A node whose network carries less than the gateway's pod interface (a
// CNI giving pods 1500 bytes on a 1400-byte cloud network): the gateway
// publishes a tunnel MTU of 1420, but its WireGuard packets leave its node
// by that 1400-byte network, so the node's peer routes must stop at 1320
// (1400 less WireGuard's 80): with 1350, the VXLAN link's limit, every
// larger packet was lost past the node (seen on the real-node bed: 64 KiB
// requests timed out). A smaller published MTU is kept, and a 1500-byte
// network leaves the published 1420.
func TestNodeRoutesFitWireGuardOverTheNodesNetwork(t *testing.T) {
	netlab.Require(t)
	ranges := []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16")}
	for _, tc := range []struct {
		underlay, published, want int
	}{
		{1400, 1420, 1320},
		{1400, 1200, 1200},
		{1500, 1420, 1420},
		{1400, 0, 1320},
	} {
		ns := netlab.Namespace(t, "node")
		h, err := netlink.NewHandleAt(ns.Handle())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		prefix := netlab.Prefix()
		eth0 := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "u", MTU: tc.underlay}, PeerName: prefix + "p", PeerMTU: uint32(tc.underlay)}
		if err := h.LinkAdd(eth0); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{prefix + "u", prefix + "p"} {
			l, err := h.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if name == eth0.Name {
				if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipNetOf(netip.MustParsePrefix("192.0.2.10/24"))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
		l, err := h.LinkByName(eth0.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP("192.0.2.1")}); err != nil {
			t.Fatal(err)
		}

		node := &NodePlane{NS: ns, Links: Links{Prefix: prefix + "n"}, VXLANPort: DefaultVXLANPort, VNI: DefaultVNI}
		if err := node.Apply(netip.MustParseAddr("192.0.2.20"), ranges, tc.published); err != nil {
			t.Fatalf("route agent: %v", err)
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: overlay.RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes) != len(ranges) {
			t.Fatalf("underlay %d, published %d: %d routes of ferry's, want %d", tc.underlay, tc.published, len(routes), len(ranges))
		}
		for _, r := range routes {
			if r.MTU != tc.want {
				t.Errorf("underlay %d, gateway's tunnel %d: route %s has MTU %d, want %d", tc.underlay, tc.published, r.Dst, r.MTU, tc.want)
			}
		}
		if err := node.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
