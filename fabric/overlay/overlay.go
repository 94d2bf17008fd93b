// Package overlay is the link and route plumbing of ferry's pod network
// fabric: a VXLAN overlay from every node to the cluster's gateway pod, the
// routes that steer peer clusters' ranges into it, a permanent neighbour
// entry that spares the overlay ARP, and the sysctls that let the gateway
// and the nodes forward.
//
// # The model
//
// The gateway pod owns a VXLAN device with no fixed remote and the fixed,
// locally administered MAC address GatewayMAC. Nodes send encapsulated
// packets to it; the gateway decapsulates them and routes them on into its
// tunnel device (Route{Dst: <peer range>, Link: <tunnel>}). The gateway
// never sends through its VXLAN device: replies to local pods leave through
// its ordinary pod interface and reach the pods over the cluster's own
// network.
//
// Every node (the route agent, on the host network) owns a VXLAN device
// whose remote is the gateway pod's IP, a permanent neighbour entry
// GatewayOverlayIP → GatewayMAC on it, and for every peer range a route
//
//	<range> via GatewayOverlayIP dev <vxlan> onlink mtu <mtu>
//
// GatewayOverlayIP needs no address anywhere: it only names the next hop
// whose MAC address the node writes into the inner Ethernet header.
//
// Every route this package installs carries RouteProtocol, so that
// SyncRoutes, Remove and List find exactly ferry's routes and never anyone
// else's.
//
// A reconcile loop calls, in this order, EnsureVXLAN, SetNeighbor and
// SyncRoutes: EnsureVXLAN recreates the device when an immutable attribute
// changed, and the kernel drops the neighbour entry and routes of a deleted
// device with it.
//
// Every function takes the network namespace to work in and talks netlink
// through a handle opened in it (Namespace.NetlinkHandle), so the calling
// goroutine's own namespace does not matter; EnableForwarding sets the
// links' forwarding over rtnetlink and writes /proc/sys (where it may)
// from a thread switched into the namespace (Namespace.Do).
// Neither enters the namespace when it is the caller's own.
package overlay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Encapsulation overheads, in bytes, to subtract from an underlay MTU.
const (
	// VXLANOverhead is what VXLAN adds over an IPv4 underlay: outer IPv4
	// (20), UDP (8), VXLAN (8) and the inner Ethernet header (14). Over an
	// IPv6 underlay it is 70.
	VXLANOverhead = 50
	// WireGuardOverhead is WireGuard's worst case: outer IPv6 (40), UDP (8)
	// and WireGuard's data header and tag (32). Over IPv4 it is 60.
	WireGuardOverhead = 80
)

// Defaults EnsureVXLAN applies to a zero VXLAN.Port or VXLAN.VNI.
const (
	// DefaultPort is ferry's VXLAN UDP port. It is neither the IANA port
	// 4789 (Cilium, Calico, Antrea, OVN) nor Linux's legacy 8472 (flannel,
	// Cilium on some setups), so that the overlay never lands on a CNI's
	// VXLAN socket in the host network namespace: one UDP port takes one
	// VXLAN socket per namespace.
	DefaultPort = 4799
	// DefaultVNI is ferry's VXLAN network identifier, 197 (0xc5), the same
	// number as RouteProtocol. VNIs are scoped to a UDP port, so on its own
	// port ferry's VNI cannot collide with a CNI's.
	DefaultVNI = 197
)

// RouteProtocol marks every route ferry installs (rtm_protocol, "proto 197"
// in `ip route`). 197 (0xc5) is not in iproute2's list of reserved
// protocols (rt_protos: kernel 2, boot 3, static 4, …, bgp 186 – eigrp 192)
// and not one that the common CNIs or routing daemons stamp on their
// routes. Anything that is not exactly this value is someone else's route,
// which this package neither changes nor deletes.
const RouteProtocol netlink.RouteProtocol = 0xc5

// GatewayOverlayIP is the next hop nodes route peer ranges through: a
// link-local address (169.254.0.0/16, outside anything a cluster routes and
// far from cloud metadata's 169.254.169.254) that lives only in the nodes'
// neighbour entries, optionally also as the gateway VXLAN device's address.
var GatewayOverlayIP = netip.MustParseAddr("169.254.99.1")

// GatewayMAC is the gateway VXLAN device's MAC address, the one nodes
// address inner frames to: 02:66:65:72:72:79, a locally administered
// unicast address (first octet 0x02) whose other octets spell "ferry". Go
// has no constant slices: treat it as one, and do not modify it.
var GatewayMAC = net.HardwareAddr{0x02, 0x66, 0x65, 0x72, 0x72, 0x79}

// VXLAN describes one of ferry's VXLAN devices.
type VXLAN struct {
	// Name is the link's name, at most 15 bytes.
	Name string
	// VNI is the VXLAN network identifier, below 2^24; zero is DefaultVNI.
	VNI int
	// Port is the UDP port the device sends to and listens on; zero is
	// DefaultPort.
	Port int
	// MTU is the link's MTU; zero leaves whatever it is, on creation the
	// kernel's choice, 1500 for a VXLAN device not bound to an underlay
	// device: too large over a 1500-byte underlay. Set it to UnderlayMTU
	// less VXLANOverhead.
	MTU int
	// Remote is, on a node, the gateway pod's IP, which every frame the
	// device sends goes to. On the gateway it is zero: the device only
	// receives.
	Remote netip.Addr
	// MAC is the link's MAC address: GatewayMAC on the gateway; nil leaves
	// the kernel's (random) choice.
	MAC net.HardwareAddr
	// Address is the link's only address (GatewayOverlayIP/32 on the
	// gateway); zero means none.
	Address netip.Prefix
}

// EnsureVXLAN makes the VXLAN device v.Name in ns match v and brings it up:
// it creates a missing device, fixes MTU, MAC address and address in place,
// and deletes and recreates a device whose VNI, port, remote or learning
// differ (the kernel refuses to change VNI or port of a live device; a new
// remote gets a fresh device too, with no forwarding entries of the old),
// which also drops its neighbour entries and routes: call SetNeighbor and
// SyncRoutes after it. A link of another type by that name is an error and stays as
// it is.
//
// ferry's VXLAN devices carry unicast only: EnsureVXLAN creates them
// without an IPv6 link-local address and keeps IFF_MULTICAST off, so that
// the kernel sends no router solicitations, DAD probes, IGMP or MLD reports
// through them (turning IPv6 forwarding on joins the all-routers groups and
// reports it): on a node those would cross the overlay, on the gateway be
// dropped. Next hops over the overlay have permanent neighbour entries.
func EnsureVXLAN(ns *netns.Namespace, v VXLAN) error {
	if v.VNI == 0 {
		v.VNI = DefaultVNI
	}
	if v.Port == 0 {
		v.Port = DefaultPort
	}
	v.Remote = v.Remote.Unmap() // as the kernel reports it
	if err := v.validate(); err != nil {
		return err
	}
	return withHandle(ns, func(h *netlink.Handle) error {
		link, err := h.LinkByName(v.Name)
		switch {
		case isNotFound(err):
			link = nil
		case err != nil:
			return fmt.Errorf("vxlan %s: look up the link: %w", v.Name, err)
		}
		if link != nil {
			existing, ok := link.(*netlink.Vxlan)
			if !ok {
				return fmt.Errorf("vxlan %s: a link of type %s has that name: not replacing what ferry did not create", v.Name, link.Type())
			}
			if field := immutableDiff(existing, v); field != "" {
				if err := h.LinkDel(existing); err != nil && !isNotFound(err) {
					return fmt.Errorf("vxlan %s: delete it to change its %s: %w", v.Name, field, err)
				}
				link = nil
			}
		}
		if link == nil {
			if link, err = createVXLAN(h, v); err != nil {
				return err
			}
		}
		return fixVXLAN(h, link.(*netlink.Vxlan), v)
	})
}

func (v VXLAN) validate() error {
	if err := validLinkName(v.Name); err != nil {
		return fmt.Errorf("vxlan: %w", err)
	}
	if v.VNI < 0 || v.VNI >= 1<<24 {
		return fmt.Errorf("vxlan %s: VNI %d outside 0–16777215", v.Name, v.VNI)
	}
	if v.Port < 0 || v.Port > 65535 {
		return fmt.Errorf("vxlan %s: port %d outside 1–65535", v.Name, v.Port)
	}
	if v.MTU != 0 && (v.MTU < 68 || v.MTU > 65535) {
		return fmt.Errorf("vxlan %s: MTU %d outside 68–65535", v.Name, v.MTU)
	}
	if v.Remote.IsValid() && (v.Remote.IsUnspecified() || v.Remote.IsMulticast() || v.Remote.Zone() != "") {
		return fmt.Errorf("vxlan %s: remote %s is not a unicast address", v.Name, v.Remote)
	}
	if v.MAC != nil {
		if len(v.MAC) != 6 || v.MAC[0]&1 != 0 || isZero(v.MAC) {
			return fmt.Errorf("vxlan %s: MAC address %s is not a unicast Ethernet address", v.Name, v.MAC)
		}
	}
	if v.Address.IsValid() && v.Address.Addr().Zone() != "" {
		return fmt.Errorf("vxlan %s: address %s has a zone", v.Name, v.Address)
	}
	return nil
}

// immutableDiff names the first attribute of existing that differs from v
// and that the kernel cannot change on a live device, or returns "".
func immutableDiff(existing *netlink.Vxlan, v VXLAN) string {
	switch {
	case existing.VxlanId != v.VNI:
		return fmt.Sprintf("VNI (%d, want %d)", existing.VxlanId, v.VNI)
	case existing.Port != v.Port:
		return fmt.Sprintf("port (%d, want %d)", existing.Port, v.Port)
	case ipAddr(existing.Group) != v.Remote:
		return fmt.Sprintf("remote (%s, want %s)", ipAddr(existing.Group), v.Remote)
	case existing.Learning:
		return "learning (on, want off)"
	case existing.FlowBased:
		return "external mode (on, want off)"
	case ipAddr(existing.SrcAddr).IsValid():
		return fmt.Sprintf("local address (%s, want none)", ipAddr(existing.SrcAddr))
	case existing.VtepDevIndex != 0:
		return fmt.Sprintf("underlay device (index %d, want the route's)", existing.VtepDevIndex)
	}
	return ""
}

func createVXLAN(h *netlink.Handle, v VXLAN) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = v.Name
	attrs.MTU = v.MTU
	if v.MAC != nil {
		attrs.HardwareAddr = append(net.HardwareAddr(nil), v.MAC...)
	}
	dev := &netlink.Vxlan{LinkAttrs: attrs, VxlanId: v.VNI, Port: v.Port}
	if v.Remote.IsValid() {
		dev.Group = net.IP(v.Remote.AsSlice())
	}
	if err := h.LinkAdd(dev); err != nil {
		return nil, fmt.Errorf("vxlan %s: create (VNI %d, port %d, remote %s): %w", v.Name, v.VNI, v.Port, v.Remote, err)
	}
	link, err := h.LinkByName(v.Name)
	if err != nil {
		return nil, fmt.Errorf("vxlan %s: look up the new link: %w", v.Name, err)
	}
	if _, ok := link.(*netlink.Vxlan); !ok {
		return nil, fmt.Errorf("vxlan %s: the new link has type %s", v.Name, link.Type())
	}
	// No IPv6 link-local address, hence no router solicitations, MLD
	// reports or DAD probes over the overlay; routes through the device
	// work without one. Only possible while the device is down, so right
	// after creation. A namespace without IPv6 has nothing to turn off.
	if err := h.LinkSetIP6AddrGenMode(link, nl.IN6_ADDR_GEN_MODE_NONE); err != nil && !ipv6Unsupported(err) {
		return nil, fmt.Errorf("vxlan %s: turn off IPv6 address generation: %w", v.Name, err)
	}
	return link, nil
}

// fixVXLAN corrects the mutable attributes of link to v's and brings it up.
func fixVXLAN(h *netlink.Handle, link *netlink.Vxlan, v VXLAN) error {
	attrs := link.Attrs()
	if v.MTU != 0 && attrs.MTU != v.MTU {
		if err := h.LinkSetMTU(link, v.MTU); err != nil {
			return fmt.Errorf("vxlan %s: set MTU %d (was %d): %w", v.Name, v.MTU, attrs.MTU, err)
		}
	}
	if v.MAC != nil && !equalMAC(attrs.HardwareAddr, v.MAC) {
		if err := setMAC(h, link, v.MAC); err != nil {
			return fmt.Errorf("vxlan %s: set MAC address %s (was %s): %w", v.Name, v.MAC, attrs.HardwareAddr, err)
		}
	}
	if err := syncAddress(h, link, v.Address); err != nil {
		return fmt.Errorf("vxlan %s: %w", v.Name, err)
	}
	if attrs.Flags&net.FlagMulticast != 0 {
		if err := h.LinkSetMulticastOff(link); err != nil {
			return fmt.Errorf("vxlan %s: turn multicast off: %w", v.Name, err)
		}
	}
	if attrs.Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(link); err != nil {
			return fmt.Errorf("vxlan %s: bring it up: %w", v.Name, err)
		}
	}
	return nil
}

// setMAC changes a link's MAC address, taking it down for the change if
// the driver refuses to change it live.
func setMAC(h *netlink.Handle, link netlink.Link, mac net.HardwareAddr) error {
	err := h.LinkSetHardwareAddr(link, mac)
	if !errors.Is(err, unix.EBUSY) {
		return err
	}
	if err := h.LinkSetDown(link); err != nil {
		return fmt.Errorf("take it down: %w", err)
	}
	if err := h.LinkSetHardwareAddr(link, mac); err != nil {
		return err
	}
	return h.LinkSetUp(link)
}

// syncAddress makes want the link's only address (none when want is zero),
// leaving IPv6 link-local addresses alone.
func syncAddress(h *netlink.Handle, link netlink.Link, want netip.Prefix) error {
	addrs, err := dump(func() ([]netlink.Addr, error) { return h.AddrList(link, netlink.FAMILY_ALL) })
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	have := false
	for _, a := range addrs {
		p := ipNetPrefix(a.IPNet)
		if p == want {
			have = true
			continue
		}
		if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if err := h.AddrDel(link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete address %s: %w", p, err)
		}
	}
	if want.IsValid() && !have {
		addr := &netlink.Addr{IPNet: prefixIPNet(want)}
		if err := h.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("add address %s: %w", want, err)
		}
	}
	return nil
}

// SetNeighbor installs a permanent neighbour entry ip → mac on link in ns,
// replacing whatever entry ip had there; the overlay uses it for
// GatewayOverlayIP → GatewayMAC, so that nodes never ARP over it.
func SetNeighbor(ns *netns.Namespace, link string, ip netip.Addr, mac net.HardwareAddr) error {
	if err := validLinkName(link); err != nil {
		return fmt.Errorf("neighbour %s: %w", ip, err)
	}
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() {
		return fmt.Errorf("neighbour %s on %s: not a unicast address", ip, link)
	}
	if len(mac) != 6 || mac[0]&1 != 0 || isZero(mac) {
		return fmt.Errorf("neighbour %s on %s: MAC address %s is not a unicast Ethernet address", ip, link, mac)
	}
	ip = ip.WithZone("").Unmap()
	return withHandle(ns, func(h *netlink.Handle) error {
		l, err := h.LinkByName(link)
		if err != nil {
			return fmt.Errorf("neighbour %s on %s: look up the link: %w", ip, link, err)
		}
		family := netlink.FAMILY_V4
		if ip.Is6() {
			family = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{
			LinkIndex:    l.Attrs().Index,
			Family:       family,
			State:        netlink.NUD_PERMANENT,
			Type:         unix.RTN_UNICAST,
			IP:           net.IP(ip.AsSlice()),
			HardwareAddr: append(net.HardwareAddr(nil), mac...),
		}
		if err := h.NeighSet(n); err != nil {
			return fmt.Errorf("neighbour %s lladdr %s on %s: %w", ip, mac, link, err)
		}
		return nil
	})
}

// withHandle runs f with a netlink handle whose sockets live in ns.
func withHandle(ns *netns.Namespace, f func(h *netlink.Handle) error) error {
	if ns == nil {
		return errors.New("no network namespace given")
	}
	h, err := ns.NetlinkHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	return f(h)
}

// dump retries a netlink dump that the kernel interrupted because what it
// listed changed meanwhile, so that no caller decides on a partial list.
func dump[T any](f func() ([]T, error)) ([]T, error) {
	for range 5 {
		res, err := f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return res, err
		}
	}
	return nil, fmt.Errorf("%w five times in a row", netlink.ErrDumpInterrupted)
}

func validLinkName(name string) error {
	switch {
	case name == "":
		return errors.New("no link name")
	case len(name) > unix.IFNAMSIZ-1:
		return fmt.Errorf("link name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	case name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\x00"):
		return fmt.Errorf("link name %q is not a valid interface name", name)
	}
	return nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

func ipv6Unsupported(err error) bool {
	return errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP)
}

// ipAddr converts a netlink IP, nil or unspecified meaning none, to an
// unmapped netip.Addr.
func ipAddr(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok || a.IsUnspecified() {
		return netip.Addr{}
	}
	return a.Unmap()
}

func ipNetPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, bits := n.Mask.Size()
	a = a.Unmap()
	if bits == 128 && a.Is4() {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones)
}

func prefixIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func equalMAC(a, b net.HardwareAddr) bool { return string(a) == string(b) }

func isZero(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}
