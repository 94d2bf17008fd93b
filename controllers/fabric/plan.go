package fabric

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/fabric/ipam"
)

// Holder keys of the IPAM: this cluster's external CIDR, and per peer the
// range standing for its pods and the address standing for its API server.
const (
	keyExternal      = "external"
	keyPodsPrefix    = "pods/"
	keyAPIServerPref = "apiserver/"
)

func podsKey(id ferryv1alpha1.ClusterID) string      { return keyPodsPrefix + string(id) }
func apiServerKey(id ferryv1alpha1.ClusterID) string { return keyAPIServerPref + string(id) }

// namedRange is a network of this cluster, named for error messages.
type namedRange struct {
	name   string
	prefix netip.Prefix
}

// localNetwork is what this cluster knows of its own network.
type localNetwork struct {
	// clusterID spreads the external CIDRs of clusters sharing a pool (see
	// preferredExternal); "" takes the pool's first free range.
	clusterID   ferryv1alpha1.ClusterID
	podCIDR     netip.Prefix
	serviceCIDR netip.Prefix // invalid when unknown
	nodeIPs     []netip.Addr
	reserved    []netip.Prefix
}

// ranges lists the networks no peer may be mapped onto.
func (l localNetwork) ranges() []namedRange {
	out := []namedRange{{"this cluster's pod CIDR", l.podCIDR}}
	if l.serviceCIDR.IsValid() {
		out = append(out, namedRange{"this cluster's service CIDR", l.serviceCIDR})
	}
	for _, ip := range l.nodeIPs {
		out = append(out, namedRange{"a node address of this cluster", netip.PrefixFrom(ip, ip.BitLen())})
	}
	for _, r := range l.reserved {
		out = append(out, namedRange{"--ipam-reserved " + r.String(), r})
	}
	return out
}

// peerNetwork is what a peer says of its network.
type peerNetwork struct {
	id           ferryv1alpha1.ClusterID
	podCIDR      netip.Prefix
	externalCIDR netip.Prefix // invalid when the peer has none
	apiServer    netip.Addr   // invalid when the peer has none
}

// peerMapping is where this cluster puts one peer.
type peerMapping struct {
	podCIDR   netip.Prefix // the peer's pods, as this cluster sees them
	apiServer netip.Addr   // the peer's API server, as this cluster sees it
	// why says, for the Remapped condition, why podCIDR is what it is.
	why string
	err error
}

// planResult is the IPAM's answer for the whole cluster.
type planResult struct {
	external    netip.Prefix
	externalErr error
	peers       map[ferryv1alpha1.ClusterID]peerMapping
	holders     map[string]netip.Prefix
}

// errPoolConfig marks a pool that cannot be used at all (it overlaps a
// network of this cluster).
var errPoolConfig = errors.New("pool overlaps a network of this cluster")

// plan maps every peer, keeping what stored says where it is still valid,
// so that restarts and new peers never move an existing mapping. A peer
// whose pod CIDR is free here keeps it; else its external CIDR when that is
// free; else a range of the pool. It is a pure function of its inputs.
func plan(stored map[string]netip.Prefix, local localNetwork, peers []peerNetwork, pool []netip.Prefix) (planResult, error) {
	res := planResult{peers: map[ferryv1alpha1.ClusterID]peerMapping{}}
	ranges := local.ranges()
	reserved := make([]netip.Prefix, 0, len(ranges))
	for _, r := range ranges {
		reserved = append(reserved, r.prefix)
	}
	for _, p := range pool {
		for _, r := range ranges {
			if fabric.Overlaps(p, r.prefix) {
				return res, fmt.Errorf("--ipam-pool %s overlaps %s (%s): %w", p, r.name, r.prefix, errPoolConfig)
			}
		}
	}
	a, err := ipam.New(pool, reserved)
	if err != nil {
		return res, fmt.Errorf("--ipam-pool: %w", err)
	}
	inPool := func(p netip.Prefix) bool {
		return slices.ContainsFunc(pool, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) })
	}
	byID := map[ferryv1alpha1.ClusterID]peerNetwork{}
	for _, p := range peers {
		byID[p.id] = p
	}
	// Restore what is stored and still means the same: the external CIDR
	// of the pod CIDR's size, a peer's own CIDR or external CIDR, or a pool
	// range of the right size. Anything else is dropped and redone below.
	keys := make([]string, 0, len(stored))
	for k := range stored {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		// The external CIDR first: peers adapt to it, never the reverse.
		if (x == keyExternal) != (y == keyExternal) {
			if x == keyExternal {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	for _, k := range keys {
		p := stored[k]
		valid := false
		switch {
		case k == keyExternal:
			valid = p.Bits() == local.podCIDR.Bits() && inPool(p)
		case strings.HasPrefix(k, keyPodsPrefix):
			peer, ok := byID[ferryv1alpha1.ClusterID(strings.TrimPrefix(k, keyPodsPrefix))]
			valid = ok && p.Bits() == peer.podCIDR.Bits() && (p == peer.podCIDR || p == peer.externalCIDR || inPool(p))
		case strings.HasPrefix(k, keyAPIServerPref):
			peer, ok := byID[ferryv1alpha1.ClusterID(strings.TrimPrefix(k, keyAPIServerPref))]
			valid = ok && peer.apiServer.IsValid() && p.IsSingleIP() && (p.Addr() == peer.apiServer || inPool(p))
		}
		// An entry not taken back (no longer valid, or now overlapping a
		// network of this cluster) is released, and redone below.
		if valid {
			_ = a.Take(k, p)
		}
	}

	if _, ok := a.Held(keyExternal); !ok {
		var err error
		preferred, ok := preferredExternal(local.clusterID, pool, local.podCIDR.Bits())
		if !ok || a.Take(keyExternal, preferred) != nil {
			_, err = a.Allocate(keyExternal, local.podCIDR.Bits())
		}
		if err != nil {
			res.externalErr = fmt.Errorf("external CIDR (a /%d like the pod CIDR) from --ipam-pool: %w", local.podCIDR.Bits(), err)
		}
	}
	res.external, _ = a.Held(keyExternal)

	ids := make([]ferryv1alpha1.ClusterID, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Pod ranges first, then API server addresses: the single addresses
	// pack together instead of splitting the pool between ranges.
	for _, id := range ids {
		peer := byID[id]
		m := peerMapping{}
		key := podsKey(id)
		if held, ok := a.Held(key); ok {
			m.podCIDR = held
		} else if err := a.Take(key, peer.podCIDR); err == nil {
			m.podCIDR = peer.podCIDR
		} else {
			overlap := err
			if peer.externalCIDR.IsValid() && peer.externalCIDR.Bits() == peer.podCIDR.Bits() && a.Take(key, peer.externalCIDR) == nil {
				m.podCIDR = peer.externalCIDR
			} else if got, err := a.Allocate(key, peer.podCIDR.Bits()); err == nil {
				m.podCIDR = got
			} else {
				m.err = fmt.Errorf("the peer's pod CIDR %s overlaps a network of this cluster (%v) and --ipam-pool has no free range of its size: %w", peer.podCIDR, overlap, err)
			}
		}
		if m.err == nil {
			m.why = describe(peer, m.podCIDR, ranges, a.Allocations(), key)
		}
		res.peers[id] = m
	}
	for _, id := range ids {
		peer, m := byID[id], res.peers[id]
		if !peer.apiServer.IsValid() {
			continue
		}
		key := apiServerKey(id)
		single := netip.PrefixFrom(peer.apiServer, peer.apiServer.BitLen())
		if held, ok := a.Held(key); ok {
			m.apiServer = held.Addr()
		} else if a.Take(key, single) == nil {
			m.apiServer = peer.apiServer
		} else if got, err := a.Allocate(key, peer.apiServer.BitLen()); err == nil {
			m.apiServer = got.Addr()
		} else if m.err == nil {
			m.err = fmt.Errorf("the peer's API server address %s overlaps a network of this cluster and --ipam-pool has no free address: %w", peer.apiServer, err)
		}
		res.peers[id] = m
	}
	res.holders = a.Allocations()
	return res, nil
}

// preferredExternal is where this cluster's external CIDR goes when that is
// free: a block of the first pool entry that holds one, picked by a hash of
// the cluster ID. Clusters sharing the default pool then rarely pick the
// same external CIDR, so a peer can usually see a cluster's pods at it
// (rather than at a second remap), which keeps the data plane to one
// translation. IPv4 only; ok is false without a cluster ID.
func preferredExternal(id ferryv1alpha1.ClusterID, pool []netip.Prefix, bits int) (netip.Prefix, bool) {
	if id == "" {
		return netip.Prefix{}, false
	}
	for _, q := range pool {
		if !q.Addr().Is4() || bits < q.Bits() || bits > 32 {
			continue
		}
		blocks := uint64(1) << min(bits-q.Bits(), 32)
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		idx := uint64(h.Sum32()) % blocks
		base := q.Addr().As4()
		n := uint64(base[0])<<24 | uint64(base[1])<<16 | uint64(base[2])<<8 | uint64(base[3])
		n += idx << (32 - bits)
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), bits), true
	}
	return netip.Prefix{}, false
}

// describe says why a peer's pods appear at got.
func describe(peer peerNetwork, got netip.Prefix, ranges []namedRange, holders map[string]netip.Prefix, self string) string {
	if got == peer.podCIDR {
		return fmt.Sprintf("the peer's pods keep their addresses (%s): no network of this cluster overlaps it", got)
	}
	what := "a range already in use here"
	for _, r := range ranges {
		if fabric.Overlaps(r.prefix, peer.podCIDR) {
			what = fmt.Sprintf("%s %s", r.name, r.prefix)
			break
		}
	}
	if what == "a range already in use here" {
		for k, h := range holders {
			if k != self && fabric.Overlaps(h, peer.podCIDR) {
				what = fmt.Sprintf("%s (held by %s)", h, k)
				break
			}
		}
	}
	from := "a range of the pool"
	if got == peer.externalCIDR {
		from = "the peer's external CIDR"
	}
	return fmt.Sprintf("the peer's pods %s appear here as %s (%s): %s overlaps %s", peer.podCIDR, got, from, peer.podCIDR, what)
}
