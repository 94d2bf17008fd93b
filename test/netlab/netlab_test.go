package netlab_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m) }

var (
	subnet0 = netip.MustParsePrefix("10.244.0.0/24")
	subnet1 = netip.MustParsePrefix("10.244.1.0/24")
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func at(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }

// newLab makes a lab that the test closes, whatever its outcome.
func newLab(t *testing.T) *netlab.Lab {
	t.Helper()
	netlab.Require(t)
	l, err := netlab.New(netlab.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close the lab: %v", err)
		}
	})
	return l
}

func addCluster(t *testing.T, l *netlab.Lab, name string, subnets ...netip.Prefix) *netlab.Cluster {
	t.Helper()
	c, err := l.AddCluster(name, subnets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func addPod(t *testing.T, c *netlab.Cluster, node int, name, ip string) *netlab.Pod {
	t.Helper()
	p, err := c.AddPod(node, name, addr(ip))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addGateway(t *testing.T, c *netlab.Cluster, node int, name, ip string) *netlab.Pod {
	t.Helper()
	p, err := c.AddGateway(node, name, addr(ip))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func serve(t *testing.T, what string, start func(int) (func(), error), port int) {
	t.Helper()
	stop, err := start(port)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(stop)
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestClusters builds two clusters with the same pod subnets, each with a
// pod on each node and a gateway, and checks who reaches whom.
func TestClusters(t *testing.T) {
	l := newLab(t)
	east := addCluster(t, l, "east", subnet0, subnet1)
	west := addCluster(t, l, "west", subnet0, subnet1)
	if east.Index != 0 || west.Index != 1 {
		t.Fatalf("cluster indexes: east %d, west %d, want 0 and 1", east.Index, west.Index)
	}
	for _, c := range []*netlab.Cluster{east, west} {
		for k, n := range c.Nodes {
			want := netip.AddrFrom4([4]byte{198, 18, byte(c.Index), byte(k + 1)})
			if n.IP != want {
				t.Errorf("%s: IP %s, want %s", n, n.IP, want)
			}
		}
	}

	ea := addPod(t, east, 0, "a", "10.244.0.10")
	eb := addPod(t, east, 1, "b", "10.244.1.10")
	egw := addGateway(t, east, 0, "gw", "10.244.0.100")
	wa := addPod(t, west, 0, "a", "10.244.0.10") // the same address as east/a
	wc := addPod(t, west, 1, "c", "10.244.1.20")
	wgw := addGateway(t, west, 1, "gw", "10.244.1.100")
	if egw.WANIP != addr("198.19.0.2") || wgw.WANIP != addr("198.19.1.2") {
		t.Fatalf("WAN addresses %s and %s, want 198.19.0.2 and 198.19.1.2", egw.WANIP, wgw.WANIP)
	}
	if wa.WANIP.IsValid() {
		t.Errorf("pod %s has WAN address %s", wa, wa.WANIP)
	}
	for _, p := range []*netlab.Pod{ea, eb, egw, wa, wc, wgw} {
		serve(t, "echo in "+p.String(), p.ServeEcho, 8080)
		serve(t, "info in "+p.String(), p.ServeInfo, 8081)
	}
	serve(t, "echo on port 9000 in "+ea.String(), ea.ServeEcho, 9000)

	payload := make([]byte, 4<<20) // more than the sockets' buffers
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}

	t.Run("WithinCluster", func(t *testing.T) {
		for _, hop := range [][2]*netlab.Pod{{ea, eb}, {eb, ea}, {ea, egw}, {wa, wc}, {wc, wgw}, {wgw, wa}} {
			if err := hop[0].Echo(timeout(t, 10*time.Second), at(hop[1].IP, 8080), payload); err != nil {
				t.Errorf("echo from %s to %s: %v", hop[0], hop[1], err)
			}
		}
	})

	t.Run("NoNAT", func(t *testing.T) {
		seen, err := eb.SeenAs(timeout(t, 5*time.Second), at(ea.IP, 8081))
		if err != nil {
			t.Fatal(err)
		}
		if seen.Addr() != eb.IP {
			t.Errorf("%s sees %s's connection come from %s", ea, eb, seen)
		}
	})

	t.Run("SameAddressSeparateWorlds", func(t *testing.T) {
		// Only east/a serves on 9000: west/c reaches west/a, which refuses.
		if err := eb.Echo(timeout(t, 5*time.Second), at(ea.IP, 9000), []byte("east")); err != nil {
			t.Errorf("east: %v", err)
		}
		err := wc.Echo(timeout(t, 5*time.Second), at(wa.IP, 9000), []byte("west"))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("west/c to %s:9000: got %v, want connection refused (by west/a)", wa.IP, err)
		}
	})

	t.Run("ClustersApart", func(t *testing.T) {
		// East has no pod at west/c's address, and pods have no way to
		// the WAN.
		for _, hop := range []struct {
			from *netlab.Pod
			to   netip.AddrPort
		}{
			{ea, at(wc.IP, 8080)},
			{eb, at(wc.IP, 8080)},
			{wa, at(addr("10.244.0.11"), 8080)},
			{ea, at(wgw.WANIP, 8080)},
			{wc, at(egw.WANIP, 8080)},
		} {
			start := time.Now()
			conn, err := hop.from.Dial(timeout(t, 2*time.Second), hop.to)
			if err == nil {
				conn.Close()
				t.Errorf("%s reached %s", hop.from, hop.to)
				continue
			}
			t.Logf("%s to %s: %v (after %v)", hop.from, hop.to, err, time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("GatewaysOverWAN", func(t *testing.T) {
		if err := egw.Echo(timeout(t, 10*time.Second), at(wgw.WANIP, 8080), payload); err != nil {
			t.Error(err)
		}
		if err := wgw.Echo(timeout(t, 10*time.Second), at(egw.WANIP, 8080), payload); err != nil {
			t.Error(err)
		}
		seen, err := wgw.SeenAs(timeout(t, 5*time.Second), at(egw.WANIP, 8081))
		if err != nil {
			t.Fatal(err)
		}
		if seen.Addr() != wgw.WANIP {
			t.Errorf("%s sees %s's connection come from %s, want %s", egw, wgw, seen, wgw.WANIP)
		}
	})

	t.Run("Outsider", func(t *testing.T) {
		// A host on east's side of the WAN that is no gateway, at the top
		// of the subnet: the gateways reach it (it refuses, serving
		// nothing), the pods do not.
		out, err := east.AddOutsider("out")
		if err != nil {
			t.Fatal(err)
		}
		if out.IP != addr("198.19.0.254") || out.Cluster != east || len(east.Outsiders) != 1 {
			t.Errorf("outsider %s, want 198.19.0.254 in east", out)
		}
		for _, name := range []string{"out", ""} {
			if _, err := east.AddOutsider(name); err == nil {
				t.Errorf("AddOutsider(%q) succeeded", name)
			}
		}
		if got := len(east.Outsiders); got != 1 {
			t.Errorf("%d outsiders after the failed adds, want 1", got)
		}
		for _, gw := range []*netlab.Pod{egw, wgw} {
			_, err := gw.SeenAs(timeout(t, 5*time.Second), at(out.IP, 8081))
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%s to %s:8081: %v, want connection refused", gw, out, err)
			}
		}
		if conn, err := ea.Dial(timeout(t, 2*time.Second), at(out.IP, 8081)); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("%s reached %s: %v", ea, out, err)
		}
		if err := out.RouteVia(subnet0, egw.WANIP); err != nil {
			t.Error(err)
		}
		if err := out.RouteVia(subnet0, egw.WANIP); err == nil {
			t.Error("the same route twice: no error")
		}
	})

	t.Run("SecondGateway", func(t *testing.T) {
		gw2 := addGateway(t, east, 1, "gw2", "10.244.1.101")
		if gw2.WANIP != addr("198.19.0.3") {
			t.Errorf("second gateway's WAN address %s, want 198.19.0.3", gw2.WANIP)
		}
		// The WAN bridge got a port: the first gateway must still work.
		for _, from := range []*netlab.Pod{gw2, egw} {
			if err := from.Echo(timeout(t, 5*time.Second), at(wgw.WANIP, 8080), []byte("again")); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestThroughputLatency(t *testing.T) {
	l := newLab(t)
	c := addCluster(t, l, "perf", subnet0, subnet1)
	a := addPod(t, c, 0, "a", "10.244.0.2")
	b := addPod(t, c, 1, "b", "10.244.1.2")
	serve(t, "sink", b.ServeSink, 5201)
	serve(t, "echo", b.ServeEcho, 7)

	bps, err := a.Throughput(timeout(t, 30*time.Second), at(b.IP, 5201), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("throughput %s to %s across nodes: %.2f Gbit/s", a, b, bps/1e9)
	if bps < 10e6 || bps > 10e12 {
		t.Errorf("throughput %.0f bit/s: not sane", bps)
	}

	for _, port := range []uint16{7, 5201} { // the sink echoes too
		p50, p99, err := a.Latency(timeout(t, 30*time.Second), at(b.IP, port), 1000)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("latency %s to %s:%d: p50 %v, p99 %v", a, b, port, p50, p99)
		if p50 <= 0 || p99 < p50 || p99 > time.Second {
			t.Errorf("latency p50 %v, p99 %v: not sane", p50, p99)
		}
	}
	if err := a.Echo(timeout(t, 5*time.Second), at(b.IP, 5201), []byte("hello sink")); err != nil {
		t.Error(err)
	}
}

// linkState describes the links of the calling goroutine's namespace.
func linkState(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, l := range links {
		a := l.Attrs()
		s = append(s, fmt.Sprintf("%d %s %s %s %v", a.Index, a.Name, l.Type(), a.HardwareAddr, a.Flags))
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		s = append(s, "route "+r.String())
	}
	return s
}

// netnsFds returns the network namespaces the process holds open, by the
// links in /proc/self/fd ("net:[inode]").
func netnsFds(t *testing.T) map[string]bool {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && len(target) > 4 && target[:4] == "net:" {
			held[target] = true
		}
	}
	return held
}

func inode(t *testing.T, ns *netns.Namespace) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(ns.Fd(), &st); err != nil {
		t.Fatalf("stat %s: %v", ns, err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

func TestClose(t *testing.T) {
	netlab.Require(t)
	before := linkState(t)
	heldBefore := netnsFds(t)
	l, err := netlab.New(netlab.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // should the test fail before it closes the lab
	c := addCluster(t, l, "c", subnet0, subnet1)
	p := addPod(t, c, 0, "p", "10.244.0.5")
	gw := addGateway(t, c, 1, "gw", "10.244.1.5")
	out, err := c.AddOutsider("out")
	if err != nil {
		t.Fatal(err)
	}
	stop, err := p.ServeEcho(8080) // left running: Close stops it
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Echo(timeout(t, 5*time.Second), at(p.IP, 8080), []byte("up")); err != nil {
		t.Fatal(err)
	}
	if during := linkState(t); !slices.Equal(during, before) {
		t.Errorf("the creating namespace changed:\nbefore %q\nduring %q", before, during)
	}

	nss := []*netns.Namespace{l.WAN, c.Router, c.Nodes[0].NS, c.Nodes[1].NS, p.NS, gw.NS, out.NS}
	var inodes []string
	for _, ns := range nss {
		inodes = append(inodes, inode(t, ns))
		links, err := netlab.Links(ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range links {
			if name != "lo" && name != "eth0" && name != "wan" && !bytes.HasPrefix([]byte(name), []byte(l.Prefix)) {
				t.Errorf("link %s in %s lacks the prefix %s", name, ns, l.Prefix)
			}
		}
		t.Logf("%s: %v", ns, links)
	}
	held := netnsFds(t)
	for _, in := range inodes {
		if !held[in] {
			t.Fatalf("%s not among the process's fds %v", in, held)
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ns := range nss {
		if ns.Fd() != -1 {
			t.Errorf("%s: fd %d after Close", ns, ns.Fd())
		}
		if links, err := netlab.Links(ns); !errors.Is(err, netlab.ErrClosed) {
			t.Errorf("links of %s after Close: %v, %v; want ErrClosed", inodes[i], links, err)
		}
	}
	held = netnsFds(t)
	for _, in := range inodes {
		if held[in] {
			t.Errorf("%s still open after Close", in)
		}
	}
	if !maps(held, heldBefore) {
		t.Errorf("namespaces held: before %v, after %v", heldBefore, held)
	}
	if after := linkState(t); !slices.Equal(after, before) {
		t.Errorf("the creating namespace changed:\nbefore %q\nafter  %q", before, after)
	}

	stop() // harmless after Close
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l.AddCluster("d", []netip.Prefix{subnet0}); !errors.Is(err, netlab.ErrClosed) {
		t.Errorf("AddCluster after Close: %v, want ErrClosed", err)
	}
	if _, err := c.AddPod(0, "q", addr("10.244.0.6")); !errors.Is(err, netlab.ErrClosed) {
		t.Errorf("AddPod after Close: %v, want ErrClosed", err)
	}
	if _, err := gw.Dial(timeout(t, time.Second), at(p.IP, 8080)); !errors.Is(err, netlab.ErrClosed) {
		t.Errorf("Dial after Close: %v, want ErrClosed", err)
	}
}

func maps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestPath checks that Path opens the namespace it names.
func TestPath(t *testing.T) {
	l := newLab(t)
	c := addCluster(t, l, "c", subnet0)
	for _, ns := range []*netns.Namespace{l.WAN, c.Router, c.Nodes[0].NS} {
		opened, err := netns.Open(l.Path(ns))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := inode(t, opened), inode(t, ns); got != want {
			t.Errorf("%s opens %s, want %s", l.Path(ns), got, want)
		}
		links, err := netlab.Links(opened)
		opened.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, err := netlab.Links(ns)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(links, want) {
			t.Errorf("links through %s: %v, want %v", l.Path(ns), links, want)
		}
	}
}

func TestInvalid(t *testing.T) {
	for _, p := range []string{"", "toolong7", "1abc", "a-b", "ABC"} {
		if l, err := netlab.New(p); err == nil {
			l.Close()
			t.Errorf("New(%q) succeeded", p)
		}
	}
	if p := netlab.Prefix(); len(p) != 4 || p[0] != 'f' {
		t.Errorf("Prefix() = %q", p)
	}
	l := newLab(t)
	before, err := netlab.Links(l.WAN)
	if err != nil {
		t.Fatal(err)
	}
	for _, subnets := range [][]netip.Prefix{
		nil,
		{subnet0, netip.MustParsePrefix("10.244.0.128/25")},
		{netip.MustParsePrefix("10.244.0.1/24")},
		{netip.MustParsePrefix("fd00::/64")},
	} {
		if _, err := l.AddCluster("bad", subnets); err == nil {
			t.Errorf("AddCluster with %v succeeded", subnets)
		}
	}
	c := addCluster(t, l, "c", subnet0, subnet1)
	if c.Index != 0 {
		t.Errorf("index %d after failed AddClusters, want 0", c.Index)
	}
	if _, err := l.AddCluster("c", []netip.Prefix{subnet0}); err == nil {
		t.Error("a second cluster c")
	}
	addPod(t, c, 0, "a", "10.244.0.2")
	for _, bad := range []struct {
		node     int
		name, ip string
	}{
		{0, "b", "10.244.1.2"}, // another node's subnet
		{2, "b", "10.244.0.3"}, // no such node
		{0, "b", "10.244.0.2"}, // address taken
		{0, "a", "10.244.0.3"}, // name taken
		{0, "", "10.244.0.3"},
	} {
		if _, err := c.AddPod(bad.node, bad.name, addr(bad.ip)); err == nil {
			t.Errorf("AddPod(%d, %q, %s) succeeded", bad.node, bad.name, bad.ip)
		}
	}
	if len(c.Pods) != 1 {
		t.Errorf("%d pods, want 1", len(c.Pods))
	}
	after, err := netlab.Links(l.WAN)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("WAN links changed: %v, then %v", before, after)
	}
}

// TestNodeToNodeOverTheUnderlay checks that traffic between pods on two
// nodes crosses the underlay's bridge without the router forwarding it: a
// router that does routes it back out of the bridge device, which segments
// GSO packets in software (see routeNodeToNode).
func TestNodeToNodeOverTheUnderlay(t *testing.T) {
	l := newLab(t)
	c := addCluster(t, l, "c", subnet0, subnet1)
	a := addPod(t, c, 0, "a", "10.244.0.10")
	b := addPod(t, c, 1, "b", "10.244.1.10")
	serve(t, "echo in "+b.String(), b.ServeEcho, 8080)
	payload := make([]byte, 1<<20)
	before := forwarded(t, c.Router)
	if err := a.Echo(timeout(t, 10*time.Second), at(b.IP, 8080), payload); err != nil {
		t.Fatal(err)
	}
	if got := forwarded(t, c.Router) - before; got != 0 {
		t.Errorf("the router forwarded %d packets of a pod-to-pod echo across nodes, want 0", got)
	}
}

// forwarded reads the IPv4 ForwDatagrams counter of ns.
func forwarded(t *testing.T, ns *netns.Namespace) int64 {
	t.Helper()
	var n int64 = -1
	err := ns.Do(func() error {
		snmp, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		lines := bytes.Split(snmp, []byte("\n"))
		for i := 0; i+1 < len(lines); i++ {
			names, values := bytes.Fields(lines[i]), bytes.Fields(lines[i+1])
			if len(names) == 0 || string(names[0]) != "Ip:" || len(values) != len(names) {
				continue
			}
			for k, name := range names {
				if string(name) == "ForwDatagrams" {
					_, err := fmt.Sscan(string(values[k]), &n)
					return err
				}
			}
		}
		return errors.New("no Ip: ForwDatagrams in /proc/thread-self/net/snmp")
	})
	if err != nil {
		t.Fatalf("read forwarded packets in %s: %v", ns, err)
	}
	return n
}
