package testbed

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
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

// TestUnderlayPlugsConcurrently: clusters sharing an underlay (the demo's
// consumer and provider) plug their nodes at the same time; every node gets
// its eth0 with its address, none fails on another's half-made link.
func TestUnderlayPlugsConcurrently(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the underlay is a network namespace")
	}
	u, err := NewUnderlay()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	const nodes = 12
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	spaces := make([]*netns.Namespace, nodes)
	addrs := make([]netip.Addr, nodes)
	for i := range nodes {
		ns, err := netns.New(fmt.Sprintf("underlay concurrency test node %d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ns.Close() })
		spaces[i] = ns
		if addrs[i], err = u.allocate(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nodes {
		wg.Go(func() { errs[i] = u.plug(spaces[i], fmt.Sprintf("cc-%d", i), addrs[i]) })
	}
	wg.Wait()
	for i := range nodes {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
			continue
		}
		nh, err := netlink.NewHandleAt(spaces[i].Handle())
		if err != nil {
			t.Fatal(err)
		}
		eth0, err := nh.LinkByName("eth0")
		if err != nil {
			nh.Close()
			t.Errorf("node %d: no eth0: %v", i, err)
			continue
		}
		got, err := nh.AddrList(eth0, netlink.FAMILY_V4)
		nh.Close()
		if err != nil || len(got) != 1 || got[0].IP.String() != addrs[i].String() {
			t.Errorf("node %d: eth0 addresses %v (%v), want %s", i, got, err, addrs[i])
		}
	}
}
