package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/nat"
	"github.com/ferry-io/ferry/fabric/overlay"
	"github.com/ferry-io/ferry/fabric/tunnel"
	"github.com/ferry-io/ferry/test/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m) }

// pair is two lab clusters, "home" and "eu", both with pods in
// 10.244.0.0/16, joined by their gateways' data planes and their nodes'
// route agents, driven by plans computed from NetworkConfigs as the
// controllers compute them.
type pair struct {
	lab        *netlab.Lab
	home, eu   *netlab.Cluster
	gws        map[string]*DataPlane
	plans      map[string]Plan
	keys       map[string]wgtypes.Key
	nodes      []*NodePlane
	homeSeesEu netip.Prefix // where home sees eu's pods
	euSeesHome netip.Prefix
}

var labSubnets = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/17"), netip.MustParsePrefix("10.244.128.0/17")}

func newPair(tb testing.TB) *pair {
	tb.Helper()
	lab, err := netlab.New(netlab.Prefix())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = lab.Close() })
	p := &pair{lab: lab, gws: map[string]*DataPlane{}, plans: map[string]Plan{},
		homeSeesEu: netip.MustParsePrefix("10.71.0.0/16"), euSeesHome: netip.MustParsePrefix("10.70.0.0/16")}
	keys := map[string]wgtypes.Key{"home": mustKey(tb), "eu": mustKey(tb)}
	p.keys = keys
	gwPods := map[string]*netlab.Pod{}
	for _, name := range []string{"home", "eu"} {
		c, err := lab.AddCluster(name, labSubnets)
		if err != nil {
			tb.Fatal(err)
		}
		gw, err := c.AddGateway(1, "gw", netip.MustParseAddr("10.244.255.250"))
		if err != nil {
			tb.Fatal(err)
		}
		gwPods[name] = gw
		if name == "home" {
			p.home = c
		} else {
			p.eu = c
		}
	}
	// Each side's NetworkConfigs: its own, and the other's as its IPAM
	// mapped it.
	nc := func(self, other string, seen, atPeer netip.Prefix) (*ferryv1alpha1.NetworkConfig, ferryv1alpha1.NetworkConfig) {
		local, peer := configs(tb, keys[other])
		local.Name, local.Spec.ClusterID = self, ferryv1alpha1.ClusterID(self)
		peer.Name, peer.Spec.ClusterID = other, ferryv1alpha1.ClusterID(other)
		peer.Spec.Gateway.Address = gwPods[other].WANIP.String()
		peer.Status.RemappedPodCIDR, peer.Status.PodCIDRAtPeer = seen.String(), atPeer.String()
		peer.Status.RemappedAPIServerAddress, peer.Status.APIServerAddressAtPeer = "", ""
		return local, peer
	}
	for _, side := range []struct {
		self, other  string
		seen, atPeer netip.Prefix
		cluster      *netlab.Cluster
	}{{"home", "eu", p.homeSeesEu, p.euSeesHome, p.home}, {"eu", "home", p.euSeesHome, p.homeSeesEu, p.eu}} {
		local, peer := nc(side.self, side.other, side.seen, side.atPeer)
		plan, skipped, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{peer}, time.Now())
		if err != nil || len(skipped) > 0 {
			tb.Fatalf("plan of %s: %v %v", side.self, err, skipped)
		}
		// Userspace WireGuard's control socket is named after the link, in
		// one folder for the whole host: one prefix per gateway.
		dp := &DataPlane{NS: gwPods[side.self].NS, Links: Links{Prefix: ferryPrefix(lab) + side.self[:1]}, ListenPort: DefaultListenPort,
			VXLANPort: DefaultVXLANPort, VNI: DefaultVNI, ForceUserspace: true, Log: logr.Discard()}
		tb.Cleanup(func() { _ = dp.Close() })
		applied, err := dp.Apply(plan, keys[side.self])
		if err != nil {
			tb.Fatalf("data plane of %s: %v", side.self, err)
		}
		p.gws[side.self], p.plans[side.self] = dp, plan
		for _, n := range side.cluster.Nodes {
			np := &NodePlane{NS: n.NS, Links: Links{Prefix: ferryPrefix(lab)}, VXLANPort: DefaultVXLANPort, VNI: DefaultVNI}
			tb.Cleanup(func() { _ = np.Close() })
			if err := np.Apply(gwPods[side.self].IP, plan.Ranges(), applied.MTU); err != nil {
				tb.Fatalf("node %s: %v", n, err)
			}
			p.nodes = append(p.nodes, np)
		}
	}
	return p
}

// ferryPrefix starts the names of the links ferry makes in the lab: the
// lab's prefix and an x, which none of the lab's own links has there.
func ferryPrefix(lab *netlab.Lab) string { return lab.Prefix + "x" }

// pods adds a pod to each cluster, both at 10.244.0.10 on node 0 (the
// gateways are on node 1): only the fabric's mapping tells them apart.
func (p *pair) pods(tb testing.TB) (home, eu *netlab.Pod, ip netip.Addr) {
	tb.Helper()
	ip = netip.MustParseAddr("10.244.0.10")
	home, eu = p.podsOn(tb, 0, "client", "server", ip)
	return home, eu, ip
}

// podsOn adds a pod called from to home and one called to to eu, both at
// ip on node n.
func (p *pair) podsOn(tb testing.TB, n int, from, to string, ip netip.Addr) (home, eu *netlab.Pod) {
	tb.Helper()
	home, err := p.home.AddPod(n, from, ip)
	if err != nil {
		tb.Fatal(err)
	}
	if eu, err = p.eu.AddPod(n, to, ip); err != nil {
		tb.Fatal(err)
	}
	return home, eu
}

// seen translates a pod address the way the fabric maps it.
func seen(a netip.Addr, to netip.Prefix) netip.Addr {
	b, t := a.As4(), to.Addr().As4()
	return netip.AddrFrom4([4]byte{t[0], t[1], b[2], b[3]})
}

func TestDataPathJoinsClustersWithOnePodCIDR(t *testing.T) {
	netlab.Require(t)
	p := newPair(t)
	homePod, euPod, ip := p.pods(t)
	for _, pod := range []*netlab.Pod{homePod, euPod} {
		stop, err := pod.ServeInfo(8080)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		from, to *netlab.Pod
		at, as   netip.Addr
	}{
		{homePod, euPod, seen(ip, p.homeSeesEu), seen(ip, p.euSeesHome)},
		{euPod, homePod, seen(ip, p.euSeesHome), seen(ip, p.homeSeesEu)},
	} {
		var got netip.AddrPort
		var err error
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, err = c.from.SeenAs(ctx, netip.AddrPortFrom(c.at, 8080))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s → %s at %s: %v", c.from, c.to, c.at, err)
		}
		if got.Addr() != c.as {
			t.Errorf("%s reached %s at %s seen as %s, want %s", c.from, c.to, c.at, got.Addr(), c.as)
		}
		if err := c.from.Echo(ctx, netip.AddrPortFrom(c.at, 8080), []byte("ping")); err == nil {
			t.Errorf("the info server echoed: the connection reached another server")
		}
	}

	rtt, err := p.gws["home"].Ping(seen(netip.MustParseAddr("10.244.255.250"), p.homeSeesEu), time.Second)
	if err != nil {
		t.Fatalf("probe eu's gateway through the tunnel: %v", err)
	}
	t.Logf("gateway to gateway round trip: %s", rtt)
	counters, err := p.gws["home"].Counters()
	if err != nil || counters["eu"].TxPackets == 0 || counters["eu"].RxPackets == 0 {
		t.Errorf("counters %+v, %v", counters, err)
	}
	dev, err := p.gws["home"].Device()
	if err != nil || len(dev.Peers) != 1 || dev.Peers[0].LastHandshakeTime.IsZero() {
		t.Errorf("tunnel %+v, %v", dev, err)
	}

	// The metrics read the same counters and the tunnel at each scrape.
	r := &Reconciler{Settings: Settings{DataPlane: p.gws["home"]}, Now: time.Now, names: map[string]string{p.keys["eu"].PublicKey().String(): "eu"}}
	r.probes.Store("eu", rtt)
	col := newCollector(r)
	col.setRules(len(p.plans["home"].Peers))
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	gather := func() map[string]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				got[f.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return got
	}
	got := gather()
	for _, name := range []string{"ferry_gateway_peer_sent_packets_total", "ferry_gateway_peer_received_bytes_total",
		"ferry_gateway_peer_tunnel_sent_bytes_total", "ferry_gateway_peer_last_handshake_timestamp_seconds",
		"ferry_gateway_peer_round_trip_seconds", "ferry_gateway_peer_reachable", "ferry_gateway_peer_up", "ferry_gateway_nat_rules"} {
		if got[name] <= 0 {
			t.Errorf("metric %s = %v, want > 0 (all: %v)", name, got[name], got)
		}
	}
	if _, ok := got["ferry_gateway_peer_dropped_packets_total"]; !ok {
		t.Errorf("no ferry_gateway_peer_dropped_packets_total for the peer (all: %v)", got)
	}
	// A failed probe: no round trip, and the peer is not reachable.
	r.probes.Delete("eu")
	r.probeErrs.Store("eu", "no echo reply")
	got = gather()
	if v, ok := got["ferry_gateway_peer_reachable"]; !ok || v != 0 {
		t.Errorf("after a failed probe ferry_gateway_peer_reachable = %v (present %v), want 0", v, ok)
	}
	if _, ok := got["ferry_gateway_peer_round_trip_seconds"]; ok {
		t.Errorf("after a failed probe the round trip is still reported")
	}

	// Unpeering: an empty plan removes every link, route and rule.
	for name, dp := range p.gws {
		if _, err := dp.Apply(Plan{}, mustKey(t)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, np := range p.nodes {
		if err := np.Apply(netip.Addr{}, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*netlab.Cluster{p.home, p.eu} {
		nss := []*netlab.Pod{c.Gateways()[0]}
		for _, n := range c.Nodes {
			inv, err := overlay.List(n.NS, ferryPrefix(p.lab))
			if err != nil || !inv.Empty() {
				t.Errorf("node %s after unpeering: %v %v", n, inv, err)
			}
		}
		for _, gw := range nss {
			inv, err := overlay.List(gw.NS, ferryPrefix(p.lab))
			if err != nil || !inv.Empty() {
				t.Errorf("gateway of %s after unpeering: %v %v", c.Name, inv, err)
			}
			if _, err := nat.ReadCounters(gw.NS, ferryPrefix(p.lab)+c.Name[:1]); err == nil {
				t.Errorf("gateway of %s still has its nftables table", c.Name)
			}
		}
	}
}

func TestDataPathKeepsAFlowThroughAKeyRotation(t *testing.T) {
	netlab.Require(t)
	p := newPair(t)
	homePod, euPod, ip := p.pods(t)
	stop, err := euPod.ServeEcho(8080)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conn net.Conn
	for deadline := time.Now().Add(20 * time.Second); ; {
		if conn, err = homePod.Dial(ctx, netip.AddrPortFrom(seen(ip, p.homeSeesEu), 8080)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip := func(what string) {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := conn.Write([]byte("ping")); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	roundTrip("before the rotation")
	// Both sides switch at once, as at rotateAt: home to its new key, eu
	// to home's new public key.
	newKey := mustKey(t)
	start := time.Now()
	if _, err := p.gws["home"].Apply(p.plans["home"], newKey); err != nil {
		t.Fatal(err)
	}
	euPlan := p.plans["eu"]
	euPlan.Peers = slices.Clone(euPlan.Peers)
	euPlan.Peers[0].PublicKey = newKey.PublicKey()
	if _, err := p.gws["eu"].Apply(euPlan, p.keys["eu"]); err != nil {
		t.Fatal(err)
	}
	roundTrip("after the rotation")
	t.Logf("the flow paused %s over the rotation", time.Since(start))
}

// BenchmarkFabric measures TCP throughput and latency pod to pod through
// ferry's data path (node, VXLAN, gateway, NAT, WireGuard, gateway, node)
// against bare wireguard-go between two namespaces, in one run, on two
// legs: pods on another node than the gateways (the headline: it adds the
// underlay hop from node to gateway node, as most pods have) and pods on
// the gateways' node. The machine is shared, so the legs take turns: five
// rounds, each a 1 s TCP stream and 400 echo round trips per leg, in an
// order that rotates from round to round. It prints each leg and a RESULT
// line with the ratios to bare wireguard-go, of throughput and of bits
// moved per CPU second of the process (cpu_ratio, which other work on the
// machine does not skew).
func BenchmarkFabric(b *testing.B) {
	if !netlab.Isolated() {
		b.Skip("needs root: runs in a network namespace of its own")
	}
	const rounds, trips = 5, 400
	stream := time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newPair(b)
	client, server, ip := p.pods(b)
	gwIP := netip.MustParseAddr("10.244.128.10")
	gwClient, gwServer := p.podsOn(b, 1, "gw-client", "gw-server", gwIP)
	bareA, bareB := bareWireGuard(b, p.lab)
	legs := []*leg{
		{name: "ferry, pods on another node", from: client, to: server, at: seen(ip, p.homeSeesEu)},
		{name: "ferry, pods on the gateways' node", from: gwClient, to: gwServer, at: seen(gwIP, p.homeSeesEu)},
		{name: "bare wireguard-go", from: bareA, to: bareB, at: bareB.IP},
	}
	for _, l := range legs {
		l.serve(ctx, b)
	}
	for range b.N {
		for _, l := range legs {
			l.bps, l.rtts, l.bits, l.cpu = nil, nil, 0, 0
		}
		for r := range rounds {
			for k := range legs {
				legs[(r+k)%len(legs)].round(ctx, b, stream, trips)
			}
		}
		cross, local, bare := legs[0].result(), legs[1].result(), legs[2].result()
		for _, l := range legs {
			r := l.result()
			fmt.Printf("%-34s %5.2f Gbit/s (rounds %s)  p50 %4d µs  p99 %5d µs\n", l.name, r.bps/1e9, l.rounds(), r.p50.Microseconds(), r.p99.Microseconds())
		}
		fmt.Printf("RESULT fabric throughput_ratio=%.2f added_p50_us=%d gateway_node_throughput_ratio=%.2f gateway_node_added_p50_us=%d "+
			"throughput_gbps=%.2f gateway_node_throughput_gbps=%.2f bare_wireguard_go_gbps=%.2f "+
			"latency_p50_us=%d gateway_node_p50_us=%d bare_p50_us=%d latency_p99_us=%d gateway_node_p99_us=%d bare_p99_us=%d "+
			"cpu_ratio=%.2f gateway_node_cpu_ratio=%.2f target_throughput_ratio=0.8 target_added_p50_us=100\n",
			cross.bps/bare.bps, (cross.p50 - bare.p50).Microseconds(), local.bps/bare.bps, (local.p50 - bare.p50).Microseconds(),
			cross.bps/1e9, local.bps/1e9, bare.bps/1e9,
			cross.p50.Microseconds(), local.p50.Microseconds(), bare.p50.Microseconds(),
			cross.p99.Microseconds(), local.p99.Microseconds(), bare.p99.Microseconds(),
			legs[0].perCPU()/legs[2].perCPU(), legs[1].perCPU()/legs[2].perCPU())
	}
}

// leg is one path the bench measures: from a pod to a pod at an address,
// with what its rounds measured.
type leg struct {
	name     string
	from, to *netlab.Pod
	at       netip.Addr
	bps      []float64       // per round
	rtts     []time.Duration // every round trip of every round
	bits     float64         // moved by the streams of every round
	cpu      time.Duration   // the bench process's CPU time during them
}

// result is a leg's measurement: mean throughput in bit/s over its rounds
// (all equally long) and round-trip percentiles over all its round trips.
type result struct {
	bps      float64
	p50, p99 time.Duration
}

// serve starts a sink (5201) and an echo server (5202) in the leg's
// server pod for the rest of the bench and waits until the client reaches
// them (the first connection waits for the handshake).
func (l *leg) serve(ctx context.Context, b *testing.B) {
	b.Helper()
	sink, err := l.to.ServeSink(5201)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sink)
	echo, err := l.to.ServeEcho(5202)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(echo)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := l.from.Echo(ectx, netip.AddrPortFrom(l.at, 5202), []byte("warm"))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %s cannot reach %s: %v", l.name, l.from, l.at, err)
		}
	}
}

// round measures a stream of d and n round trips.
func (l *leg) round(ctx context.Context, b *testing.B, d time.Duration, n int) {
	b.Helper()
	cpu := cpuTime(b)
	bps, err := l.from.Throughput(ctx, netip.AddrPortFrom(l.at, 5201), d)
	if err != nil {
		b.Fatalf("%s: %v", l.name, err)
	}
	l.cpu += cpuTime(b) - cpu
	l.bits += bps * d.Seconds()
	rtts, err := l.from.RoundTrips(ctx, netip.AddrPortFrom(l.at, 5202), n)
	if err != nil {
		b.Fatalf("%s: %v", l.name, err)
	}
	l.bps, l.rtts = append(l.bps, bps), append(l.rtts, rtts...)
}

func (l *leg) result() result {
	var sum float64
	for _, v := range l.bps {
		sum += v
	}
	return result{bps: sum / float64(len(l.bps)), p50: netlab.Percentile(l.rtts, 0.50), p99: netlab.Percentile(l.rtts, 0.99)}
}

// perCPU is the bits the leg's streams moved per second of the bench
// process's CPU time (its threads: wireguard-go, the pods' sockets, and
// the kernel's forwarding that runs in their system calls; this kernel
// charges softirq work to the thread it runs on). The ratio of two legs'
// is what their throughput ratio would be were both bound by the same
// CPUs, whatever else runs on the machine.
func (l *leg) perCPU() float64 { return l.bits / l.cpu.Seconds() }

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rounds formats the leg's throughput per round in Gbit/s.
func (l *leg) rounds() string {
	out := make([]string, len(l.bps))
	for i, v := range l.bps {
		out[i] = fmt.Sprintf("%.2f", v/1e9)
	}
	return strings.Join(out, " ")
}

// bareWireGuard is the baseline: two gateway pods of the lab joined by
// wireguard-go devices alone (no VXLAN, no NAT), each with one inner
// address; traffic runs gateway to gateway.
func bareWireGuard(b *testing.B, lab *netlab.Lab) (*netlab.Pod, *netlab.Pod) {
	b.Helper()
	var gws []*netlab.Pod
	for _, name := range []string{"bare-a", "bare-b"} {
		c, err := lab.AddCluster(name, labSubnets)
		if err != nil {
			b.Fatal(err)
		}
		gw, err := c.AddGateway(1, "gw", netip.MustParseAddr("10.244.255.250"))
		if err != nil {
			b.Fatal(err)
		}
		gws = append(gws, gw)
	}
	inner := []netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}
	keys := []wgtypes.Key{mustKey(b), mustKey(b)}
	port := DefaultListenPort
	out := make([]*netlab.Pod, 2)
	for i, gw := range gws {
		name := fmt.Sprintf("%s-bare%d", lab.Prefix, i)
		dev, err := tunnel.Open(gw.NS, tunnel.Options{Name: name, MTU: 1420, ForceUserspace: true, Logger: logr.Discard()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = dev.Close() })
		other := 1 - i
		allowed := net.IPNet{IP: inner[other].AsSlice(), Mask: net.CIDRMask(32, 32)}
		if err := dev.Configure(wgtypes.Config{PrivateKey: &keys[i], ListenPort: &port, ReplacePeers: true, Peers: []wgtypes.PeerConfig{{
			PublicKey: keys[other].PublicKey(), Endpoint: &net.UDPAddr{IP: gws[other].WANIP.AsSlice(), Port: port}, AllowedIPs: []net.IPNet{allowed},
		}}}); err != nil {
			b.Fatal(err)
		}
		h, err := netlink.NewHandleAt(gw.NS.Handle())
		if err != nil {
			b.Fatal(err)
		}
		link, err := h.LinkByName(name)
		if err == nil {
			err = h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: inner[i].AsSlice(), Mask: net.CIDRMask(32, 32)}})
		}
		if err == nil {
			err = h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: &allowed, Scope: netlink.SCOPE_LINK})
		}
		h.Close()
		if err != nil {
			b.Fatal(err)
		}
		// The gateway pod, at its tunnel's inner address.
		bare := *gw
		bare.IP = inner[i]
		out[i] = &bare
	}
	return out[0], out[1]
}
