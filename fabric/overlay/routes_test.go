package overlay

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// TestSyncRoutes proves that SyncRoutes adds, changes in place and deletes
// ferry's routes until they are exactly the ones asked for, in IPv4 and
// IPv6, that it leaves routes of other protocols alone, even one to a
// destination it is asked to route (which it reports instead), and that
// List shows exactly ferry's routes.
func TestSyncRoutes(t *testing.T) {
	netlab.Require(t)
	n := newNames()
	ns := netlab.Namespace(t, "routes")
	a, b := n.Link("a"), n.Link("b")
	stub(t, ns, a)
	stub(t, ns, b)
	_, err := os.Stat("/proc/sys/net/ipv6")
	ipv6 := err == nil

	// Other owners' routes: one beside ferry's, one where ferry will be
	// asked to route.
	addRoute(t, ns, "10.80.0.0/16", a, "", unix.RTPROT_STATIC)
	addRoute(t, ns, "10.81.0.0/16", b, "", unix.RTPROT_BOOT)
	foreign := func() []string {
		return slices.DeleteFunc(routeLines(t, ns), func(l string) bool { return strings.Contains(l, "proto 197") })
	}
	before := foreign()

	gw := GatewayOverlayIP
	sync := func(routes ...Route) {
		t.Helper()
		if err := SyncRoutes(ns, routes); err != nil {
			t.Fatalf("SyncRoutes(%v): %v", routes, err)
		}
	}
	ours := func() []string {
		t.Helper()
		inv, err := List(ns, n.Ferry)
		if err != nil {
			t.Fatal(err)
		}
		return inv.Routes
	}
	expect := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := ours(); !slices.Equal(got, want) {
			t.Errorf("ferry's routes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if got := foreign(); !slices.Equal(got, before) {
			t.Errorf("other routes changed:\n  %s\nwas:\n  %s", strings.Join(got, "\n  "), strings.Join(before, "\n  "))
		}
	}

	r1 := Route{Dst: netip.MustParsePrefix("10.70.0.0/16"), Link: a, Via: gw, MTU: 1370}
	r2 := Route{Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: a, Via: gw}
	r3 := Route{Dst: netip.MustParsePrefix("10.72.0.0/24"), Link: b}
	sync(r1, r2, r3)
	expect(
		"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1370",
		"10.71.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink",
		"10.72.0.0/24 dev "+b+" proto 197 scope link",
	)
	// Idempotent, and without churn: no route event at all. (IPv4 itself
	// ignores a replace by an identical route; IPv6 does replace it, and
	// drops the path MTUs learnt through it: see the IPv6 part below.)
	quiet(t, ns, func() { sync(r1, r2, r3) })
	expect(
		"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1370",
		"10.71.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink",
		"10.72.0.0/24 dev "+b+" proto 197 scope link",
	)

	// r1 changes MTU, r3 link and shape, r2 goes, r4 comes.
	r1.MTU = 1300
	r3 = Route{Dst: r3.Dst, Link: a, Via: gw}
	r4 := Route{Dst: netip.MustParsePrefix("10.73.0.0/16"), Link: b, Via: netip.MustParseAddr("192.0.2.9"), MTU: 1400}
	sync(r1, r3, r4)
	expect(
		"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1300",
		"10.72.0.0/24 via 169.254.99.1 dev "+a+" proto 197 onlink",
		"10.73.0.0/16 via 192.0.2.9 dev "+b+" proto 197 onlink mtu 1400",
	)

	if ipv6 {
		r6 := Route{Dst: netip.MustParsePrefix("fd70::/64"), Link: b, MTU: 1400}
		r6via := Route{Dst: netip.MustParsePrefix("fd71::/64"), Link: a, Via: netip.MustParseAddr("fe80::1")}
		sync(r1, r6, r6via)
		quiet(t, ns, func() { sync(r1, r6, r6via) })
		expect(
			"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1300",
			"fd70::/64 dev "+b+" proto 197 metric 1024 mtu 1400",
			"fd71::/64 via fe80::1 dev "+a+" proto 197 metric 1024 onlink",
		)
		r6.MTU = 1500
		sync(r1, r6)
		expect(
			"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1300",
			"fd70::/64 dev "+b+" proto 197 metric 1024 mtu 1500",
		)
	}

	// A destination someone else routes: not taken over, reported, and
	// everything else is still done.
	err = SyncRoutes(ns, []Route{r1, {Dst: netip.MustParsePrefix("10.81.0.0/16"), Link: a, Via: gw}, r4})
	if err == nil || !strings.Contains(err.Error(), "10.81.0.0/16") || !strings.Contains(err.Error(), "boot") {
		t.Errorf("SyncRoutes over another's route: err = %v, want one naming 10.81.0.0/16 and its protocol", err)
	}
	expect(
		"10.70.0.0/16 via 169.254.99.1 dev "+a+" proto 197 onlink mtu 1300",
		"10.73.0.0/16 via 192.0.2.9 dev "+b+" proto 197 onlink mtu 1400",
	)

	// A route over a missing link is an error naming both.
	err = SyncRoutes(ns, []Route{{Dst: netip.MustParsePrefix("10.74.0.0/16"), Link: n.Link("nope")}})
	if err == nil || !strings.Contains(err.Error(), "10.74.0.0/16") || !strings.Contains(err.Error(), n.Link("nope")) {
		t.Errorf("SyncRoutes over a missing link: err = %v, want one naming the route and the link", err)
	}
	expect() // and the rest of ours went, as asked

	sync()
	expect()
}

// quiet fails the test if f changes any route in ns.
func quiet(t *testing.T, ns *netns.Namespace, f func()) {
	t.Helper()
	updates, done := make(chan netlink.RouteUpdate, 64), make(chan struct{})
	h := ns.Handle()
	errs := make(chan error, 1)
	err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{
		Namespace: &h,
		ErrorCallback: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
	})
	if err != nil {
		t.Fatalf("subscribe to route events in %s: %v", ns, err)
	}
	defer close(done) // the subscription's socket closes: its error is no news
	f()
	// A marker route, added and deleted after f: its events arrive after
	// any of f's.
	marker := &netlink.Route{Dst: prefixIPNet(netip.MustParsePrefix("192.0.2.255/32")), Type: unix.RTN_BLACKHOLE, Protocol: unix.RTPROT_STATIC}
	nl := handle(t, ns)
	if err := nl.RouteAdd(marker); err != nil {
		t.Fatal(err)
	}
	if err := nl.RouteDel(marker); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case u := <-updates:
			if ipNetPrefix(u.Dst) == netip.MustParsePrefix("192.0.2.255/32") {
				return
			}
			t.Errorf("route event (type %d): %s", u.Type, describeRoute(nl, u.Route))
		case err := <-errs:
			t.Fatalf("route events in %s: %v", ns, err)
		case <-timeout:
			t.Fatal("no event for the marker route")
		}
	}
}

// TestRouteValidation proves that SyncRoutes rejects malformed routes
// before touching the kernel, naming the route and what is wrong.
func TestRouteValidation(t *testing.T) {
	for _, c := range []struct {
		name  string
		route Route
		want  string
	}{
		{"no destination", Route{Link: "x"}, "no destination"},
		{"host bits", Route{Dst: netip.MustParsePrefix("10.70.0.5/16"), Link: "x"}, "10.70.0.0/16"},
		{"no link", Route{Dst: netip.MustParsePrefix("10.70.0.0/16")}, "no link name"},
		{"long link", Route{Dst: netip.MustParsePrefix("10.70.0.0/16"), Link: "a-very-long-link-name"}, "longer than 15"},
		{"family", Route{Dst: netip.MustParsePrefix("10.70.0.0/16"), Link: "x", Via: netip.MustParseAddr("fe80::1")}, "another address family"},
		{"MTU", Route{Dst: netip.MustParsePrefix("fd00::/64"), Link: "x", MTU: 1200}, "MTU 1200"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := SyncRoutes(nil, []Route{c.route})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("SyncRoutes(%v) = %v, want an error mentioning %q", c.route, err, c.want)
			}
		})
	}
	r := Route{Dst: netip.MustParsePrefix("10.70.0.0/16"), Link: "x"}
	if err := SyncRoutes(nil, []Route{r, r}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("SyncRoutes with a duplicate = %v, want an error", err)
	}
}
