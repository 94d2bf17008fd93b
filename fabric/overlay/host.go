package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// EnableForwarding lets ns forward between ferry's links: it sets
// net.ipv4.ip_forward=1, net.ipv6.conf.all.forwarding=1 (where the
// namespace has IPv6) and rp_filter=0 on "all" and on each of links. The
// kernel applies the larger of "all" and a link's rp_filter to packets
// arriving on the link, so links must name every link that packets of the
// overlay arrive on with a source routed out elsewhere: on the gateway the
// VXLAN device (pods' packets come in through it, their replies leave
// through the pod interface), on a node the link replies from the gateway
// come in through (their sources are routed into the VXLAN device).
//
// The values are written to /proc/sys from a thread in ns: the kernel
// resolves /proc/sys/net by the writing thread's network namespace, not by
// the mount or the process. Values already right are not written again.
//
// Turning IPv6 forwarding on makes the kernel ignore router advertisements
// on links with accept_ra=1, which a node that configures itself by SLAAC
// would notice; Kubernetes nodes with IPv6 pod networks forward already.
func EnableForwarding(ns *netns.Namespace, links ...string) error {
	if ns == nil {
		return errors.New("enable forwarding: no network namespace given")
	}
	for _, l := range links {
		if err := validLinkName(l); err != nil {
			return fmt.Errorf("enable forwarding: %w", err)
		}
	}
	return ns.Do(func() error {
		settings := []struct{ path, value string }{
			{"net/ipv4/ip_forward", "1"},
			{"net/ipv4/conf/all/rp_filter", "0"},
		}
		if _, err := os.Stat("/proc/sys/net/ipv6/conf/all/forwarding"); err == nil {
			settings = append(settings, struct{ path, value string }{"net/ipv6/conf/all/forwarding", "1"})
		}
		for _, l := range links {
			if _, err := os.Stat(filepath.Join("/proc/sys/net/ipv4/conf", l)); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("enable forwarding: link %s: not in network namespace %s (or without IPv4)", l, ns)
			}
			settings = append(settings, struct{ path, value string }{filepath.Join("net/ipv4/conf", l, "rp_filter"), "0"})
		}
		for _, s := range settings {
			if err := writeSysctl(s.path, s.value); err != nil {
				return fmt.Errorf("enable forwarding in network namespace %s: %w", ns, err)
			}
		}
		return nil
	})
}

// writeSysctl sets /proc/sys/<path> to value unless it has it already.
func writeSysctl(path, value string) error {
	full := filepath.Join("/proc/sys", path)
	old, err := os.ReadFile(full)
	if err != nil {
		return fmt.Errorf("read %s: %w", full, err)
	}
	if string(bytes.TrimSpace(old)) == value {
		return nil
	}
	if err := os.WriteFile(full, []byte(value+"\n"), 0); err != nil {
		return fmt.Errorf("set %s to %s (was %s): %w", full, value, bytes.TrimSpace(old), err)
	}
	return nil
}

// UnderlayMTU returns the MTU of the link ns's default route leaves
// through, IPv4's before IPv6's, the lowest metric's if there are several
// (of a multipath route, its smallest). Without a default route it is the
// largest MTU of the links that are up, loopback excepted.
func UnderlayMTU(ns *netns.Namespace) (int, error) {
	var mtu int
	err := withHandle(ns, func(h *netlink.Handle) error {
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rs, err := dump(func() ([]netlink.Route, error) {
				return h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
			})
			if err != nil {
				return fmt.Errorf("underlay MTU: list %s routes: %w", familyName(family), err)
			}
			rs = slices.DeleteFunc(rs, func(r netlink.Route) bool {
				return ipNetPrefix(r.Dst).Bits() > 0 || r.Type != unix.RTN_UNICAST
			})
			slices.SortStableFunc(rs, func(a, b netlink.Route) int { return a.Priority - b.Priority })
			for _, r := range rs {
				m, err := routeMTU(h, r)
				if err != nil {
					return fmt.Errorf("underlay MTU: default route %s: %w", describeRoute(h, r), err)
				}
				if m > 0 {
					mtu = m
					return nil
				}
			}
		}
		links, err := dump(h.LinkList)
		if err != nil {
			return fmt.Errorf("underlay MTU: list links: %w", err)
		}
		for _, l := range links {
			a := l.Attrs()
			if a.Flags&net.FlagUp != 0 && a.Flags&net.FlagLoopback == 0 && a.MTU > mtu {
				mtu = a.MTU
			}
		}
		if mtu == 0 {
			return fmt.Errorf("underlay MTU: network namespace %s has neither a default route nor a link up but loopback", ns)
		}
		return nil
	})
	return mtu, err
}

// routeMTU is the MTU of the link r leaves through, or the smallest of its
// next hops' links; a route's own mtu metric, if lower, wins. Zero: r
// leaves through no link (a blackhole, say).
func routeMTU(h *netlink.Handle, r netlink.Route) (int, error) {
	indexes := []int{r.LinkIndex}
	if len(r.MultiPath) > 0 {
		indexes = indexes[:0]
		for _, nh := range r.MultiPath {
			indexes = append(indexes, nh.LinkIndex)
		}
	}
	mtu := 0
	for _, i := range indexes {
		if i == 0 {
			continue
		}
		l, err := h.LinkByIndex(i)
		if err != nil {
			return 0, fmt.Errorf("look up link %d: %w", i, err)
		}
		if m := l.Attrs().MTU; mtu == 0 || m < mtu {
			mtu = m
		}
	}
	if r.MTU > 0 && mtu > 0 && r.MTU < mtu {
		mtu = r.MTU
	}
	return mtu, nil
}
