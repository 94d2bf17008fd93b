package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// EnableForwarding lets ns forward what arrives on links (ferry's links
// that packets of the overlay arrive on with a source routed out
// elsewhere: on the gateway the VXLAN device, whose pods' packets have
// replies leaving through the pod interface, and the tunnel).
//
// It works in a container, where /proc/sys is read-only and the process
// has NET_ADMIN only:
//
//   - On each of links it sets IPv4 forwarding on and rp_filter off over
//     rtnetlink (RTM_SETLINK, IFLA_INET_CONF), which needs NET_ADMIN and
//     no /proc/sys. The kernel forwards a packet by the forwarding flag of
//     the link it arrived on, so these are what the gateway needs.
//   - net.ipv4.ip_forward (every link's flag at once) is set when it is 0
//     and /proc/sys is writable; where it is read-only the links' own
//     flags stand in for it. (A pod's namespace copies the node's IPv4
//     settings, and Kubernetes nodes forward, so in a pod it is 1 already.)
//   - net.ipv4.conf.all.rp_filter: the kernel applies the larger of "all"
//     and a link's value, so "all" strict (1) would drop the overlay's
//     packets whatever the link says: it is set to 0 when it is 1, and
//     when /proc/sys is read-only that is an error naming the remedy. Loose
//     (2) is kept: the overlay's sources are routable, so it passes them.
//
// /proc/sys is written from a thread in ns: the kernel resolves
// /proc/sys/net by the writing thread's network namespace, not by the
// mount or the process. Values already right are not written again.
// IPv6 is not forwarded: the fabric carries IPv4 pod CIDRs only.
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
		for _, l := range links {
			if err := setLinkForwarding(l); err != nil {
				return fmt.Errorf("enable forwarding in network namespace %s: %w", ns, err)
			}
		}
		if err := writeSysctl("net/ipv4/ip_forward", "1", "1"); err != nil && !readOnly(err) {
			return fmt.Errorf("enable forwarding in network namespace %s: %w", ns, err)
		}
		if err := writeSysctl("net/ipv4/conf/all/rp_filter", "0", "0", "2"); err != nil {
			if readOnly(err) {
				err = fmt.Errorf("%w: strict reverse-path filtering on all links drops the overlay's packets; "+
					"a pod's namespace copies it from its node: set net.ipv4.conf.all.rp_filter to 0 or 2 on the nodes "+
					"(or allow that unsafe sysctl on the kubelet and set it in the gateway pod's securityContext.sysctls)", err)
			}
			return fmt.Errorf("enable forwarding in network namespace %s: %w", ns, err)
		}
		return nil
	})
}

// IPv4 devconf attributes of IFLA_INET_CONF (linux/ip.h, IPV4_DEVCONF_*).
const (
	ipv4DevconfForwarding = 1
	ipv4DevconfRPFilter   = 8
)

// setLinkForwarding turns IPv4 forwarding on and rp_filter off on link, in
// the calling thread's namespace, over rtnetlink.
func setLinkForwarding(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return fmt.Errorf("link %s: not in the network namespace", name)
		}
		return fmt.Errorf("link %s: %w", name, err)
	}
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(l.Attrs().Index)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	conf := spec.AddRtAttr(unix.AF_INET, nil).AddRtAttr(unix.IFLA_INET_CONF, nil)
	conf.AddRtAttr(ipv4DevconfForwarding, nl.Uint32Attr(1))
	conf.AddRtAttr(ipv4DevconfRPFilter, nl.Uint32Attr(0))
	req.AddData(spec)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("link %s: set forwarding=1 rp_filter=0: %w", name, err)
	}
	return nil
}

// readOnly reports whether err is a write refused because /proc/sys is
// mounted read-only (as in a container) or not writable by this process.
func readOnly(err error) bool {
	return errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}

// writeSysctl sets /proc/sys/<path> to value unless it has one of ok
// already.
func writeSysctl(path, value string, ok ...string) error {
	full := filepath.Join("/proc/sys", path)
	old, err := os.ReadFile(full)
	if err != nil {
		return fmt.Errorf("read %s: %w", full, err)
	}
	if slices.Contains(ok, string(bytes.TrimSpace(old))) {
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
