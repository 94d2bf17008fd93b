package overlay

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Remove undoes this package's work in ns: it deletes links (a missing one
// is fine; the kernel takes their routes and neighbour entries with them)
// and then every route of RouteProtocol left, in any table.
func Remove(ns *netns.Namespace, links ...string) error {
	for _, l := range links {
		if err := validLinkName(l); err != nil {
			return fmt.Errorf("remove: %w", err)
		}
	}
	return withHandle(ns, func(h *netlink.Handle) error {
		var errs []error
		for _, name := range links {
			l, err := h.LinkByName(name)
			if isNotFound(err) {
				continue
			}
			if err == nil {
				err = h.LinkDel(l)
			}
			if err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove link %s: %w", name, err))
			}
		}
		routes, err := listOurRoutes(h)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("remove routes: %w", err))...)
		}
		for _, r := range routes {
			if err := deleteRoute(h, r); err != nil {
				errs = append(errs, fmt.Errorf("remove route %s: %w", describeRoute(h, r), err))
			}
		}
		return errors.Join(errs...)
	})
}

// Inventory is what List found, each entry one human-readable line, sorted.
type Inventory struct {
	// Links are the links whose names start with the prefix, such as
	// "fy0 vxlan id 197 remote 10.0.0.7 port 4799 mtu 1450 up".
	Links []string
	// Routes are the routes of RouteProtocol, such as
	// "10.70.0.0/16 via 169.254.99.1 dev fy0 proto 197 onlink mtu 1370".
	Routes []string
	// Neighbors are the permanent neighbour entries on those links, such
	// as "169.254.99.1 lladdr 02:66:65:72:72:79 dev fy0 permanent".
	Neighbors []string
}

// Empty reports whether List found nothing.
func (i Inventory) Empty() bool {
	return len(i.Links) == 0 && len(i.Routes) == 0 && len(i.Neighbors) == 0
}

func (i Inventory) String() string {
	var b strings.Builder
	for _, sec := range []struct {
		name  string
		lines []string
	}{{"links", i.Links}, {"routes", i.Routes}, {"neighbours", i.Neighbors}} {
		fmt.Fprintf(&b, "%s:", sec.name)
		if len(sec.lines) == 0 {
			b.WriteString(" none")
		}
		for _, l := range sec.lines {
			b.WriteString("\n  " + l)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// List reports ferry's footprint in ns: the links whose names start with
// linkPrefix, every route of RouteProtocol (in any table) and the permanent
// neighbour entries on those links. An empty linkPrefix lists every link.
func List(ns *netns.Namespace, linkPrefix string) (Inventory, error) {
	var inv Inventory
	err := withHandle(ns, func(h *netlink.Handle) error {
		links, err := dump(h.LinkList)
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			a := l.Attrs()
			if !strings.HasPrefix(a.Name, linkPrefix) {
				continue
			}
			inv.Links = append(inv.Links, describeLink(l))
			for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
				neighs, err := dump(func() ([]netlink.Neigh, error) { return h.NeighList(a.Index, family) })
				if err != nil {
					return fmt.Errorf("list %s neighbours on %s: %w", familyName(family), a.Name, err)
				}
				for _, n := range neighs {
					if n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil {
						continue
					}
					inv.Neighbors = append(inv.Neighbors, fmt.Sprintf("%s lladdr %s dev %s permanent", n.IP, n.HardwareAddr, a.Name))
				}
			}
		}
		routes, err := listOurRoutes(h)
		if err != nil {
			return err
		}
		for _, r := range routes {
			inv.Routes = append(inv.Routes, describeRoute(h, r))
		}
		return nil
	})
	if err != nil {
		return Inventory{}, fmt.Errorf("list ferry's links and routes in network namespace %s: %w", ns, err)
	}
	slices.Sort(inv.Links)
	slices.Sort(inv.Routes)
	slices.Sort(inv.Neighbors)
	return inv, nil
}

func describeLink(l netlink.Link) string {
	a := l.Attrs()
	s := a.Name + " " + l.Type()
	if v, ok := l.(*netlink.Vxlan); ok {
		s += fmt.Sprintf(" id %d", v.VxlanId)
		if r := ipAddr(v.Group); r.IsValid() {
			s += " remote " + r.String()
		}
		s += fmt.Sprintf(" port %d", v.Port)
	}
	if len(a.HardwareAddr) > 0 {
		s += " lladdr " + a.HardwareAddr.String()
	}
	s += fmt.Sprintf(" mtu %d", a.MTU)
	if a.Flags&net.FlagUp != 0 {
		s += " up"
	} else {
		s += " down"
	}
	return s
}
