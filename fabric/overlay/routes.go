package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Route is one of ferry's routes, in the main table.
type Route struct {
	// Dst is the destination range, a network address (no host bits set).
	Dst netip.Prefix
	// Link is the name of the link the route leaves through.
	Link string
	// Via is the next hop, taken to be on Link whatever Link's addresses
	// (onlink): on a node GatewayOverlayIP. Zero routes Dst directly on
	// Link (scope link), as the gateway routes peer ranges into its tunnel.
	Via netip.Addr
	// MTU is the route's MTU (the "mtu" metric); zero leaves Link's MTU.
	MTU int
}

func (r Route) String() string {
	s := r.Dst.String()
	if r.Via.IsValid() {
		s += " via " + r.Via.String()
	}
	s += " dev " + r.Link
	if r.Via.IsValid() {
		s += " onlink"
	}
	if r.MTU != 0 {
		s += fmt.Sprintf(" mtu %d", r.MTU)
	}
	return s
}

func (r Route) validate() error {
	if !r.Dst.IsValid() {
		return errors.New("route: no destination")
	}
	if r.Dst.Addr().Zone() != "" || r.Dst.Addr().Is4In6() {
		return fmt.Errorf("route %s: destination must be a plain IPv4 or IPv6 prefix", r.Dst)
	}
	if r.Dst.Masked() != r.Dst {
		return fmt.Errorf("route %s: destination has host bits set (the network is %s)", r.Dst, r.Dst.Masked())
	}
	if err := validLinkName(r.Link); err != nil {
		return fmt.Errorf("route %s: %w", r.Dst, err)
	}
	if r.Via.IsValid() {
		via := r.Via.Unmap()
		if via.Is4() != r.Dst.Addr().Is4() {
			return fmt.Errorf("route %s: next hop %s is of another address family", r.Dst, r.Via)
		}
		if via.IsUnspecified() || via.IsMulticast() || via.Zone() != "" {
			return fmt.Errorf("route %s: next hop %s is not a unicast address", r.Dst, r.Via)
		}
	}
	minMTU := 68
	if r.Dst.Addr().Is6() {
		minMTU = 1280
	}
	if r.MTU != 0 && (r.MTU < minMTU || r.MTU > 65535) {
		return fmt.Errorf("route %s: MTU %d outside %d–65535", r.Dst, r.MTU, minMTU)
	}
	return nil
}

// SyncRoutes makes ferry's routes in ns's main table exactly routes: it
// adds missing ones, replaces ones that differ (link, next hop, MTU) and
// deletes ferry's routes to any other destination. Routes of any other
// protocol stay untouched: should one have a destination routes asks for,
// that route of ferry's is not installed (the kernel would overwrite or
// shadow the other's) and SyncRoutes reports it, after doing all the rest.
func SyncRoutes(ns *netns.Namespace, routes []Route) error {
	seen := make(map[netip.Prefix]bool, len(routes))
	for _, r := range routes {
		if err := r.validate(); err != nil {
			return err
		}
		if seen[r.Dst] {
			return fmt.Errorf("route %s: listed twice", r.Dst)
		}
		seen[r.Dst] = true
	}
	return withHandle(ns, func(h *netlink.Handle) error {
		current, err := listRoutes(h, unix.RT_TABLE_MAIN)
		if err != nil {
			return err
		}
		ours := make(map[netip.Prefix][]netlink.Route)
		foreign := make(map[netip.Prefix]netlink.Route)
		for _, r := range current {
			dst := ipNetPrefix(r.Dst)
			if r.Protocol == RouteProtocol {
				ours[dst] = append(ours[dst], r)
			} else if seen[dst] {
				foreign[dst] = r
			}
		}
		var errs []error
		// Deletions first: a stale route of ours may hold the place of a
		// wanted one of another shape.
		for dst, rs := range ours {
			if seen[dst] {
				continue
			}
			for _, r := range rs {
				if err := deleteRoute(h, r); err != nil {
					errs = append(errs, fmt.Errorf("route %s: delete: %w", dst, err))
				}
			}
		}
		for _, want := range routes {
			if f, ok := foreign[want.Dst]; ok {
				errs = append(errs, fmt.Errorf("route %s: the destination is routed by protocol %s (%s): not taking it over", want.Dst, f.Protocol, describeRoute(h, f)))
				continue
			}
			if err := ensureRoute(h, want, ours[want.Dst]); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// ensureRoute installs want unless one of have (ours, to the same
// destination) already is it, and deletes the others of have.
func ensureRoute(h *netlink.Handle, want Route, have []netlink.Route) error {
	link, err := h.LinkByName(want.Link)
	if err != nil {
		return fmt.Errorf("route %s: look up link %s: %w", want, want.Link, err)
	}
	nr := toNetlink(want, link.Attrs().Index)
	keep := slices.IndexFunc(have, func(r netlink.Route) bool { return sameRoute(r, nr) })
	if keep < 0 {
		if err := h.RouteReplace(nr); err != nil {
			return fmt.Errorf("route %s: install: %w", want, err)
		}
	}
	for i, r := range have {
		// RouteReplace replaced the one with our metric in place.
		if i == keep || (keep < 0 && r.Priority == nr.Priority && r.Tos == 0) {
			continue
		}
		if err := deleteRoute(h, r); err != nil {
			return fmt.Errorf("route %s: delete the older one (%s): %w", want.Dst, describeRoute(h, r), err)
		}
	}
	return nil
}

// ipv6DefaultMetric is the metric IPv6 gives routes added without one.
const ipv6DefaultMetric = 1024

func toNetlink(r Route, linkIndex int) *netlink.Route {
	nr := &netlink.Route{
		LinkIndex: linkIndex,
		Dst:       prefixIPNet(r.Dst),
		Protocol:  RouteProtocol,
		Table:     unix.RT_TABLE_MAIN,
		Type:      unix.RTN_UNICAST,
		Scope:     netlink.SCOPE_LINK,
		MTU:       r.MTU,
		Family:    netlink.FAMILY_V4,
	}
	if r.Dst.Addr().Is6() {
		nr.Family = netlink.FAMILY_V6
		nr.Priority = ipv6DefaultMetric
		// IPv6 has no route scopes: the kernel reports universe.
		nr.Scope = netlink.SCOPE_UNIVERSE
	}
	if r.Via.IsValid() {
		nr.Gw = net.IP(r.Via.Unmap().AsSlice())
		nr.Flags = int(netlink.FLAG_ONLINK)
		nr.Scope = netlink.SCOPE_UNIVERSE
	}
	return nr
}

// sameRoute reports whether the kernel's route have is want as
// toNetlink built it.
func sameRoute(have netlink.Route, want *netlink.Route) bool {
	return have.LinkIndex == want.LinkIndex &&
		len(have.MultiPath) == 0 &&
		have.Gw.Equal(want.Gw) &&
		have.Flags&unix.RTNH_F_ONLINK == want.Flags&unix.RTNH_F_ONLINK &&
		have.MTU == want.MTU &&
		have.Scope == want.Scope &&
		have.Type == want.Type &&
		have.Priority == want.Priority &&
		have.Tos == 0 &&
		have.Src == nil &&
		have.Encap == nil
}

func deleteRoute(h *netlink.Handle, r netlink.Route) error {
	err := h.RouteDel(&r)
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return nil // gone already, with its link perhaps
	}
	return err
}

// listRoutes lists the IPv4 and IPv6 routes of table (every table for
// RT_TABLE_UNSPEC), cached ones excepted.
func listRoutes(h *netlink.Handle, table int) ([]netlink.Route, error) {
	var all []netlink.Route
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := dump(func() ([]netlink.Route, error) {
			return h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, fmt.Errorf("list %s routes: %w", familyName(family), err)
		}
		all = append(all, rs...)
	}
	return all, nil
}

// listOurRoutes lists ferry's routes in every table.
func listOurRoutes(h *netlink.Handle) ([]netlink.Route, error) {
	rs, err := listRoutes(h, unix.RT_TABLE_UNSPEC)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rs, func(r netlink.Route) bool { return r.Protocol != RouteProtocol }), nil
}

// describeRoute renders a kernel route the way `ip route` would, roughly.
func describeRoute(h *netlink.Handle, r netlink.Route) string {
	s := ipNetPrefix(r.Dst).String()
	if r.Type != unix.RTN_UNICAST {
		s = routeTypeName(r.Type) + " " + s
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if r.LinkIndex != 0 {
		name := fmt.Sprintf("if%d", r.LinkIndex)
		if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
			name = l.Attrs().Name
		}
		s += " dev " + name
	}
	for _, nh := range r.MultiPath {
		s += " nexthop"
		if nh.Gw != nil {
			s += " via " + nh.Gw.String()
		}
		s += fmt.Sprintf(" dev if%d", nh.LinkIndex)
	}
	if r.Table != unix.RT_TABLE_MAIN {
		s += fmt.Sprintf(" table %d", r.Table)
	}
	s += " proto " + r.Protocol.String()
	if r.Scope == netlink.SCOPE_LINK {
		s += " scope link"
	}
	if r.Priority != 0 {
		s += fmt.Sprintf(" metric %d", r.Priority)
	}
	if r.Flags&unix.RTNH_F_ONLINK != 0 {
		s += " onlink"
	}
	if r.MTU != 0 {
		s += fmt.Sprintf(" mtu %d", r.MTU)
	}
	return s
}

func routeTypeName(t int) string {
	switch t {
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_MULTICAST:
		return "multicast"
	}
	return fmt.Sprintf("type%d", t)
}

func familyName(family int) string {
	if family == netlink.FAMILY_V6 {
		return "IPv6"
	}
	return "IPv4"
}
