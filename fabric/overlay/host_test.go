package overlay

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// TestEnableForwarding proves that EnableForwarding sets forwarding and
// rp_filter in the namespace it is given and nowhere else: the test's own
// namespace, which the calling goroutine's threads are in, keeps its
// values, as does a link not named. /proc/sys/net resolves by the thread
// that opens the file.
func TestEnableForwarding(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	target := netlab.Namespace(t, "target")
	l, spare := n.Link("a"), n.Link("b")
	stub(t, target, l)
	stub(t, target, spare)
	_, err := os.Stat("/proc/sys/net/ipv6")
	ipv6 := err == nil

	// Both namespaces start the opposite of what EnableForwarding sets.
	const (
		fwd   = "net/ipv4/ip_forward"
		fwd6  = "net/ipv6/conf/all/forwarding"
		rpAll = "net/ipv4/conf/all/rp_filter"
	)
	rpOf := func(link string) string { return "net/ipv4/conf/" + link + "/rp_filter" }
	for _, s := range []struct{ path, value string }{
		{fwd, "0"}, {rpAll, "1"}, {rpOf(l), "1"}, {rpOf(spare), "2"}, {fwd6, "0"},
	} {
		if s.path == fwd6 && !ipv6 {
			continue
		}
		writeSysctlIn(t, target, s.path, s.value)
		if !strings.Contains(s.path, n.Ferry) {
			writeSysctlIn(t, nil, s.path, s.value)
		}
	}

	if err := EnableForwarding(target, l); err != nil {
		t.Fatal(err)
	}
	check := func(where string, ns *netns.Namespace, path, want string) {
		t.Helper()
		if got := readSysctl(t, ns, path); got != want {
			t.Errorf("%s: %s = %s, want %s", where, path, got, want)
		}
	}
	check("target", target, fwd, "1")
	check("target", target, rpAll, "0")
	check("target", target, rpOf(l), "0")
	check("target", target, rpOf(spare), "2")
	check("test's namespace", nil, fwd, "0")
	check("test's namespace", nil, rpAll, "1")
	if ipv6 {
		check("target", target, fwd6, "1")
		check("test's namespace", nil, fwd6, "0")
	}

	// Again: nothing to change, no error.
	if err := EnableForwarding(target, l); err != nil {
		t.Errorf("EnableForwarding again: %v", err)
	}
	// A link the namespace does not have: named in the error.
	if err := EnableForwarding(target, n.Link("nope")); err == nil || !strings.Contains(err.Error(), n.Link("nope")) {
		t.Errorf("EnableForwarding for a missing link: err = %v, want one naming it", err)
	}
	if err := EnableForwarding(target, "../x"); err == nil {
		t.Error("EnableForwarding accepted a link name with a slash")
	}
	// Leave the test's namespace as netlab made it.
	writeSysctlIn(t, nil, rpAll, "0")
}

// TestUnderlayMTU proves that UnderlayMTU follows the default route (the
// lowest metric's, a lower route MTU winning) and, without one, falls back
// to the largest MTU among links that are up, loopback excepted.
func TestUnderlayMTU(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	ns := netlab.Namespace(t, "mtu")
	h := handle(t, ns)

	if _, err := UnderlayMTU(ns); err == nil {
		t.Error("UnderlayMTU with only loopback: no error")
	}

	small, big, jumbo := n.Link("s"), n.Link("b"), n.Link("j")
	for name, mtu := range map[string]int{small: 1400, big: 1500, jumbo: 9000} {
		stub(t, ns, name)
		if err := h.LinkSetMTU(link(t, ns, name), mtu); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want int) {
		t.Helper()
		got, err := UnderlayMTU(ns)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("UnderlayMTU = %d, want %d", got, want)
		}
	}
	expect(9000) // no default route: the largest link up

	addAddr(t, ns, small, "192.0.2.1/24")
	addAddr(t, ns, big, "198.51.100.1/24")
	def := func(name, via string, metric, mtu int) *netlink.Route {
		t.Helper()
		r := &netlink.Route{
			Dst:       prefixIPNet(netip.MustParsePrefix("0.0.0.0/0")),
			Gw:        net.ParseIP(via),
			LinkIndex: link(t, ns, name).Attrs().Index,
			Priority:  metric,
			MTU:       mtu,
			Protocol:  unix.RTPROT_BOOT,
		}
		if err := h.RouteAdd(r); err != nil {
			t.Fatalf("default route via %s dev %s: %v", via, name, err)
		}
		return r
	}
	r1 := def(small, "192.0.2.254", 200, 0)
	expect(1400) // the default route's link, not the largest
	r2 := def(big, "198.51.100.254", 100, 0)
	expect(1500) // the lower metric
	if err := h.RouteDel(r2); err != nil {
		t.Fatal(err)
	}
	def(big, "198.51.100.254", 100, 1300)
	expect(1300) // the route's own MTU, lower than its link's
	if err := h.RouteDel(r1); err != nil {
		t.Fatal(err)
	}
}
