package nat

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// The lab is three network namespaces in a row, dual-stack:
//
//	client [cr] ---- [rc] router [rs] ---- [sr] server
//
// The router plays ferry's gateway, with rs as the tunnel; the client is a
// local pod, the server a pod of the peer cluster behind the tunnel.
type lab struct {
	client, router, server *netns.Namespace
	// Names of the veth ends: clientEnd (in client) pairs with routerClient
	// (in router), tunnel (in router) pairs with serverEnd (in server).
	clientEnd, routerClient, tunnel, serverEnd string
}

// family is one IP version's address plan in the lab.
type family struct {
	name string

	clientNet netip.Prefix // the client-router link
	routerC   netip.Addr   // the router on it
	client    netip.Addr   // the client's main address
	clientB   netip.Addr   // another client address inside the mapped half
	outside   netip.Addr   // a client address outside the mapped half

	tunnelNet netip.Prefix // the router-server link: the peer's addresses
	routerS   netip.Addr   // the router on it
	server    netip.Addr   // the server

	stranger    netip.Addr   // a server address outside the peer's addresses
	strangerNet netip.Prefix // routed to the server by the router

	local    netip.Prefix // the mapped local pods: half of clientNet
	remapped netip.Prefix // how the peer sees them
	other    netip.Prefix // another remapping, for ruleset changes
	unused   netip.Prefix // a prefix nobody uses, for a second peer
}

var families = []family{
	{
		name:      "IPv4",
		clientNet: netip.MustParsePrefix("198.18.1.0/24"),
		routerC:   netip.MustParseAddr("198.18.1.1"),
		client:    netip.MustParseAddr("198.18.1.2"),
		clientB:   netip.MustParseAddr("198.18.1.77"),
		outside:   netip.MustParseAddr("198.18.1.200"),

		tunnelNet: netip.MustParsePrefix("198.19.0.0/24"),
		routerS:   netip.MustParseAddr("198.19.0.1"),
		server:    netip.MustParseAddr("198.19.0.2"),

		stranger:    netip.MustParseAddr("198.19.5.2"),
		strangerNet: netip.MustParsePrefix("198.19.5.0/24"),

		local:    netip.MustParsePrefix("198.18.1.0/25"),
		remapped: netip.MustParsePrefix("198.18.201.0/25"),
		other:    netip.MustParsePrefix("198.18.202.0/25"),
		unused:   netip.MustParsePrefix("198.19.7.0/24"),
	},
	{
		name:      "IPv6",
		clientNet: netip.MustParsePrefix("fd18:1::/64"),
		routerC:   netip.MustParseAddr("fd18:1::1"),
		client:    netip.MustParseAddr("fd18:1::2"),
		clientB:   netip.MustParseAddr("fd18:1::77"),
		outside:   netip.MustParseAddr("fd18:1::8000:0:0:c8"),

		tunnelNet: netip.MustParsePrefix("fd19::/64"),
		routerS:   netip.MustParseAddr("fd19::1"),
		server:    netip.MustParseAddr("fd19::2"),

		stranger:    netip.MustParseAddr("fd19:5::2"),
		strangerNet: netip.MustParsePrefix("fd19:5::/64"),

		local:    netip.MustParsePrefix("fd18:1::/65"),
		remapped: netip.MustParsePrefix("fd18:201::/65"),
		other:    netip.MustParsePrefix("fd18:202::/65"),
		unused:   netip.MustParsePrefix("fd19:7::/64"),
	},
}

// labMTU sets the MTUs of the lab's links: each veth end can have its own.
type labMTU struct {
	clientEnd, routerClient, tunnel, serverEnd int
}

// newLab builds the lab; everything goes with the test.
func newLab(t *testing.T, mtu labMTU) *lab {
	t.Helper()
	prefix := randomPrefix(t)
	l := &lab{
		client: netlab.Namespace(t, "client"),
		router: netlab.Namespace(t, "router"),
		server: netlab.Namespace(t, "server"),

		clientEnd:    prefix + "cr",
		routerClient: prefix + "rc",
		tunnel:       prefix + "rs",
		serverEnd:    prefix + "sr",
	}
	for _, ns := range []*netns.Namespace{l.client, l.router, l.server} {
		// Addresses are usable at once, without duplicate detection.
		sysctl(t, ns, "net/ipv6/conf/all/accept_dad", "0")
		sysctl(t, ns, "net/ipv6/conf/default/accept_dad", "0")
	}
	sysctl(t, l.router, "net/ipv4/ip_forward", "1")
	sysctl(t, l.router, "net/ipv6/conf/all/forwarding", "1")

	addVeth(t, l.router, l.routerClient, mtu.routerClient, l.client, l.clientEnd, mtu.clientEnd)
	addVeth(t, l.router, l.tunnel, mtu.tunnel, l.server, l.serverEnd, mtu.serverEnd)

	for _, f := range families {
		bits := f.clientNet.Bits()
		addAddr(t, l.client, l.clientEnd, netip.PrefixFrom(f.client, bits))
		addAddr(t, l.client, l.clientEnd, netip.PrefixFrom(f.clientB, f.clientB.BitLen()))
		addAddr(t, l.client, l.clientEnd, netip.PrefixFrom(f.outside, f.outside.BitLen()))
		addAddr(t, l.router, l.routerClient, netip.PrefixFrom(f.routerC, bits))

		bits = f.tunnelNet.Bits()
		addAddr(t, l.router, l.tunnel, netip.PrefixFrom(f.routerS, bits))
		addAddr(t, l.server, l.serverEnd, netip.PrefixFrom(f.server, bits))
		addAddr(t, l.server, l.serverEnd, netip.PrefixFrom(f.stranger, f.stranger.BitLen()))
	}
	for _, f := range families {
		everywhere := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if f.client.Is4() {
			everywhere = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		addRoute(t, l.client, l.clientEnd, everywhere, f.routerC)
		addRoute(t, l.server, l.serverEnd, everywhere, f.routerS)
		addRoute(t, l.router, l.tunnel, f.strangerNet, f.server)
	}
	return l
}

// randomPrefix returns a short prefix for this lab's link names.
func randomPrefix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "n" + hex.EncodeToString(b)
}

// linkHandle returns a netlink handle in ns, closed with the test.
func linkHandle(t *testing.T, ns *netns.Namespace) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle())
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", ns, err)
	}
	t.Cleanup(h.Close)
	return h
}

// sysctl writes value to /proc/sys/key from inside ns.
func sysctl(t *testing.T, ns *netns.Namespace, key, value string) {
	t.Helper()
	err := ns.Do(func() error {
		return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
	})
	if err != nil {
		t.Fatalf("%s: sysctl %s=%s: %v", ns, key, value, err)
	}
}

// addVeth creates the veth pair name (in ns, up) and peerName (in peerNS,
// up), deleted with the test.
func addVeth(t *testing.T, ns *netns.Namespace, name string, mtu int, peerNS *netns.Namespace, peerName string, peerMTU int) {
	t.Helper()
	h := linkHandle(t, ns)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MTU: mtu},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(peerNS.Fd()),
		PeerMTU:       uint32(max(peerMTU, 0)),
	}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("%s: add veth %s/%s: %v", ns, name, peerName, err)
	}
	t.Cleanup(func() {
		// Deleting one end deletes the pair.
		if link, err := h.LinkByName(name); err == nil {
			if err := h.LinkDel(link); err != nil {
				t.Errorf("%s: delete veth %s: %v", ns, name, err)
			}
		}
	})
	for _, end := range []struct {
		ns   *netns.Namespace
		name string
	}{{ns, name}, {peerNS, peerName}} {
		eh := linkHandle(t, end.ns)
		link, err := eh.LinkByName(end.name)
		if err == nil {
			err = eh.LinkSetUp(link)
		}
		if err != nil {
			t.Fatalf("%s: bring up %s: %v", end.ns, end.name, err)
		}
	}
}

func addAddr(t *testing.T, ns *netns.Namespace, dev string, p netip.Prefix) {
	t.Helper()
	h := linkHandle(t, ns)
	link, err := h.LinkByName(dev)
	if err != nil {
		t.Fatalf("%s: %v", ns, err)
	}
	addr := &netlink.Addr{IPNet: ipNet(p), Flags: unix.IFA_F_NODAD}
	if err := h.AddrAdd(link, addr); err != nil {
		t.Fatalf("%s: add %s to %s: %v", ns, p, dev, err)
	}
}

func addRoute(t *testing.T, ns *netns.Namespace, dev string, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	h := linkHandle(t, ns)
	link, err := h.LinkByName(dev)
	if err != nil {
		t.Fatalf("%s: %v", ns, err)
	}
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst), Gw: net.IP(gw.AsSlice())}
	if err := h.RouteAdd(route); err != nil {
		t.Fatalf("%s: route %s via %s dev %s: %v", ns, dst, gw, dev, err)
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// seen is what one end of a TCP connection saw.
type seen struct {
	Local, Remote netip.Addr
	// MSS is the accepting end's TCP_MAXSEG.
	MSS int
}

// listen starts a TCP server in ns on the unspecified address of a's
// family: for each connection, it sends back what it saw. It returns the
// port and what the accepted connections saw.
func listen(t *testing.T, ns *netns.Namespace, a netip.Addr) (uint16, <-chan seen) {
	t.Helper()
	network := "tcp6"
	if a.Is4() {
		network = "tcp4"
	}
	var ln net.Listener
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen(network, net.JoinHostPort(a.String(), "0"))
		return err
	})
	if err != nil {
		t.Fatalf("%s: listen: %v", ns, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan seen, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s := seenBy(c.(*net.TCPConn))
			select {
			case accepted <- s:
			default: // nobody is looking
			}
			_, _ = fmt.Fprintf(c, "%s %s\n", s.Local, s.Remote)
			_ = c.Close()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), accepted
}

func seenBy(c *net.TCPConn) seen {
	s := seen{
		Local:  c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(),
		Remote: c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(),
	}
	if raw, err := c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			s.MSS, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
		})
	}
	return s
}

// dial connects from ns, from local, to remote and returns what the
// server said it saw, proving that its reply came back.
func dial(ns *netns.Namespace, local netip.Addr, remote netip.AddrPort, timeout time.Duration) (seen, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))}
		var err error
		c, err = d.DialContext(context.Background(), "tcp", remote.String())
		return err
	})
	if err != nil {
		return seen{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return seen{}, fmt.Errorf("read the server's answer: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return seen{}, fmt.Errorf("bad answer %q", line)
	}
	var s seen
	if s.Local, err = netip.ParseAddr(fields[0]); err == nil {
		s.Remote, err = netip.ParseAddr(fields[1])
	}
	return s, err
}

// mustDial is dial that fails the test, checking what the server saw.
func mustDial(t *testing.T, ns *netns.Namespace, local netip.Addr, remote netip.AddrPort, wantLocal, wantRemote netip.Addr) {
	t.Helper()
	s, err := dial(ns, local, remote, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: connect from %s to %s: %v", ns, local, remote, err)
	}
	if s.Local != wantLocal || s.Remote != wantRemote {
		t.Errorf("connect from %s to %s: the server saw %s -> %s, want %s -> %s",
			local, remote, s.Remote, s.Local, wantRemote, wantLocal)
	}
}

// mustNotConnect checks that a connection from local to remote fails.
func mustNotConnect(t *testing.T, ns *netns.Namespace, local netip.Addr, remote netip.AddrPort) {
	t.Helper()
	s, err := dial(ns, local, remote, 1500*time.Millisecond)
	if err == nil {
		t.Errorf("connect from %s to %s succeeded (the server saw %s -> %s), want a failure", local, remote, s.Remote, s.Local)
		return
	}
	t.Logf("connect from %s to %s fails as it should: %v", local, remote, err)
}
