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

// TestEnableForwarding proves that EnableForwarding sets IPv4 forwarding
// and rp_filter in the namespace it is given and nowhere else: the test's own
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
	check("target", target, "net/ipv4/conf/"+l+"/forwarding", "1")
	if ipv6 {
		// IPv6 is not carried: left as it was.
		check("target", target, fwd6, "0")
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

// TestLinkForwardingForwardsWithoutIPForward proves what EnableForwarding
// relies on where /proc/sys is read-only (a container): with
// net.ipv4.ip_forward 0, a router forwards what arrives on a link whose own
// forwarding flag it set over rtnetlink, and nothing else.
func TestLinkForwardingForwardsWithoutIPForward(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	a, r, b := netlab.Namespace(t, "a"), netlab.Namespace(t, "r"), netlab.Namespace(t, "b")
	veth(t, a, n.Bed("a"), r, n.Link("ra"))
	veth(t, r, n.Link("rb"), b, n.Bed("b"))
	addAddr(t, a, n.Bed("a"), "192.0.2.2/24")
	addAddr(t, r, n.Link("ra"), "192.0.2.1/24")
	addAddr(t, r, n.Link("rb"), "198.51.100.1/24")
	addAddr(t, b, n.Bed("b"), "198.51.100.2/24")
	addRoute(t, a, "0.0.0.0/0", n.Bed("a"), "192.0.2.1", unix.RTPROT_BOOT)
	addRoute(t, b, "0.0.0.0/0", n.Bed("b"), "198.51.100.1", unix.RTPROT_BOOT)
	writeSysctlIn(t, r, "net/ipv4/ip_forward", "0")
	echoServer(t, b, "198.51.100.2:7000")

	if reachable(a, "198.51.100.2:7000") {
		t.Fatal("reached b through a router that does not forward")
	}
	// Forwarding on the link requests arrive on only: the replies, arriving
	// on the other, are still not forwarded.
	do(t, r, func() error { return setLinkForwarding(n.Link("ra")) })
	if reachable(a, "198.51.100.2:7000") {
		t.Fatal("the replies were forwarded from a link without forwarding")
	}
	do(t, r, func() error { return setLinkForwarding(n.Link("rb")) })
	if err := echo(a, "198.51.100.2:7000", 1<<16); err != nil {
		t.Fatalf("with forwarding on both links: %v", err)
	}
	if got := readSysctl(t, r, "net/ipv4/ip_forward"); got != "0" {
		t.Errorf("net.ipv4.ip_forward = %s, want it left 0", got)
	}
	for _, l := range []string{n.Link("ra"), n.Link("rb")} {
		if got := readSysctl(t, r, "net/ipv4/conf/"+l+"/rp_filter"); got != "0" {
			t.Errorf("%s: rp_filter = %s, want 0", l, got)
		}
	}
}
