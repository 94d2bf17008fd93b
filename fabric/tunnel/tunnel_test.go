package tunnel

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// top is the test process's own network namespace (netlab's), where no
// tunnel socket may appear.
var top vnetns.NsHandle = -1

func TestMain(m *testing.M) {
	if h, err := vnetns.Get(); err == nil {
		top = h
	}
	netlab.Main(m)
}

// prefix makes this run's link and socket names unique: the UAPI sockets
// live in the host's /var/run/wireguard.
var prefix = func() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return "ft" + hex.EncodeToString(b)
}()

func nlHandle(t testing.TB, ns *netns.Namespace) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle(), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", ns, err)
	}
	t.Cleanup(h.Close)
	return h
}

// gateway is one end of a test tunnel.
type gateway struct {
	name  string // of the tunnel link
	ns    *netns.Namespace
	dev   *Device
	key   wgtypes.Key
	port  int
	outer netip.Addr // on the veth
	inner netip.Addr // on the tunnel
}

func (g *gateway) endpoint() *net.UDPAddr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.outer, uint16(g.port)))
}

func (g *gateway) peerConfig() wgtypes.PeerConfig {
	return wgtypes.PeerConfig{
		PublicKey:         g.key.PublicKey(),
		Endpoint:          g.endpoint(),
		AllowedIPs:        []net.IPNet{*prefixNet(netip.PrefixFrom(g.inner, 32))},
		ReplaceAllowedIPs: true,
	}
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// pair makes two gateway namespaces joined by a veth pair and opens a
// userspace tunnel device in each, not yet configured: name+"a" and
// name+"b" (userspace devices of the same name would share a UAPI socket).
func pair(t testing.TB, name string) (a, b *gateway) {
	return pairOf(t, name, true)
}

func pairOf(t testing.TB, name string, userspace bool) (a, b *gateway) {
	t.Helper()
	a, b = linkedGateways(t, name)
	for _, g := range []*gateway{a, b} {
		g.dev = openDeviceWith(t, g.ns, Options{Name: g.name, MTU: 1500 - Overhead, ForceUserspace: userspace, Logger: testLogger(t)})
		addInner(t, g)
	}
	return a, b
}

// linkedGateways makes two gateway namespaces joined by a veth pair, and
// their keys.
func linkedGateways(t testing.TB, name string) (a, b *gateway) {
	t.Helper()
	a = &gateway{name: name + "a", ns: netlab.Namespace(t, "gw-a"), port: 51820,
		outer: netip.MustParseAddr("198.18.0.1"), inner: netip.MustParseAddr("198.19.0.1")}
	b = &gateway{name: name + "b", ns: netlab.Namespace(t, "gw-b"), port: 51821,
		outer: netip.MustParseAddr("198.18.0.2"), inner: netip.MustParseAddr("198.19.0.2")}

	nlA, nlB := nlHandle(t, a.ns), nlHandle(t, b.ns)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: prefix + "va", MTU: 1500},
		PeerName:      prefix + "vb",
		PeerNamespace: netlink.NsFd(b.ns.Fd()),
	}
	if err := nlA.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	for _, s := range []struct {
		nl   *netlink.Handle
		name string
		addr netip.Addr
	}{{nlA, prefix + "va", a.outer}, {nlB, prefix + "vb", b.outer}} {
		link, err := s.nl.LinkByName(s.name)
		if err != nil {
			t.Fatalf("veth %s: %v", s.name, err)
		}
		if err := s.nl.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(s.addr, 24))}); err != nil {
			t.Fatalf("address on %s: %v", s.name, err)
		}
		if err := s.nl.LinkSetUp(link); err != nil {
			t.Fatalf("veth %s up: %v", s.name, err)
		}
	}

	for _, g := range []*gateway{a, b} {
		var err error
		g.key, err = wgtypes.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// addInner puts g's inner address on its tunnel link; the inner addresses
// share a /24 routed through the tunnel.
func addInner(t testing.TB, g *gateway) {
	t.Helper()
	nl := nlHandle(t, g.ns)
	link, err := nl.LinkByName(g.name)
	if err != nil {
		t.Fatalf("tunnel link: %v", err)
	}
	if err := nl.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(g.inner, 24))}); err != nil {
		t.Fatalf("address on the tunnel: %v", err)
	}
}

func testLogger(t testing.TB) logr.Logger {
	if os.Getenv("FERRY_TUNNEL_DEBUG") == "" {
		return logr.Discard()
	}
	return testr.NewWithInterface(t, testr.Options{Verbosity: 1, LogTimestamp: true})
}

func openDevice(t testing.TB, ns *netns.Namespace, name string) *Device {
	t.Helper()
	return openDeviceWith(t, ns, Options{Name: name, MTU: 1500 - Overhead, ForceUserspace: true})
}

func openDeviceWith(t testing.TB, ns *netns.Namespace, opts Options) *Device {
	t.Helper()
	d, err := Open(ns, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// connect configures a and b as each other's only peer.
func connect(t testing.TB, a, b *gateway) {
	t.Helper()
	for _, s := range [][2]*gateway{{a, b}, {b, a}} {
		me, other := s[0], s[1]
		err := me.dev.Configure(wgtypes.Config{
			PrivateKey:   &me.key,
			ListenPort:   &me.port,
			ReplacePeers: true,
			Peers:        []wgtypes.PeerConfig{other.peerConfig()},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// listen starts a TCP echo server on g's inner address.
func listen(t testing.TB, g *gateway) net.Addr {
	t.Helper()
	var ln net.Listener
	err := g.ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(g.inner.String(), "0"))
		return err
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr()
}

// dial opens a TCP connection from g's namespace.
func dial(t testing.TB, g *gateway, addr net.Addr) net.Conn {
	t.Helper()
	var c net.Conn
	err := g.ns.Do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 15 * time.Second}).Dial("tcp4", addr.String())
		return err
	})
	if err != nil {
		t.Fatalf("dial %s through the tunnel: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo sends n random bytes through c and checks they come back.
func echo(t testing.TB, c net.Conn, n int) {
	t.Helper()
	out := make([]byte, n)
	_, _ = rand.Read(out)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(out)
		werr <- err
	}()
	in := make([]byte, n)
	if _, err := io.ReadFull(c, in); err != nil {
		t.Fatalf("read the echo: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("the echo differs from what was sent")
	}
}

// onlyPeer reads d's state and returns its one peer.
func onlyPeer(t testing.TB, d *Device) (*wgtypes.Device, wgtypes.Peer) {
	t.Helper()
	dev, err := d.Device()
	if err != nil {
		t.Fatal(err)
	}
	if len(dev.Peers) != 1 {
		t.Fatalf("%s has %d peers, want 1", d.Name(), len(dev.Peers))
	}
	return dev, dev.Peers[0]
}

func TestTunnelCarriesTCP(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wg"
	a, b := pair(t, name)
	connect(t, a, b)
	for _, g := range []*gateway{a, b} {
		if g.dev.Kind() != KindUserspace || g.dev.Name() != g.name {
			t.Fatalf("Kind, Name = %q, %q; want %q, %q", g.dev.Kind(), g.dev.Name(), KindUserspace, g.name)
		}
		link, err := nlHandle(t, g.ns).LinkByName(g.name)
		if err != nil {
			t.Fatal(err)
		}
		if link.Attrs().MTU != 1500-Overhead || link.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("link MTU %d, flags %v; want MTU %d, up", link.Attrs().MTU, link.Attrs().Flags, 1500-Overhead)
		}
	}
	for _, g := range []*gateway{a, b} {
		if _, err := netlink.LinkByName(g.name); err == nil {
			t.Fatalf("link %s is in the test's own namespace", g.name)
		}
	}

	c := dial(t, a, listen(t, b))
	echo(t, c, 1<<20)

	for _, s := range [][2]*gateway{{a, b}, {b, a}} {
		me, other := s[0], s[1]
		dev, p := onlyPeer(t, me.dev)
		if dev.PublicKey != me.key.PublicKey() || dev.ListenPort != me.port || dev.Type != wgtypes.Userspace {
			t.Errorf("%s: public key, port, type = %v, %d, %v", me.ns, dev.PublicKey, dev.ListenPort, dev.Type)
		}
		if p.PublicKey != other.key.PublicKey() {
			t.Errorf("%s: peer %v, want %v", me.ns, p.PublicKey, other.key.PublicKey())
		}
		if p.LastHandshakeTime.IsZero() || p.ReceiveBytes < 1<<20 || p.TransmitBytes < 1<<20 {
			t.Errorf("%s: last handshake %v, received %d, sent %d; want a handshake and > 1 MiB each way",
				me.ns, p.LastHandshakeTime, p.ReceiveBytes, p.TransmitBytes)
		}
		if p.Endpoint == nil || p.Endpoint.String() != other.endpoint().String() {
			t.Errorf("%s: peer endpoint %v, want %v", me.ns, p.Endpoint, other.endpoint())
		}
		if len(p.AllowedIPs) != 1 || p.AllowedIPs[0].String() != other.inner.String()+"/32" {
			t.Errorf("%s: allowed IPs %v, want %v/32", me.ns, p.AllowedIPs, other.inner)
		}
	}
}

// udpPorts lists the UDP ports bound in the calling thread's namespace.
func udpPorts(t testing.TB) map[int]bool {
	t.Helper()
	ports := map[int]bool{}
	for _, f := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			_, port, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			p, err := strconv.ParseUint(port, 16, 16)
			if err != nil {
				t.Fatalf("%s: %q: %v", f, line, err)
			}
			ports[int(p)] = true
		}
	}
	return ports
}

// checkPortIn checks that port is bound in g's namespace and in neither the
// test's own namespace (where it can be bound again) nor the other's.
func checkPortIn(t testing.TB, g, other *gateway, port int) {
	t.Helper()
	for _, s := range []struct {
		ns   *netns.Namespace
		want bool
	}{{g.ns, true}, {other.ns, false}} {
		var ports map[int]bool
		if err := s.ns.Do(func() error { ports = udpPorts(t); return nil }); err != nil {
			t.Fatal(err)
		}
		if ports[port] != s.want {
			t.Errorf("UDP port %d bound in %s: %v, want %v", port, s.ns, ports[port], s.want)
		}
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if !cur.Equal(top) {
		t.Fatal("this thread is not in the test's own namespace")
	}
	if udpPorts(t)[port] {
		t.Errorf("UDP port %d is bound in the test's own namespace", port)
	}
	for _, network := range []string{"udp4", "udp6"} {
		c, err := net.ListenPacket(network, ":"+strconv.Itoa(port))
		if err != nil {
			t.Errorf("bind %s port %d in the test's own namespace: %v", network, port, err)
			continue
		}
		c.Close()
	}
}

// TestListenPortStaysInNamespace checks that wireguard-go's UDP socket is
// in the tunnel's namespace, also after it is reopened from wireguard-go's
// own goroutines: on a listen-port change (a UAPI handler) and when the
// link goes down and up (the TUN event reader).
func TestListenPortStaysInNamespace(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wp"
	a, b := pair(t, name)
	connect(t, a, b)
	addr := listen(t, b)
	checkPortIn(t, a, b, a.port)
	checkPortIn(t, b, a, b.port)
	echo(t, dial(t, a, addr), 1<<10)

	// Listen-port change.
	old := a.port
	a.port = 40123
	if err := a.dev.Configure(wgtypes.Config{ListenPort: &a.port}); err != nil {
		t.Fatal(err)
	}
	checkPortIn(t, a, b, a.port)
	if err := a.ns.Do(func() error {
		if udpPorts(t)[old] {
			return fmt.Errorf("the old port %d is still bound", old)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if dev, _ := onlyPeer(t, a.dev); dev.ListenPort != a.port {
		t.Errorf("listen port %d, want %d", dev.ListenPort, a.port)
	}

	// Down and up, as wireguard-go's TUN event reader does it, from a
	// thread in the test's own namespace. (That reader does not notice the
	// link going down on this kernel: a zero-length write to a TUN device
	// fails with EINVAL whether it is up or not.)
	// (Not within the same 2^24 ns as the last handshake: B would take
	// A's next initiation, whose timestamp has that granularity, for a
	// replay, and the handshake would wait for a retry 5 s later.)
	time.Sleep(50 * time.Millisecond)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if cur, err := vnetns.Get(); err != nil || !cur.Equal(top) {
			errc <- fmt.Errorf("this thread is not in the test's own namespace (%v)", err)
			return
		}
		if err := a.dev.user.dev.Down(); err != nil {
			errc <- err
			return
		}
		errc <- a.dev.user.dev.Up()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkPortIn(t, a, b, a.port)

	// B learns A's new port from A's next handshake.
	echo(t, dial(t, a, addr), 1<<16)
	if _, p := onlyPeer(t, b.dev); p.Endpoint.Port != a.port {
		t.Errorf("B's endpoint for A is %v, want port %d", p.Endpoint, a.port)
	}
}

// TestMTUChangeReadInNamespace checks that wireguard-go reads its link's
// new MTU in the tunnel's namespace: it looks the link up by name from its
// TUN event reader, whose thread is in the test's own namespace.
func TestMTUChangeReadInNamespace(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wm"
	var (
		mu   sync.Mutex
		logs []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		logs = append(logs, args)
		mu.Unlock()
	}, funcr.Options{Verbosity: 1})
	ns := netlab.Namespace(t, "gw")
	openDeviceWith(t, ns, Options{Name: name, MTU: 1420, ForceUserspace: true, Logger: log})
	nl := nlHandle(t, ns)
	link, err := nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.LinkSetMTU(link, 1300); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "wireguard-go to take the new MTU", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range logs {
			if strings.Contains(l, "Failed to load updated MTU") {
				t.Fatalf("wireguard-go: %s", l)
			}
			if strings.Contains(l, "MTU updated: 1300") {
				return true
			}
		}
		return false
	})
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sockPath(name string) string { return filepath.Join(uapiDir, name+".sock") }

func TestCloseRemovesLinkAndSocket(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wc"
	ns := netlab.Namespace(t, "gw")
	d, err := Open(ns, Options{Name: name, MTU: 1420, ForceUserspace: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
		}
	})
	nl := nlHandle(t, ns)
	if _, err := nl.LinkByName(name); err != nil {
		t.Fatalf("link after Open: %v", err)
	}
	if _, err := os.Lstat(sockPath(name)); err != nil {
		t.Fatalf("UAPI socket after Open: %v", err)
	}
	if _, err := d.Device(); err != nil {
		t.Fatal(err)
	}

	closed = true
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var notFound netlink.LinkNotFoundError
	if _, err := nl.LinkByName(name); !errors.As(err, &notFound) {
		t.Errorf("link after Close: %v, want not found", err)
	}
	if _, err := os.Lstat(sockPath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("UAPI socket after Close: %v, want none", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := d.Configure(wgtypes.Config{}); err == nil {
		t.Error("Configure after Close succeeded")
	}
	if _, err := d.Device(); err == nil {
		t.Error("Device after Close succeeded")
	}

	// The name is free again.
	d2 := openDevice(t, ns, name)
	if _, err := d2.Device(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenOutlivesCallersNamespace checks that the device keeps its own
// reference to the namespace.
func TestOpenOutlivesCallersNamespace(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wn"
	a, b := pair(t, name)
	// Reopen A's device from a reference that is closed at once.
	if err := a.dev.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := vnetns.GetFromPath(fmt.Sprintf("/proc/self/fd/%d", a.ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	ref := netns.FromHandle(h, "gw-a (short-lived reference)")
	a.dev = openDevice(t, ref, a.name)
	ref.Close()
	nl := nlHandle(t, a.ns)
	link, err := nl.LinkByName(a.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(a.inner, 24))}); err != nil {
		t.Fatal(err)
	}
	connect(t, a, b)
	echo(t, dial(t, a, listen(t, b)), 1<<10)
	checkPortIn(t, a, b, a.port)
}

// TestOpenWithExistingLink opens a device where a link of its name is
// already there: a detached persistent TUN device is taken over (and
// deleted on Close), anything else is left alone.
func TestOpenWithExistingLink(t *testing.T) {
	netlab.Require(t)
	t.Run("persistent TUN", func(t *testing.T) {
		name := prefix + "wt"
		ns := netlab.Namespace(t, "gw")
		nl := nlHandle(t, ns)
		tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TUN,
			Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR}
		// netlink makes TUN devices through /dev/net/tun, in the calling
		// thread's namespace, whatever the handle's.
		if err := ns.Do(func() error { return netlink.LinkAdd(tap) }); err != nil {
			t.Fatal(err)
		}
		before, err := nl.LinkByName(name)
		if err != nil || before.(*netlink.Tuntap).NonPersist {
			t.Fatalf("persistent TUN device: %+v, %v", before, err)
		}
		d, err := Open(ns, Options{Name: name, MTU: 1420, ForceUserspace: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Device(); err != nil {
			t.Error(err)
		}
		if after, err := nl.LinkByName(name); err != nil || after.Attrs().Index != before.Attrs().Index {
			t.Fatalf("the device is not on the persistent TUN device: %+v, %v", after, err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		var notFound netlink.LinkNotFoundError
		if _, err := nl.LinkByName(name); !errors.As(err, &notFound) {
			t.Errorf("link after Close: %v, want not found", err)
		}
	})
	t.Run("TUN in use", func(t *testing.T) {
		name := prefix + "wu"
		ns := netlab.Namespace(t, "gw")
		d := openDevice(t, ns, name+"x")
		// Rename the first device's link to the name the second wants: its
		// TUN device is held.
		nl := nlHandle(t, ns)
		link, err := nl.LinkByName(name + "x")
		if err == nil {
			err = nl.LinkSetDown(link)
		}
		if err == nil {
			err = nl.LinkSetName(link, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if d2, err := Open(ns, Options{Name: name, MTU: 1420, ForceUserspace: true}); err == nil {
			d2.Close()
			t.Fatal("Open took over a TUN device in use")
		} else {
			t.Logf("Open: %v", err)
		}
		if _, err := nl.LinkByName(name); err != nil {
			t.Errorf("the TUN device in use after the failed Open: %v", err)
		}
		if _, err := os.Lstat(sockPath(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the failed Open left its UAPI socket: %v", err)
		}
		if _, err := d.Device(); err != nil {
			t.Errorf("the first device after the failed Open: %v", err)
		}
	})
	t.Run("not a tunnel", func(t *testing.T) {
		name := prefix + "wd"
		ns := netlab.Namespace(t, "gw")
		nl := nlHandle(t, ns)
		if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			if d, err := Open(ns, Options{Name: name, MTU: 1420, ForceUserspace: force}); err == nil {
				d.Close()
				t.Fatalf("Open (ForceUserspace %v) took over a veth link", force)
			} else {
				t.Logf("Open: %v", err)
			}
		}
		if link, err := nl.LinkByName(name); err != nil || link.Type() != "veth" {
			t.Errorf("the veth link after the failed Open: %v, %v", link, err)
		}
	})
}

// TestOpenRefusesLiveSocket checks that a second device of the same name
// (in another namespace) does not take over the first one's UAPI socket,
// and leaves nothing behind.
func TestOpenRefusesLiveSocket(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wl"
	first := openDevice(t, netlab.Namespace(t, "gw-1"), name)
	ns2 := netlab.Namespace(t, "gw-2")
	if d, err := Open(ns2, Options{Name: name, MTU: 1420, ForceUserspace: true}); err == nil {
		d.Close()
		t.Fatal("a second device took over the first one's UAPI socket")
	} else {
		t.Logf("second Open: %v", err)
	}
	links, err := nlHandle(t, ns2).LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name == name {
			t.Errorf("the failed Open left link %s behind", name)
		}
	}
	if _, err := first.Device(); err != nil {
		t.Errorf("the first device after the second's failed Open: %v", err)
	}
}

// TestOpenAfterCrash kills a gateway process that has a device open,
// which leaves the UAPI socket behind, and opens the device again.
func TestOpenAfterCrash(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wk"
	crashed := netlab.Namespace(t, "crashed gateway")
	h := startHelper(t, "ferry", crashed, name)
	if _, err := nlHandle(t, crashed).LinkByName(name); err != nil {
		t.Fatalf("the helper's link: %v", err)
	}
	h.kill()
	fi, err := os.Lstat(sockPath(name))
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("the killed helper left no socket (%v): the test proves nothing", err)
	}

	ns := netlab.Namespace(t, "restarted gateway")
	d := openDevice(t, ns, name)
	key, _ := wgtypes.GeneratePrivateKey()
	port := 51999
	if err := d.Configure(wgtypes.Config{PrivateKey: &key, ListenPort: &port}); err != nil {
		t.Fatal(err)
	}
	dev, err := d.Device()
	if err != nil {
		t.Fatal(err)
	}
	if dev.PublicKey != key.PublicKey() || dev.ListenPort != port {
		t.Errorf("after the restart: public key %v, port %d; want %v, %d", dev.PublicKey, dev.ListenPort, key.PublicKey(), port)
	}
}

// TestKeyRotation rotates A's private key while a TCP connection through
// the tunnel is open; once B knows A's new public key, the connection goes
// on.
func TestKeyRotation(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wr"
	a, b := pair(t, name)
	connect(t, a, b)
	c := dial(t, a, listen(t, b))
	echo(t, c, 1<<16)

	// Keep the connection busy while the key changes.
	stop := make(chan struct{})
	errc := make(chan error, 1)
	var echoes atomic.Int64
	go func() {
		buf := make([]byte, 1024)
		in := make([]byte, len(buf))
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			_, _ = rand.Read(buf)
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write(buf); err != nil {
				errc <- fmt.Errorf("write %d: %w", i, err)
				return
			}
			if _, err := io.ReadFull(c, in); err != nil {
				errc <- fmt.Errorf("read %d: %w", i, err)
				return
			}
			if !bytes.Equal(in, buf) {
				errc <- fmt.Errorf("echo %d differs", i)
				return
			}
			echoes.Add(1)
		}
	}()
	time.Sleep(200 * time.Millisecond)

	oldPub := a.key.PublicKey()
	rotated := time.Now()
	newKey, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	a.key = newKey
	if err := a.dev.Configure(wgtypes.Config{PrivateKey: &a.key}); err != nil {
		t.Fatal(err)
	}
	err = b.dev.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{
		{PublicKey: oldPub, Remove: true},
		a.peerConfig(),
	}})
	if err != nil {
		t.Fatal(err)
	}

	waitFor(t, "a handshake with A's new key", func() bool {
		dev, err := b.dev.Device()
		if err != nil || len(dev.Peers) != 1 {
			return false
		}
		p := dev.Peers[0]
		return p.PublicKey == a.key.PublicKey() && p.LastHandshakeTime.After(rotated)
	})
	before := echoes.Load()
	time.Sleep(200 * time.Millisecond)
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("the connection broke with the key rotation: %v", err)
	}
	if n := echoes.Load() - before; n == 0 {
		t.Fatal("no echo on the connection after the handshake with the new key")
	} else {
		t.Logf("%d echoes on the connection after the handshake with the new key", n)
	}
	echo(t, c, 1<<16)

	dev, p := onlyPeer(t, a.dev)
	if dev.PublicKey != a.key.PublicKey() {
		t.Errorf("A's public key %v, want %v", dev.PublicKey, a.key.PublicKey())
	}
	if !p.LastHandshakeTime.After(rotated) {
		t.Errorf("A's last handshake %v is not after the rotation at %v", p.LastHandshakeTime, rotated)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	ns, err := netns.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for _, opts := range []Options{
		{Name: "", MTU: 1420},
		{Name: "a-name-too-long-", MTU: 1420},
		{Name: "a/b", MTU: 1420},
		{Name: "a b", MTU: 1420},
		{Name: "..", MTU: 1420},
		{Name: "ok", MTU: 0},
	} {
		if d, err := Open(ns, opts); err == nil {
			d.Close()
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
	if _, err := Open(nil, Options{Name: "ok", MTU: 1420}); err == nil {
		t.Error("Open with no namespace succeeded")
	}
}

// TestKernelDevice runs the tunnel on kernel WireGuard, where the kernel
// has it, and adopts a kernel link left behind (as after a restart).
func TestKernelDevice(t *testing.T) {
	netlab.Require(t)
	name := prefix + "wx"
	probe := netlab.Namespace(t, "probe")
	d, err := Open(probe, Options{Name: name, MTU: 1420})
	if err != nil {
		t.Fatal(err)
	}
	kind := d.Kind()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	nl := nlHandle(t, probe)
	var notFound netlink.LinkNotFoundError
	if _, err := nl.LinkByName(name); !errors.As(err, &notFound) {
		t.Errorf("%s link after Close: %v, want not found", kind, err)
	}
	if kind != KindKernel {
		t.Skip("the kernel has no WireGuard")
	}

	// Adoption: a link left behind is taken over, with the MTU asked for.
	if err := nl.LinkAdd(&netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1300}}); err != nil {
		t.Fatal(err)
	}
	d = openDeviceWith(t, probe, Options{Name: name, MTU: 1420})
	if d.Kind() != KindKernel {
		t.Fatalf("adopted a kernel link as a %s device", d.Kind())
	}
	link, err := nl.LinkByName(name)
	if err != nil || link.Attrs().MTU != 1420 {
		t.Fatalf("adopted link: %v, %v; want MTU 1420", link, err)
	}
	if _, err := d.Device(); err != nil {
		t.Fatal(err)
	}

	a, b := pairOf(t, name, false)
	connect(t, a, b)
	echo(t, dial(t, a, listen(t, b)), 1<<20)
	for _, g := range []*gateway{a, b} {
		dev, p := onlyPeer(t, g.dev)
		if dev.Type != wgtypes.LinuxKernel || p.LastHandshakeTime.IsZero() || p.ReceiveBytes == 0 || p.TransmitBytes == 0 {
			t.Errorf("%s: type %v, last handshake %v, received %d, sent %d", g.ns, dev.Type, p.LastHandshakeTime, p.ReceiveBytes, p.TransmitBytes)
		}
	}
	checkPortIn(t, a, b, a.port)
}
