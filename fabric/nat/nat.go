// Package nat installs the address translation of ferry's gateway: one
// nftables table (family inet) that the gateway owns whole and rewrites in
// one atomic transaction whenever the set of peer clusters changes.
//
// # Model
//
// The gateway joins this cluster's pod network to those of its peers
// through one tunnel interface. Each peer is known here by the addresses it
// has in this cluster (Peer.Addresses: its pod CIDR, remapped when it
// overlaps ours, and its API server): traffic to them leaves through the
// tunnel, and traffic coming out of the tunnel is the peer's only when its
// source is one of them.
//
// Two translations make overlapping clusters reachable, both 1:1 prefix
// mappings (fabric.Mapping) that keep the host bits, so every pod keeps an
// address of its own on the other side:
//
//   - Ingress, destination NAT in prerouting: a new connection arriving from
//     the tunnel, from one of the peer's addresses, to an address of a
//     mapping's From (how the peer sees this cluster) is sent to the same
//     host in To (the real pod address here).
//   - Egress, source NAT in postrouting: a new connection leaving through
//     the tunnel, to one of the peer's addresses, from an address of a
//     mapping's From (a real pod address) leaves from the same host in To
//     (how the peer knows this cluster).
//
// NAT chains see only the first packet of a connection: conntrack
// translates the rest of it, the replies included, so nothing here matches
// connection state.
//
// A filter chain in the forward hook counts, per peer, what the gateway
// forwards from the peer out of the tunnel (Rx) and to the peer into it (Tx)
// in named counter objects ("rx-<peer>", "tx-<peer>"), and optionally clamps
// the MSS of TCP SYNs crossing the tunnel to the route's MTU.
//
// # Forward filter
//
// With Ruleset.Local set, the same chain is the gateway's forward filter.
// It accepts only
//
//   - from the tunnel, a source among one peer's Addresses to a destination
//     in Local (after ingress NAT: prerouting comes first), and
//   - from the Overlay link (this cluster's nodes), a source in Local to a
//     destination among one peer's Addresses (before egress NAT), into the
//     tunnel.
//
// Both rules are stateless and symmetric, so they pass the replies of
// connections started on either side as well (connection tracking has
// reversed the NAT of a reply where the filter sees it, as for a first
// packet). Whatever else the gateway would forward through the tunnel or
// the Overlay link, or to or from a Local address, is dropped and counted
// in the counter object "forward-dropped" (ReadForwardDropped): a host in
// front of the gateway that routes the pod CIDR through it, a pod's packet
// to anything but a peer, a peer's packet from outside its Addresses (which
// WireGuard's allowed IPs drop before, this is the second line) or to
// anything but Local, and one peer's traffic to another (no transit).
// Drops from one of a peer's Addresses through the tunnel, or to one of
// them into it, are also counted for that peer ("drop-<peer>", Counters).
// The chain's policy stays accept: forwarded traffic that touches none of these
// (neither the tunnel, the Overlay link nor a Local address) is not the
// gateway's and passes, and the hook sees neither the gateway's own traffic
// (WireGuard's UDP, the VXLAN from the nodes, probes, metrics: input and
// output) nor another namespace's.
//
// The translation uses the kernel's NETMAP mode of the nat expression
// (NF_NAT_RANGE_NETMAP, nft's "snat ip prefix to"): the rule gives the
// whole target prefix as the address range and the kernel keeps the host
// bits of the packet's address.
//
// Apply leaves the counters of the peers it keeps alone, so their values
// survive any number of updates, and drops those of the peers it removes.
package nat

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/fabric/netns"
)

// Peer is one remote cluster as this cluster's gateway sees it.
type Peer struct {
	// Name is the peer cluster's ID, a DNS label; it names the peer's
	// counters.
	Name string
	// Addresses are the peer's addresses here (its remapped pod CIDR, its
	// API server /32): traffic to them leaves through the tunnel; traffic
	// from the tunnel is the peer's only when its source is in them.
	Addresses []netip.Prefix
	// Ingress is destination NAT for new connections arriving from the
	// tunnel with a source in Addresses: a destination in From goes to the
	// same host bits in To.
	Ingress []fabric.Mapping
	// Egress is source NAT for new connections leaving through the tunnel
	// to Addresses: a source in From leaves from the same host bits in To.
	Egress []fabric.Mapping
}

// Ruleset is everything ferry's gateway installs: one nftables table it
// owns whole.
type Ruleset struct {
	// Table is the nftables table's name (family inet), such as "ferry".
	Table string
	// Tunnel is the tunnel interface's name, matched with iifname and
	// oifname.
	Tunnel string
	// ClampMSS clamps the MSS option of TCP SYNs (and SYN-ACKs) forwarded
	// through the tunnel, in either direction, to what the route's MTU
	// allows ("rt mtu"). The kernel takes the smaller MTU of the route
	// onwards and of the route back to the sender, so both directions
	// are clamped to the narrower path, usually the tunnel's.
	ClampMSS bool
	// Peers are the remote clusters.
	Peers []Peer
	// Local are this cluster's addresses its peers reach, as they are once
	// ingress NAT has translated them: its pod CIDR and, when a peer's
	// Ingress leads there, its API server. Set, they make the forward chain
	// the gateway's filter (see the package documentation); empty, the
	// chain only counts and clamps.
	Local []netip.Prefix
	// Overlay is the link the cluster's nodes send traffic for the peers in
	// by (the gateway's VXLAN link): with Local, the only one the filter
	// accepts traffic into the tunnel from.
	Overlay string
}

// Counters are what the gateway forwarded for one peer.
type Counters struct {
	// RxPackets and RxBytes count packets forwarded from the tunnel with a
	// source among the peer's addresses (with the forward filter: those it
	// accepts, to a Local address).
	RxPackets, RxBytes uint64
	// TxPackets and TxBytes count packets forwarded into the tunnel to one
	// of the peer's addresses (with the forward filter: those it accepts,
	// from a Local address by the Overlay link).
	TxPackets, TxBytes uint64
	// DroppedPackets and DroppedBytes count what the forward filter
	// dropped from the peer (through the tunnel, not to a Local address)
	// or for it (into the tunnel, not from a Local address by the Overlay
	// link); also counted in "forward-dropped". Zero without the filter.
	DroppedPackets, DroppedBytes uint64
}

// Names of the table's chains and of the peers' counter objects.
const (
	chainPrerouting  = "prerouting"
	chainPostrouting = "postrouting"
	chainForward     = "forward"

	rxPrefix   = "rx-"
	txPrefix   = "tx-"
	dropPrefix = "drop-"
	// forwardDropped counts what the forward filter drops. It starts with
	// none of the prefixes, so no peer's counters take its name.
	forwardDropped = "forward-dropped"
)

// applyAttempts bounds how often Apply reads the table and sends its
// transaction again when the kernel rejects it because the table changed
// in between (another writer).
const applyAttempts = 3

// Apply makes the table rs.Table in ns exactly rs, creating it when absent,
// in one atomic transaction: packets see either the old ruleset or the new
// one. It returns how many rules the table holds. Applying the same
// Ruleset again changes nothing; the counters of peers still present keep
// their values, those of removed peers are deleted, and anything else in
// the table (chains, sets, objects ferry did not ask for) goes.
func Apply(ns *netns.Namespace, rs Ruleset) (rules int, err error) {
	return apply(ns, rs, nil)
}

// apply is Apply with a hook that tests use to add to the transaction just
// before it is sent.
func apply(ns *netns.Namespace, rs Ruleset, hook func(*nftables.Conn, *nftables.Table)) (int, error) {
	if ns == nil {
		return 0, errors.New("nat: apply: no network namespace")
	}
	if err := rs.Validate(); err != nil {
		return 0, fmt.Errorf("nat: apply: %w", err)
	}
	c, err := open(ns, nftables.AsLasting())
	if err != nil {
		return 0, fmt.Errorf("nat: apply table %s in %s: open nftables: %w", rs.Table, ns, err)
	}
	defer func() { _ = c.CloseLasting() }()
	for attempt := 1; ; attempt++ {
		n, err := applyOnce(c, rs, hook)
		if err == nil {
			return n, nil
		}
		if attempt == applyAttempts || !changedMeanwhile(err) {
			return 0, fmt.Errorf("nat: apply table %s in %s: %w", rs.Table, ns, err)
		}
	}
}

// changedMeanwhile reports whether err is what the kernel answers to a
// transaction built for a table that changed since it was read.
func changedMeanwhile(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.EBUSY)
}

// applyOnce reads what the table holds and sends one transaction that
// turns it into rs.
func applyOnce(c *nftables.Conn, rs Ruleset, hook func(*nftables.Conn, *nftables.Table)) (int, error) {
	table := &nftables.Table{Name: rs.Table, Family: nftables.TableFamilyINet}
	cur, err := readTable(c, table)
	if err != nil {
		return 0, err
	}
	want := buildChains(table)
	wantCounters := map[string]bool{}
	for _, p := range rs.Peers {
		wantCounters[rxPrefix+p.Name] = true
		wantCounters[txPrefix+p.Name] = true
	}
	if rs.filters() {
		wantCounters[forwardDropped] = true
		for _, p := range rs.Peers {
			wantCounters[dropPrefix+p.Name] = true
		}
	}

	// Creating an existing table is a no-op; flushing it deletes every
	// rule, which releases the chains, sets and objects they use.
	c.AddTable(table)
	keptCounters := map[string]bool{}
	if cur.exists {
		c.FlushTable(table)
		for _, s := range cur.sets {
			if !s.Anonymous { // anonymous sets go with their rules
				c.DelSet(s)
			}
		}
		for _, f := range cur.flowtables {
			c.DelFlowtable(f)
		}
		for _, o := range cur.objects {
			named, ok := o.(*nftables.NamedObj)
			if ok && named.Type == nftables.ObjTypeCounter && wantCounters[named.Name] {
				keptCounters[named.Name] = true
				continue
			}
			c.DeleteObject(o)
		}
		for _, ch := range cur.chains {
			if w, ok := want[ch.Name]; ok && sameHook(ch, w) {
				continue // kept: its rules are flushed, its policy updated
			}
			c.DelChain(ch)
		}
	}
	for _, name := range []string{chainPrerouting, chainPostrouting, chainForward} {
		c.AddChain(want[name])
	}
	for _, name := range slices.Sorted(maps.Keys(wantCounters)) {
		if !keptCounters[name] {
			c.AddObj(&nftables.NamedObj{Table: table, Name: name, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
		}
	}
	rules := buildRules(rs, want)
	for _, r := range rules {
		c.AddRule(r)
	}
	if hook != nil {
		hook(c, table)
	}
	if err := c.Flush(); err != nil {
		return 0, err
	}
	return len(rules), nil
}

// tableState is what a table holds, as far as Apply cares.
type tableState struct {
	exists     bool
	chains     []*nftables.Chain
	sets       []*nftables.Set
	flowtables []*nftables.Flowtable
	objects    []nftables.Obj
}

// readTable lists what table holds; a missing table is no error.
func readTable(c *nftables.Conn, table *nftables.Table) (tableState, error) {
	var st tableState
	if _, err := c.ListTableOfFamily(table.Name, table.Family); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return st, nil
		}
		return st, fmt.Errorf("read the table: %w", err)
	}
	st.exists = true
	chains, err := c.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return st, fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table != nil && ch.Table.Name == table.Name {
			ch.Table = table
			st.chains = append(st.chains, ch)
		}
	}
	if st.sets, err = c.GetSets(table); err != nil {
		return st, fmt.Errorf("list sets: %w", err)
	}
	if st.flowtables, err = c.ListFlowtables(table); err != nil {
		return st, fmt.Errorf("list flowtables: %w", err)
	}
	if st.objects, err = namedObjects(c, table); err != nil {
		return st, fmt.Errorf("list objects: %w", err)
	}
	return st, nil
}

// namedObjects lists the stateful objects of table. google/nftables
// v0.3.0 panics on an object type it cannot parse (such as a tunnel
// object): that is an error here, not a crash of the gateway.
func namedObjects(c *nftables.Conn, table *nftables.Table) (objs []nftables.Obj, err error) {
	defer func() {
		if r := recover(); r != nil {
			objs, err = nil, fmt.Errorf("an object of a type google/nftables cannot parse: %v", r)
		}
	}()
	return c.GetNamedObjects(table)
}

// buildChains returns the table's base chains by name.
func buildChains(table *nftables.Table) map[string]*nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return map[string]*nftables.Chain{
		chainPrerouting: {
			Name: chainPrerouting, Table: table, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept,
		},
		chainPostrouting: {
			Name: chainPostrouting, Table: table, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept,
		},
		chainForward: {
			Name: chainForward, Table: table, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept,
		},
	}
}

// sameHook reports whether the existing chain have is the base chain want:
// same type, hook and priority, which the kernel cannot change in place.
func sameHook(have, want *nftables.Chain) bool {
	return have.Type == want.Type &&
		have.Hooknum != nil && *have.Hooknum == *want.Hooknum &&
		have.Priority != nil && *have.Priority == *want.Priority
}

// open connects to nftables in ns: through a socket made there by entering
// it (setns, which needs CAP_SYS_ADMIN) only when ns is not the process's
// own namespace.
func open(ns *netns.Namespace, opts ...nftables.ConnOption) (*nftables.Conn, error) {
	fd, err := ns.SocketFd()
	if err != nil {
		return nil, err
	}
	if fd != 0 {
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	return nftables.New(opts...)
}

// Remove deletes the table from ns, with everything in it. A missing table
// is no error.
func Remove(ns *netns.Namespace, table string) error {
	if ns == nil {
		return errors.New("nat: remove: no network namespace")
	}
	if table == "" {
		return errors.New("nat: remove: table is empty")
	}
	c, err := open(ns)
	if err != nil {
		return fmt.Errorf("nat: remove table %s in %s: open nftables: %w", table, ns, err)
	}
	c.DelTable(&nftables.Table{Name: table, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nat: remove table %s in %s: %w", table, ns, err)
	}
	return nil
}

// ReadCounters returns the counters of the peers in the table, by peer
// name. A missing table is an error that matches fs.ErrNotExist (and
// unix.ENOENT).
func ReadCounters(ns *netns.Namespace, table string) (map[string]Counters, error) {
	counters, err := readCounterObjects(ns, table)
	if err != nil {
		return nil, err
	}
	out := map[string]Counters{}
	for name, cnt := range counters {
		switch {
		case strings.HasPrefix(name, rxPrefix):
			peer := strings.TrimPrefix(name, rxPrefix)
			v := out[peer]
			v.RxPackets, v.RxBytes = cnt.Packets, cnt.Bytes
			out[peer] = v
		case strings.HasPrefix(name, txPrefix):
			peer := strings.TrimPrefix(name, txPrefix)
			v := out[peer]
			v.TxPackets, v.TxBytes = cnt.Packets, cnt.Bytes
			out[peer] = v
		case strings.HasPrefix(name, dropPrefix):
			peer := strings.TrimPrefix(name, dropPrefix)
			v := out[peer]
			v.DroppedPackets, v.DroppedBytes = cnt.Packets, cnt.Bytes
			out[peer] = v
		}
	}
	return out, nil
}

// Dropped is what the forward filter dropped.
type Dropped struct {
	Packets, Bytes uint64
}

// ReadForwardDropped returns what the table's forward filter has dropped
// (see Ruleset.Local); zero when the table does not filter. A missing
// table is an error that matches fs.ErrNotExist (and unix.ENOENT).
func ReadForwardDropped(ns *netns.Namespace, table string) (Dropped, error) {
	counters, err := readCounterObjects(ns, table)
	if err != nil {
		return Dropped{}, err
	}
	c, ok := counters[forwardDropped]
	if !ok {
		return Dropped{}, nil
	}
	return Dropped{Packets: c.Packets, Bytes: c.Bytes}, nil
}

// readCounterObjects returns the table's counter objects by name.
func readCounterObjects(ns *netns.Namespace, table string) (map[string]*expr.Counter, error) {
	if ns == nil {
		return nil, errors.New("nat: read counters: no network namespace")
	}
	c, err := open(ns, nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nat: read counters of table %s in %s: open nftables: %w", table, ns, err)
	}
	defer func() { _ = c.CloseLasting() }()
	t := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	if _, err := c.ListTableOfFamily(table, t.Family); err != nil {
		return nil, fmt.Errorf("nat: read counters of table %s in %s: %w", table, ns, err)
	}
	objs, err := namedObjects(c, t)
	if err != nil {
		return nil, fmt.Errorf("nat: read counters of table %s in %s: %w", table, ns, err)
	}
	out := map[string]*expr.Counter{}
	for _, o := range objs {
		named, ok := o.(*nftables.NamedObj)
		if !ok || named.Type != nftables.ObjTypeCounter {
			continue
		}
		if cnt, ok := named.Obj.(*expr.Counter); ok {
			out[named.Name] = cnt
		}
	}
	return out, nil
}
