package overlay

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/test/netlab"
)

// TestEnsureVXLAN proves that EnsureVXLAN creates the device as asked, is
// idempotent (same device, same index), fixes MTU, MAC address and address
// in place, and recreates the device when VNI, port or remote change — and
// that it leaves a link of another type by that name alone.
func TestEnsureVXLAN(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	ns := netlab.Namespace(t, "vxlan")
	name := n.Link("vx")
	h := handle(t, ns)
	get := func() *netlink.Vxlan {
		t.Helper()
		l := link(t, ns, name)
		v, ok := l.(*netlink.Vxlan)
		if !ok {
			t.Fatalf("%s is a %s, want vxlan", name, l.Type())
		}
		return v
	}
	ensure := func(v VXLAN) *netlink.Vxlan {
		t.Helper()
		if err := EnsureVXLAN(ns, v); err != nil {
			t.Fatalf("EnsureVXLAN(%+v): %v", v, err)
		}
		return get()
	}
	addrs := func() []string {
		t.Helper()
		as, err := h.AddrList(get(), netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, a := range as {
			s = append(s, ipNetPrefix(a.IPNet).String())
		}
		slices.Sort(s)
		return s
	}

	spec := VXLAN{Name: name, MTU: 1450, Remote: netip.MustParseAddr("198.18.0.2")}
	v := ensure(spec)
	index := v.Index
	if v.VxlanId != DefaultVNI || v.Port != DefaultPort || !v.Group.Equal(net.ParseIP("198.18.0.2")) || v.Learning || v.MTU != 1450 {
		t.Errorf("created VNI %d port %d remote %s learning %v MTU %d, want %d %d 198.18.0.2 false 1450",
			v.VxlanId, v.Port, v.Group, v.Learning, v.MTU, DefaultVNI, DefaultPort)
	}
	if v.Flags&net.FlagUp == 0 || v.Flags&net.FlagMulticast != 0 {
		t.Errorf("created with flags %v, want up and not multicast", v.Flags)
	}
	if got := addrs(); len(got) != 0 {
		t.Errorf("addresses %v, want none (not even IPv6 link-local)", got)
	}

	// Idempotent.
	if v = ensure(spec); v.Index != index {
		t.Errorf("second EnsureVXLAN recreated the device (index %d → %d)", index, v.Index)
	}
	// Down, another MTU, another MAC, an address: fixed in place.
	if err := h.LinkSetDown(v); err != nil {
		t.Fatal(err)
	}
	spec.MTU = 1400
	spec.MAC = GatewayMAC
	spec.Address = netip.PrefixFrom(GatewayOverlayIP, 32)
	v = ensure(spec)
	if v.Index != index || v.MTU != 1400 || v.HardwareAddr.String() != GatewayMAC.String() || v.Flags&net.FlagUp == 0 {
		t.Errorf("after fixing: index %d (was %d) MTU %d MAC %s up %v, want the same index, 1400, %s, up",
			v.Index, index, v.MTU, v.HardwareAddr, v.Flags&net.FlagUp != 0, GatewayMAC)
	}
	if got := addrs(); !slices.Equal(got, []string{"169.254.99.1/32"}) {
		t.Errorf("addresses %v, want [169.254.99.1/32]", got)
	}
	// A stray address goes, another address replaces the old.
	if err := h.AddrAdd(v, &netlink.Addr{IPNet: prefixIPNet(netip.MustParsePrefix("192.0.2.1/24"))}); err != nil {
		t.Fatal(err)
	}
	spec.Address = netip.MustParsePrefix("169.254.99.2/32")
	ensure(spec)
	if got := addrs(); !slices.Equal(got, []string{"169.254.99.2/32"}) {
		t.Errorf("addresses %v, want [169.254.99.2/32]", got)
	}
	spec.Address = netip.Prefix{}
	ensure(spec)
	if got := addrs(); len(got) != 0 {
		t.Errorf("addresses %v, want none", got)
	}

	// Immutable attributes: a new device each time, with the change.
	for _, c := range []struct {
		what   string
		change func(*VXLAN)
		check  func(*netlink.Vxlan) bool
	}{
		{"VNI", func(s *VXLAN) { s.VNI = 4242 }, func(v *netlink.Vxlan) bool { return v.VxlanId == 4242 }},
		{"port", func(s *VXLAN) { s.Port = 4800 }, func(v *netlink.Vxlan) bool { return v.Port == 4800 }},
		{"remote", func(s *VXLAN) { s.Remote = netip.MustParseAddr("198.18.0.3") }, func(v *netlink.Vxlan) bool { return v.Group.Equal(net.ParseIP("198.18.0.3")) }},
		{"no remote", func(s *VXLAN) { s.Remote = netip.Addr{} }, func(v *netlink.Vxlan) bool { return ipAddr(v.Group) == netip.Addr{} }},
	} {
		c.change(&spec)
		v = ensure(spec)
		if v.Index == index {
			t.Errorf("changing the %s kept the device (index %d)", c.what, index)
		}
		if !c.check(v) || v.MTU != 1400 || v.HardwareAddr.String() != GatewayMAC.String() || v.Flags&net.FlagUp == 0 {
			t.Errorf("after changing the %s: %+v", c.what, v)
		}
		index = v.Index
		if v = ensure(spec); v.Index != index {
			t.Errorf("after changing the %s, EnsureVXLAN again recreated the device", c.what)
		}
	}

	// A link by that name that ferry did not make: an error, and untouched.
	other := n.Link("veth")
	stub(t, ns, other)
	before := link(t, ns, other).Attrs().Index
	err := EnsureVXLAN(ns, VXLAN{Name: other})
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "veth") {
		t.Errorf("EnsureVXLAN over a veth: err = %v, want one naming the link and its type", err)
	}
	if l := link(t, ns, other); l.Type() != "veth" || l.Attrs().Index != before {
		t.Errorf("EnsureVXLAN touched the veth: now %s index %d", l.Type(), l.Attrs().Index)
	}
}

// TestVXLANValidation proves that EnsureVXLAN rejects malformed specs
// before touching the kernel, naming the link and the field.
func TestVXLANValidation(t *testing.T) {
	for _, c := range []struct {
		spec VXLAN
		want string
	}{
		{VXLAN{}, "no link name"},
		{VXLAN{Name: "sixteen-bytes-xx"}, "longer than 15"},
		{VXLAN{Name: "a/b"}, "not a valid interface name"},
		{VXLAN{Name: "vx", VNI: 1 << 24}, "VNI 16777216"},
		{VXLAN{Name: "vx", Port: 70000}, "port 70000"},
		{VXLAN{Name: "vx", MTU: 20}, "MTU 20"},
		{VXLAN{Name: "vx", Remote: netip.MustParseAddr("239.1.1.1")}, "remote 239.1.1.1"},
		{VXLAN{Name: "vx", MAC: net.HardwareAddr{1, 2, 3, 4, 5, 6}}, "MAC address 01:02:03:04:05:06"},
		{VXLAN{Name: "vx"}, "no network namespace"},
	} {
		err := EnsureVXLAN(nil, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("EnsureVXLAN(%+v) = %v, want an error mentioning %q", c.spec, err, c.want)
		}
	}
}

// TestSetNeighbor proves that SetNeighbor installs a permanent entry,
// replaces its MAC address in place, and that List reports it.
func TestSetNeighbor(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	ns := netlab.Namespace(t, "neigh")
	vx := n.Link("vx")
	if err := EnsureVXLAN(ns, VXLAN{Name: vx, MTU: 1450, Remote: netip.MustParseAddr("198.18.0.2")}); err != nil {
		t.Fatal(err)
	}
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}
	for _, mac := range []net.HardwareAddr{other, GatewayMAC, GatewayMAC} {
		if err := SetNeighbor(ns, vx, GatewayOverlayIP, mac); err != nil {
			t.Fatal(err)
		}
		inv, err := List(ns, n.Ferry)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"169.254.99.1 lladdr " + mac.String() + " dev " + vx + " permanent"}
		if !slices.Equal(inv.Neighbors, want) {
			t.Errorf("neighbours %q, want %q", inv.Neighbors, want)
		}
	}
	if err := SetNeighbor(ns, n.Link("nope"), GatewayOverlayIP, GatewayMAC); err == nil || !strings.Contains(err.Error(), n.Link("nope")) {
		t.Errorf("SetNeighbor on a missing link: err = %v, want one naming it", err)
	}
	if err := SetNeighbor(ns, vx, GatewayOverlayIP, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err == nil {
		t.Error("SetNeighbor accepted the broadcast address")
	}
	if err := Remove(ns, vx); err != nil {
		t.Fatal(err)
	}
	if inv, err := List(ns, n.Ferry); err != nil || !inv.Empty() {
		t.Errorf("after Remove: %v, %v", inv, err)
	}
}
