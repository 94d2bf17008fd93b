package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/fabric/overlay"
	"github.com/ferry-io/ferry/test/netlab"
)

// udpPort is where the filter test's listeners receive.
const udpPort = 9999

// inbox collects the UDP payloads a listener in a namespace received.
type inbox struct {
	mu  sync.Mutex
	got []string
	new chan struct{}
}

// listenUDP receives on 0.0.0.0:udpPort in ns until the test ends.
func listenUDP(t *testing.T, ns *netns.Namespace) *inbox {
	t.Helper()
	var conn *net.UDPConn
	if err := ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: udpPort})
		return err
	}); err != nil {
		t.Fatalf("listen on UDP %d in %s: %v", udpPort, ns, err)
	}
	in := &inbox{new: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			in.mu.Lock()
			in.got = append(in.got, string(buf[:n]))
			in.mu.Unlock()
			select {
			case in.new <- struct{}{}:
			default:
			}
		}
	}()
	return in
}

// count says how many payloads starting with prefix arrived.
func (in *inbox) count(prefix string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, s := range in.got {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// sendUDP sends payload from ns to dst, from the address src unless it is
// invalid (then the kernel picks it).
func sendUDP(ns *netns.Namespace, src netip.Addr, dst netip.AddrPort, payload string) error {
	return ns.Do(func() error {
		var laddr *net.UDPAddr
		if src.IsValid() {
			laddr = &net.UDPAddr{IP: src.AsSlice()}
		}
		conn, err := net.DialUDP("udp4", laddr, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte(payload))
		return err
	})
}

// deliver sends from ns to dst until in receives it: the path works.
func deliver(t *testing.T, what string, ns *netns.Namespace, dst netip.AddrPort, in *inbox) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		payload := fmt.Sprintf("%s %d", what, i)
		if err := sendUDP(ns, netip.Addr{}, dst, payload); err != nil {
			t.Fatalf("%s: send to %s: %v", what, dst, err)
		}
		select {
		case <-in.new:
		case <-time.After(200 * time.Millisecond):
		}
		if in.count(payload) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: nothing arrived at %s", what, dst)
		}
	}
}

// sendMany sends n payloads "<what> <i>", each of size bytes, from src
// in ns to dst.
func sendMany(t *testing.T, what string, ns *netns.Namespace, src netip.Addr, dst netip.AddrPort, n, size int) {
	t.Helper()
	for i := range n {
		payload := fmt.Sprintf("%s %d ", what, i)
		payload += strings.Repeat("x", max(0, size-len(payload)))
		if err := sendUDP(ns, src, dst, payload); err != nil {
			t.Fatalf("%s: send from %s to %s: %v", what, src, dst, err)
		}
	}
}

// addLocalAddr gives ns's loopback the address a/32, so that a socket
// there can send from it.
func addLocalAddr(t *testing.T, ns *netns.Namespace, a netip.Addr) {
	t.Helper()
	if err := ns.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: ipNetOf(netip.PrefixFrom(a, 32))})
	}); err != nil {
		t.Fatalf("address %s in %s: %v", a, ns, err)
	}
}

// addRoute routes dst in ns by link, via gw (onlink) if valid.
func addRoute(t *testing.T, ns *netns.Namespace, dst netip.Prefix, link string, gw netip.Addr) {
	t.Helper()
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNetOf(dst), Scope: netlink.SCOPE_LINK}
		if gw.IsValid() {
			r.Gw, r.Scope, r.Flags = gw.AsSlice(), netlink.SCOPE_UNIVERSE, int(netlink.FLAG_ONLINK)
		}
		return netlink.RouteAdd(r)
	}); err != nil {
		t.Fatalf("route %s by %s in %s: %v", dst, link, ns, err)
	}
}

func ipNetOf(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// allowAlso adds extra to the allowed IPs of the gateway dp's tunnel peer
// key, as a hand-made change (wg set ... allowed-ips) would: WireGuard then
// lets through what only the forward filter stops.
func allowAlso(t *testing.T, dp *DataPlane, peer wgtypes.Key, extra netip.Prefix) {
	t.Helper()
	dp.mu.Lock()
	defer dp.mu.Unlock()
	err := dp.dev.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{{
		PublicKey: peer, UpdateOnly: true, AllowedIPs: []net.IPNet{*ipNetOf(extra)},
	}}})
	if err != nil {
		t.Fatalf("allow %s from peer %s: %v", extra, peer, err)
	}
}

// eventually polls cond for up to 30 s; it fails the test with the last
// explanation cond gave.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var why string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
	}
	t.Fatalf("%s: %s", what, why)
}

// TestForwardFilterDropsWhatDidNotComeThroughATunnel checks that a gateway
// forwards into its cluster only what a peer sends through the tunnel, and
// out of it only its pods' traffic to a peer: an outsider on the gateway's
// WAN that routes the pod CIDR via the gateway, a pod's packet the gateway
// would forward to that outsider, a peer sending from outside its range
// (dropped by WireGuard's allowed IPs, and by the filter when those are
// widened by hand) and a peer sending to anything but this cluster's pods
// are all dropped and counted, while pod-to-pod traffic through the tunnel
// still flows both ways.
func TestForwardFilterDropsWhatDidNotComeThroughATunnel(t *testing.T) {
	netlab.Require(t)
	p := newPair(t)
	homePod, euPod, ip := p.pods(t)
	homeGW, euGW := p.home.Gateways()[0], p.eu.Gateways()[0]
	home := p.gws["home"]
	outsider, err := p.home.AddOutsider("outsider")
	if err != nil {
		t.Fatal(err)
	}
	if err := outsider.RouteVia(netip.MustParsePrefix("10.244.0.0/16"), homeGW.WANIP); err != nil {
		t.Fatal(err)
	}
	homeIn, euIn, outIn := listenUDP(t, homePod.NS), listenUDP(t, euPod.NS), listenUDP(t, outsider.NS)
	homePodAtEu := netip.AddrPortFrom(seen(ip, p.euSeesHome), udpPort)
	euPodAtHome := netip.AddrPortFrom(seen(ip, p.homeSeesEu), udpPort)

	legitimate := func(t *testing.T) {
		t.Helper()
		deliver(t, "home to eu", homePod.NS, euPodAtHome, euIn)
		deliver(t, "eu to home", euPod.NS, homePodAtEu, homeIn)
	}
	legitimate(t)

	dropped := func() uint64 {
		t.Helper()
		d, err := home.ForwardDropped()
		if err != nil {
			t.Fatalf("read the forward filter's counter: %v", err)
		}
		return d.Packets
	}
	// expectDropped sends n packets with send and waits until home's
	// filter has counted them; then none may have arrived at in.
	expectDropped := func(t *testing.T, what string, in *inbox, send func(what string, n int)) {
		t.Helper()
		const n = 5
		before := dropped()
		send(what, n)
		eventually(t, what, func() (bool, string) {
			got := dropped() - before
			return got >= n, fmt.Sprintf("home's gateway counted %d of %d packets dropped; %d arrived", got, n, in.count(what))
		})
		if got := in.count(what); got > 0 {
			t.Errorf("%s: %d of %d packets arrived", what, got, n)
		}
	}

	t.Run("OutsiderToPod", func(t *testing.T) {
		expectDropped(t, "outsider to pod", homeIn, func(what string, n int) {
			sendMany(t, what, outsider.NS, netip.Addr{}, netip.AddrPortFrom(homePod.IP, udpPort), n, 64)
		})
	})

	t.Run("PodToOutsider", func(t *testing.T) {
		// home's node routes the outsider's address to the gateway, as it
		// does a peer's range: the gateway must not forward it out.
		addRoute(t, homePod.Node.NS, netip.PrefixFrom(outsider.IP, 32), Links{Prefix: ferryPrefix(p.lab)}.VXLAN(), overlay.GatewayOverlayIP)
		expectDropped(t, "pod to outsider", outIn, func(what string, n int) {
			sendMany(t, what, homePod.NS, netip.Addr{}, netip.AddrPortFrom(outsider.IP, udpPort), n, 64)
		})
	})

	t.Run("PeerToOutsider", func(t *testing.T) {
		// eu's gateway sends to the outsider through the tunnel, from an
		// address of its range at home: the home gateway must not forward
		// it out of the tunnel to anything but its pods.
		from := seen(netip.MustParseAddr("10.244.9.9"), p.homeSeesEu)
		addLocalAddr(t, euGW.NS, from)
		addRoute(t, euGW.NS, netip.PrefixFrom(outsider.IP, 32), p.gws["eu"].Tunnel(), netip.Addr{})
		allowAlso(t, p.gws["eu"], p.keys["home"].PublicKey(), netip.PrefixFrom(outsider.IP, 32))
		expectDropped(t, "eu to outsider", outIn, func(what string, n int) {
			sendMany(t, what, euGW.NS, from, netip.AddrPortFrom(outsider.IP, udpPort), n, 64)
		})
	})

	t.Run("PeerFromOutsideItsRange", func(t *testing.T) {
		// eu's gateway, with its valid key, sends to home's pod from an
		// address outside eu's range at home.
		spoofed := netip.MustParseAddr("10.99.0.1")
		addLocalAddr(t, euGW.NS, spoofed)
		const n, size = 5, 1000
		wgReceived := func() int64 {
			t.Helper()
			dev, err := home.Device()
			if err != nil || dev == nil || len(dev.Peers) != 1 {
				t.Fatalf("home's tunnel: %+v, %v", dev, err)
			}
			return dev.Peers[0].ReceiveBytes
		}

		// First WireGuard drops it: its allowed IPs bind eu's key to eu's
		// range. The packets reach home's WireGuard (it counts their bytes
		// as received from eu), but neither the pod nor the filter.
		before, wgBefore := dropped(), wgReceived()
		sendMany(t, "spoofed, WireGuard", euGW.NS, spoofed, homePodAtEu, n, size)
		eventually(t, "the spoofed packets reach home's WireGuard", func() (bool, string) {
			got := wgReceived() - wgBefore
			return got >= n*size, fmt.Sprintf("home's WireGuard received %d bytes from eu, want at least %d", got, n*size)
		})
		// WireGuard hands a peer's packets over in order: once a later
		// packet of eu's arrives, the spoofed ones are done with.
		deliver(t, "eu to home, after the spoofed ones", euPod.NS, homePodAtEu, homeIn)
		if got := homeIn.count("spoofed"); got > 0 {
			t.Errorf("%d spoofed packets arrived", got)
		}
		if got := dropped() - before; got != 0 {
			t.Errorf("the filter counted %d packets: WireGuard should have dropped them before", got)
		}

		// With eu's key allowed that source by hand, the filter drops it.
		allowAlso(t, home, p.keys["eu"].PublicKey(), netip.PrefixFrom(spoofed, 32))
		expectDropped(t, "spoofed, filter", homeIn, func(what string, n int) {
			sendMany(t, what, euGW.NS, spoofed, homePodAtEu, n, size)
		})
	})

	t.Run("TunnelStillWorks", legitimate)

	t.Run("Metric", func(t *testing.T) {
		want := float64(dropped())
		r := &Reconciler{Settings: Settings{DataPlane: home}, Now: time.Now}
		got, err := gatherOne(newCollector(r), "ferry_gateway_forward_dropped_packets_total")
		if err != nil {
			t.Fatal(err)
		}
		// Nothing is dropped meanwhile: nothing is being sent.
		if want < 20 || got != want {
			t.Errorf("ferry_gateway_forward_dropped_packets_total %v, want the counter's %v (at least 20)", got, want)
		}
	})
}

// gatherOne collects c and returns the value of the metric name.
func gatherOne(c *collector, name string) (float64, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return 0, err
	}
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue(), nil
		}
	}
	return 0, errors.New("no metric " + name)
}
