package nat

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m) }

const testTable = "ferry"

// ruleset is the lab's gateway configuration: the peer "remote" is the
// server's side, its local pods seen there in egressTo; the peer "other"
// owns addresses nobody uses.
func (l *lab) ruleset(egressTo func(family) netip.Prefix, clamp bool) Ruleset {
	remote := Peer{Name: "remote"}
	other := Peer{Name: "other"}
	for _, f := range families {
		remote.Addresses = append(remote.Addresses, f.tunnelNet)
		remote.Ingress = append(remote.Ingress, fabric.Mapping{From: f.remapped, To: f.local})
		remote.Egress = append(remote.Egress, fabric.Mapping{From: f.local, To: egressTo(f)})
		other.Addresses = append(other.Addresses, f.unused)
		other.Egress = append(other.Egress, fabric.Mapping{From: f.local, To: f.other})
	}
	return Ruleset{Table: testTable, Tunnel: l.tunnel, ClampMSS: clamp, Peers: []Peer{remote, other}}
}

func remappedTo(f family) netip.Prefix { return f.remapped }

// unspecified is the unspecified address of f's family.
func unspecified(f family) netip.Addr {
	if f.client.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func otherTo(f family) netip.Prefix { return f.other }

// translate is where m takes a, failing the test when a is not in m.From.
func translate(t *testing.T, m fabric.Mapping, a netip.Addr) netip.Addr {
	t.Helper()
	out, ok := m.Translate(a)
	if !ok {
		t.Fatalf("%s is not in %s", a, m.From)
	}
	return out
}

func mustApply(t *testing.T, ns *netns.Namespace, rs Ruleset) int {
	t.Helper()
	n, err := Apply(ns, rs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return n
}

// TestTranslation proves both translations with real TCP connections
// through the router, for IPv4 and IPv6: egress SNAT maps the client's
// address 1:1 into the remapped prefix, only for mapped sources and peer
// destinations, and the replies come back; ingress DNAT maps the remapped
// addresses to the real ones, only for sources among the peer's addresses.
func TestTranslation(t *testing.T) {
	netlab.Require(t)
	l := newLab(t, labMTU{})

	servers := map[string]netip.AddrPort{}
	clients := map[string]uint16{}
	for _, f := range families {
		// Listening on every address, the server answers as the
		// stranger too, and the client as any of its addresses.
		port, _ := listen(t, l.server, unspecified(f))
		servers[f.name] = netip.AddrPortFrom(f.server, port)
		clients[f.name], _ = listen(t, l.client, unspecified(f))
	}

	// Without the table, nothing is translated.
	for _, f := range families {
		mustDial(t, l.client, f.client, servers[f.name], f.server, f.client)
	}

	rules := mustApply(t, l.router, l.ruleset(remappedTo, false))
	// Per peer and family: a rule per mapping in each NAT chain, and
	// two counting rules per address.
	if want := 2*(1+1+2) + 2*(0+1+2); rules != want {
		t.Errorf("Apply: %d rules, want %d", rules, want)
	}

	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			egress := fabric.Mapping{From: f.local, To: f.remapped}
			ingress := egress.Inverse()
			server := servers[f.name]
			strangerServer := netip.AddrPortFrom(f.stranger, server.Port())

			t.Run("egress", func(t *testing.T) {
				for _, src := range []netip.Addr{f.client, f.clientB} {
					mustDial(t, l.client, src, server, f.server, translate(t, egress, src))
				}
				// A source outside the mapping leaves as it is.
				mustDial(t, l.client, f.outside, server, f.server, f.outside)
				// So does a connection to an address not the peer's.
				mustDial(t, l.client, f.client, strangerServer, f.stranger, f.client)
			})

			t.Run("ingress", func(t *testing.T) {
				port := clients[f.name]
				for _, dst := range []netip.Addr{f.client, f.clientB} {
					mapped := translate(t, egress, dst) // how the peer sees dst
					if back := translate(t, ingress, mapped); back != dst {
						t.Fatalf("the ingress mapping takes %s to %s, not %s", mapped, back, dst)
					}
					mustDial(t, l.server, f.server, netip.AddrPortFrom(mapped, port), dst, f.server)
				}
				// From a source outside the peer's addresses, the mapped
				// address is not translated, and leads nowhere...
				mapped := translate(t, egress, f.client)
				mustNotConnect(t, l.server, f.stranger, netip.AddrPortFrom(mapped, port))
				// ...though that source reaches the client directly.
				mustDial(t, l.server, f.stranger, netip.AddrPortFrom(f.client, port), f.client, f.stranger)
			})
		})
	}

	counters := stableCounters(t, l.router)
	if c := counters["remote"]; c.TxPackets == 0 || c.RxPackets == 0 || c.TxBytes == 0 || c.RxBytes == 0 {
		t.Errorf("counters of remote: %+v, want traffic both ways", c)
	}
	if c, ok := counters["other"]; !ok || c != (Counters{}) {
		t.Errorf("counters of other: %+v (present: %t), want zero", c, ok)
	}
	if len(counters) != 2 {
		t.Errorf("counters: %v, want remote and other only", counters)
	}
}

// stableCounters reads the counters once traffic has settled (the last
// FINs and ACKs forwarded).
func stableCounters(t *testing.T, ns *netns.Namespace) map[string]Counters {
	t.Helper()
	var last map[string]Counters
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := ReadCounters(ns, testTable)
		if err != nil {
			t.Fatalf("ReadCounters: %v", err)
		}
		if last != nil && maps.Equal(c, last) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters keep changing: %v", c)
		}
		last = c
		time.Sleep(300 * time.Millisecond)
	}
}

// tableContents is what a table holds, read back from the kernel.
type tableContents struct {
	chains   map[string]string // name -> "type hook priority"
	rules    int
	objects  []string // sorted
	sets     []string // sorted
	policies map[string]nftables.ChainPolicy
}

func readContents(t *testing.T, ns *netns.Namespace, table string) tableContents {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	tab := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("list chains: %v", err)
	}
	out := tableContents{chains: map[string]string{}, policies: map[string]nftables.ChainPolicy{}}
	for _, ch := range chains {
		if ch.Table.Name != table {
			continue
		}
		desc := string(ch.Type)
		if ch.Hooknum != nil {
			desc += fmt.Sprintf(" hook %d", *ch.Hooknum)
		}
		if ch.Priority != nil {
			desc += fmt.Sprintf(" priority %d", *ch.Priority)
		}
		out.chains[ch.Name] = desc
		if ch.Policy != nil {
			out.policies[ch.Name] = *ch.Policy
		}
		rules, err := c.GetRules(tab, ch)
		if err != nil {
			t.Fatalf("list the rules of %s: %v", ch.Name, err)
		}
		out.rules += len(rules)
	}
	objs, err := c.GetNamedObjects(tab)
	if err != nil {
		t.Fatalf("list objects: %v", err)
	}
	for _, o := range objs {
		out.objects = append(out.objects, o.(*nftables.NamedObj).Name)
	}
	slices.Sort(out.objects)
	sets, err := c.GetSets(tab)
	if err != nil {
		t.Fatalf("list sets: %v", err)
	}
	for _, s := range sets {
		out.sets = append(out.sets, s.Name)
	}
	slices.Sort(out.sets)
	return out
}

// wantChains are the chains Apply makes, as readContents describes them.
var wantChains = map[string]string{
	"prerouting":  "nat hook 0 priority -100",
	"postrouting": "nat hook 4 priority 100",
	"forward":     "filter hook 2 priority 0",
}

func checkContents(t *testing.T, got tableContents, rules int, objects ...string) {
	t.Helper()
	if !maps.Equal(got.chains, wantChains) {
		t.Errorf("chains: %v, want %v", got.chains, wantChains)
	}
	for name, p := range got.policies {
		if p != nftables.ChainPolicyAccept {
			t.Errorf("chain %s: policy %d, want accept", name, p)
		}
	}
	if got.rules != rules {
		t.Errorf("the table holds %d rules, want %d", got.rules, rules)
	}
	slices.Sort(objects)
	if !slices.Equal(got.objects, objects) {
		t.Errorf("objects: %v, want %v", got.objects, objects)
	}
	if len(got.sets) != 0 {
		t.Errorf("sets: %v, want none", got.sets)
	}
}

// TestApplyIdempotent applies the same ruleset twice: the table is the
// same, and the counters keep their values.
func TestApplyIdempotent(t *testing.T) {
	netlab.Require(t)
	l := newLab(t, labMTU{})
	f := families[0]
	port, _ := listen(t, l.server, f.server)
	server := netip.AddrPortFrom(f.server, port)
	rs := l.ruleset(remappedTo, true)

	n1 := mustApply(t, l.router, rs)
	checkContents(t, readContents(t, l.router, testTable), n1, "rx-other", "rx-remote", "tx-other", "tx-remote")
	mustDial(t, l.client, f.client, server, f.server, translate(t, fabric.Mapping{From: f.local, To: f.remapped}, f.client))
	before := stableCounters(t, l.router)
	if before["remote"].TxPackets == 0 {
		t.Fatalf("counters: %v, want traffic to remote", before)
	}

	n2 := mustApply(t, l.router, rs)
	if n2 != n1 {
		t.Errorf("the second Apply installed %d rules, the first %d", n2, n1)
	}
	checkContents(t, readContents(t, l.router, testTable), n2, "rx-other", "rx-remote", "tx-other", "tx-remote")
	if after := stableCounters(t, l.router); !maps.Equal(after, before) {
		t.Errorf("counters after the second Apply: %v, want them kept: %v", after, before)
	}

	// The counters still count.
	mustDial(t, l.client, f.client, server, f.server, translate(t, fabric.Mapping{From: f.local, To: f.remapped}, f.client))
	if after := stableCounters(t, l.router); after["remote"].TxPackets <= before["remote"].TxPackets {
		t.Errorf("counters after more traffic: %v, want more than %v", after, before)
	}
}

// TestApplyReplaces changes the ruleset: new connections see the new
// mapping, the remaining peer keeps its counters, the removed peer's go,
// and a new peer's start at zero.
func TestApplyReplaces(t *testing.T) {
	netlab.Require(t)
	l := newLab(t, labMTU{})
	f := families[0]
	port, _ := listen(t, l.server, f.server)
	server := netip.AddrPortFrom(f.server, port)

	mustApply(t, l.router, l.ruleset(remappedTo, false))
	mustDial(t, l.client, f.client, server, f.server, translate(t, fabric.Mapping{From: f.local, To: f.remapped}, f.client))
	before := stableCounters(t, l.router)

	rs := l.ruleset(otherTo, false)
	rs.Peers[1] = Peer{Name: "third", Addresses: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	n := mustApply(t, l.router, rs)
	checkContents(t, readContents(t, l.router, testTable), n, "rx-remote", "rx-third", "tx-remote", "tx-third")
	after := stableCounters(t, l.router)
	if after["remote"] != before["remote"] {
		t.Errorf("counters of remote: %+v after the change, want them kept: %+v", after["remote"], before["remote"])
	}
	if _, ok := after["other"]; ok {
		t.Errorf("counters of the removed peer other are still there: %v", after)
	}
	if c, ok := after["third"]; !ok || c != (Counters{}) {
		t.Errorf("counters of the new peer third: %+v (present: %t), want zero", c, ok)
	}

	mustDial(t, l.client, f.client, server, f.server, translate(t, fabric.Mapping{From: f.local, To: f.other}, f.client))
}

// TestApplyFailureKeepsRuleset makes the kernel reject a transaction (one
// rule too many, in a chain that does not exist): nothing of it applies,
// and the table, its counters and its translation stay as they were.
func TestApplyFailureKeepsRuleset(t *testing.T) {
	netlab.Require(t)
	l := newLab(t, labMTU{})
	f := families[0]
	port, _ := listen(t, l.server, f.server)
	server := netip.AddrPortFrom(f.server, port)
	oldMapping := fabric.Mapping{From: f.local, To: f.remapped}

	n := mustApply(t, l.router, l.ruleset(remappedTo, false))
	mustDial(t, l.client, f.client, server, f.server, translate(t, oldMapping, f.client))
	before := stableCounters(t, l.router)

	rs := l.ruleset(otherTo, true)
	rs.Peers = rs.Peers[:1]
	_, err := apply(l.router, rs, func(c *nftables.Conn, table *nftables.Table) {
		c.AddRule(&nftables.Rule{
			Table: table,
			Chain: &nftables.Chain{Name: "no-such-chain", Table: table},
			Exprs: []expr.Any{&expr.Counter{}},
		})
	})
	if err == nil {
		t.Fatal("apply with a rule in a missing chain succeeded")
	}
	t.Logf("apply fails as it should: %v", err)

	checkContents(t, readContents(t, l.router, testTable), n, "rx-other", "rx-remote", "tx-other", "tx-remote")
	if after := stableCounters(t, l.router); !maps.Equal(after, before) {
		t.Errorf("counters: %v, want them unchanged: %v", after, before)
	}
	mustDial(t, l.client, f.client, server, f.server, translate(t, oldMapping, f.client))
}

// TestApplyCleansTable puts in the table what Apply did not ask for (a
// chain, a set, a counter, a base chain of the wrong priority): Apply
// removes all of it.
func TestApplyCleansTable(t *testing.T) {
	netlab.Require(t)
	ns := netlab.Namespace(t, "gateway")
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	table := c.AddTable(&nftables.Table{Name: testTable, Family: nftables.TableFamilyINet})
	junk := c.AddChain(&nftables.Chain{Name: "junk", Table: table})
	c.AddRule(&nftables.Rule{Table: table, Chain: junk, Exprs: []expr.Any{&expr.Counter{}}})
	wrong := c.AddChain(&nftables.Chain{
		Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(10),
	})
	c.AddRule(&nftables.Rule{Table: table, Chain: wrong, Exprs: []expr.Any{
		&expr.Verdict{Kind: expr.VerdictJump, Chain: "junk"},
	}})
	c.AddObj(&nftables.NamedObj{Table: table, Name: "rx-ghost", Type: nftables.ObjTypeCounter, Obj: &expr.Counter{Packets: 7}})
	set := &nftables.Set{Table: table, Name: "junkset", KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(set, []nftables.SetElement{{Key: []byte{192, 0, 2, 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("fill the table: %v", err)
	}
	if got := readContents(t, ns, testTable); len(got.sets) != 1 || len(got.objects) != 1 || got.chains["forward"] != "filter hook 2 priority 10" {
		t.Fatalf("the table before Apply: %+v", got)
	}

	rs := Ruleset{Table: testTable, Tunnel: "wg0", ClampMSS: true, Peers: []Peer{{
		Name:      "east",
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("fd71::/64")},
		Ingress:   []fabric.Mapping{{From: netip.MustParsePrefix("10.72.0.0/16"), To: netip.MustParsePrefix("10.244.0.0/16")}},
		Egress:    []fabric.Mapping{{From: netip.MustParsePrefix("10.244.0.0/16"), To: netip.MustParsePrefix("10.72.0.0/16")}},
	}}}
	n := mustApply(t, ns, rs)
	if want := 1 + 1 + 2 + 2*2; n != want {
		t.Errorf("Apply: %d rules, want %d", n, want)
	}
	checkContents(t, readContents(t, ns, testTable), n, "rx-east", "tx-east")
}

// TestRemove deletes the table, and deletes nothing the second time
// without an error.
func TestRemove(t *testing.T) {
	netlab.Require(t)
	ns := netlab.Namespace(t, "gateway")
	rs := Ruleset{Table: testTable, Tunnel: "wg0", Peers: []Peer{{
		Name: "east", Addresses: []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16")},
	}}}
	mustApply(t, ns, rs)
	if !slices.Contains(listTables(t, ns), testTable) {
		t.Fatalf("tables after Apply: %v, want %s", listTables(t, ns), testTable)
	}
	if err := Remove(ns, testTable); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if tables := listTables(t, ns); len(tables) != 0 {
		t.Errorf("tables after Remove: %v, want none", tables)
	}
	if err := Remove(ns, testTable); err != nil {
		t.Errorf("Remove of a missing table: %v", err)
	}
	if _, err := ReadCounters(ns, testTable); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadCounters of a missing table: %v, want an fs.ErrNotExist", err)
	}
}

func listTables(t *testing.T, ns *netns.Namespace) []string {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	var names []string
	for _, tab := range tables {
		names = append(names, tab.Name)
	}
	return names
}

// TestClampMSS narrows the MTU of the router's end of the tunnel (the
// server's end keeps 1500, so both hosts advertise an MSS of 1460): with
// ClampMSS, a SYN into the tunnel (client to server, the oifname rule) and
// one out of it (server to client, the iifname rule) leave with the MSS
// the tunnel's MTU allows; without, untouched.
func TestClampMSS(t *testing.T) {
	netlab.Require(t)
	const tunnelMTU = 1280
	l := newLab(t, labMTU{tunnel: tunnelMTU, serverEnd: 1500})
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			serverPort, atServer := listen(t, l.server, f.server)
			clientPort, atClient := listen(t, l.client, f.client)
			// Plain routing, so that the MSS is all that changes.
			rs := Ruleset{Table: testTable, Tunnel: l.tunnel, Peers: []Peer{{Name: "remote", Addresses: []netip.Prefix{f.tunnelNet}}}}
			headers := 40 // IPv4 and TCP
			if f.client.Is6() {
				headers = 60
			}

			// mss returns the MSS the accepting end of a connection
			// each way settled on: the smaller of the MSS the other
			// end advertised and its own, less TCP options (such as
			// 12 bytes of timestamps).
			mss := func() (atServerEnd, atClientEnd int) {
				t.Helper()
				mustDial(t, l.client, f.client, netip.AddrPortFrom(f.server, serverPort), f.server, f.client)
				atServerEnd = (<-atServer).MSS
				mustDial(t, l.server, f.server, netip.AddrPortFrom(f.client, clientPort), f.client, f.server)
				atClientEnd = (<-atClient).MSS
				return atServerEnd, atClientEnd
			}
			unclamped := 1500 - headers
			clamped := tunnelMTU - headers

			mustApply(t, l.router, rs)
			s, c := mss()
			t.Logf("without ClampMSS: the MSS is %d at the server, %d at the client", s, c)
			if s <= clamped || s > unclamped || c <= clamped || c > unclamped {
				t.Errorf("without ClampMSS: the MSS is %d at the server, %d at the client, want about %d", s, c, unclamped)
			}
			rs.ClampMSS = true
			mustApply(t, l.router, rs)
			s, c = mss()
			t.Logf("with ClampMSS: the MSS is %d at the server, %d at the client", s, c)
			if s > clamped || s < clamped-40 || c > clamped || c < clamped-40 {
				t.Errorf("with ClampMSS: the MSS is %d at the server, %d at the client, want about %d", s, c, clamped)
			}
		})
	}
}

// TestForwardFilter makes the router a filtering gateway (Local: the
// client's mapped half; Overlay: the client's link) and checks, for IPv4
// and IPv6, that connections between Local and the peer pass both ways
// while the rest of what the router would forward is dropped and counted:
// a client source outside Local, a destination not the peer's, and a
// source from the tunnel that is not the peer's, which reaches the client
// without the filter (TestTranslation). The counter survives an Apply and
// goes with the filter.
func TestForwardFilter(t *testing.T) {
	netlab.Require(t)
	l := newLab(t, labMTU{})
	servers := map[string]netip.AddrPort{}
	clients := map[string]uint16{}
	for _, f := range families {
		port, _ := listen(t, l.server, unspecified(f))
		servers[f.name] = netip.AddrPortFrom(f.server, port)
		clients[f.name], _ = listen(t, l.client, unspecified(f))
	}
	rs := l.ruleset(remappedTo, true)
	for _, f := range families {
		rs.Local = append(rs.Local, f.local)
	}
	rs.Overlay = l.routerClient
	n := mustApply(t, l.router, rs)
	checkContents(t, readContents(t, l.router, testTable), n, "drop-other", "drop-remote", "forward-dropped", "rx-other", "rx-remote", "tx-other", "tx-remote")
	dropped := func() Dropped {
		t.Helper()
		d, err := ReadForwardDropped(l.router, testTable)
		if err != nil {
			t.Fatalf("ReadForwardDropped: %v", err)
		}
		return d
	}
	if d := dropped(); d != (Dropped{}) {
		t.Errorf("dropped %+v before any traffic", d)
	}

	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			egress := fabric.Mapping{From: f.local, To: f.remapped}
			server := servers[f.name]
			mustDial(t, l.client, f.client, server, f.server, translate(t, egress, f.client))
			mustDial(t, l.server, f.server, netip.AddrPortFrom(translate(t, egress, f.clientB), clients[f.name]), f.clientB, f.server)

			before := dropped().Packets
			peerBefore := stableCounters(t, l.router)["remote"].DroppedPackets
			mustNotConnect(t, l.client, f.outside, server)
			peerDropped := stableCounters(t, l.router)["remote"].DroppedPackets - peerBefore
			if peerDropped == 0 {
				t.Errorf("a connection to peer remote from outside Local was not counted as dropped for remote")
			}
			mustNotConnect(t, l.client, f.client, netip.AddrPortFrom(f.stranger, server.Port()))
			mustNotConnect(t, l.server, f.stranger, netip.AddrPortFrom(f.client, clients[f.name]))
			if got := stableCounters(t, l.router)["remote"].DroppedPackets - peerBefore; got != peerDropped {
				t.Errorf("drops of no peer's traffic counted for remote: %d, want %d", got, peerDropped)
			}
			if got := dropped().Packets - before; got < 3 {
				t.Errorf("the filter counted %d packets dropped, want at least one per refused connection (3)", got)
			}
		})
	}

	counted := stableCounters(t, l.router)
	if c := counted["remote"]; c.TxPackets == 0 || c.RxPackets == 0 {
		t.Errorf("counters of remote: %+v, want traffic both ways", c)
	}
	before := dropped()
	mustApply(t, l.router, rs)
	if after := dropped(); after != before {
		t.Errorf("dropped %+v after the same Apply, want it kept: %+v", after, before)
	}
	rs.Local, rs.Overlay = nil, ""
	n = mustApply(t, l.router, rs)
	checkContents(t, readContents(t, l.router, testTable), n, "rx-other", "rx-remote", "tx-other", "tx-remote")
	if d := dropped(); d != (Dropped{}) {
		t.Errorf("dropped %+v without the filter, want zero", d)
	}
	// Unfiltered again, the router forwards what the filter dropped.
	mustDial(t, l.server, families[0].stranger, netip.AddrPortFrom(families[0].client, clients[families[0].name]), families[0].client, families[0].stranger)
}
