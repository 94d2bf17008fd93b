package testbed

import (
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// TestUnderlayMTU: an underlay made WithMTU gives its bridge, the node's
// eth0 and the node's veth on the bridge that MTU (so the node's default
// route, which the route agent and the CNI size their links by, leaves
// through a link of that MTU); without the option they keep Ethernet's.
// Everything lives in namespaces the test makes.
func TestUnderlayMTU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the underlay is a network namespace")
	}
	if _, err := NewUnderlay(WithMTU(500)); err == nil {
		t.Error("NewUnderlay(WithMTU(500)): no error, want one naming the MTU")
	}
	for _, tc := range []struct {
		opts []UnderlayOption
		want int
	}{{nil, 1500}, {[]UnderlayOption{WithMTU(1400)}, 1400}} {
		u, err := NewUnderlay(tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = u.Close() })
		node, err := netns.New("underlay MTU test node")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Close() })
		if err := u.plug(node, "mtu-test", netip.MustParseAddr("172.31.250.9")); err != nil {
			t.Fatal(err)
		}
		h, br, err := u.bridge()
		if err != nil {
			t.Fatal(err)
		}
		end, err := h.LinkByName("mtu-test")
		h.Close()
		if err != nil {
			t.Fatal(err)
		}
		nh, err := netlink.NewHandleAt(node.Handle())
		if err != nil {
			t.Fatal(err)
		}
		eth0, err := nh.LinkByName("eth0")
		nh.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []netlink.Link{br, end, eth0} {
			if got := l.Attrs().MTU; got != tc.want {
				t.Errorf("underlay MTU %d: link %s has MTU %d", tc.want, l.Attrs().Name, got)
			}
		}
	}
}
