// Package ipam hands out address ranges from a pool so that no two holders,
// and no reserved (local) range, ever share an address. It is pure: the
// caller persists Allocations() and restores them after a restart.
//
// Restoring is Take, key by key, in an order of the caller's choosing: Take
// gives a key exactly the range it asks for, or says what is in the way.
package ipam

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// ErrPoolExhausted is wrapped by the error of Allocate when no range of the
// asked size is free in the pool, such as
//
//	no free /16 in pool 10.64.0.0/11: pool exhausted
var ErrPoolExhausted = errors.New("pool exhausted")

// Allocator hands out prefixes to holders, named by non-empty keys. It knows
// the pool (the ranges Allocate hands out), the reserved prefixes (never
// handed out, never taken) and, for each key, the one prefix it holds.
//
// Holders never overlap each other nor a reserved prefix. An Allocator is
// not safe for concurrent use. The zero Allocator has an empty pool and
// nothing reserved; New makes one with a pool.
type Allocator struct {
	// pool is in the caller's order, which is Allocate's order.
	pool []netip.Prefix
	// reserved is sorted, without the prefixes nested in another one, so
	// its entries are disjoint.
	reserved []span
	// holders is sorted and, by construction, disjoint.
	holders []span
	// busy is the union of reserved and holders as sorted runs of
	// addresses, neither overlapping nor adjacent: what Allocate skips.
	busy []interval
	// held is holders by key.
	held map[string]netip.Prefix
}

// New returns an Allocator handing out ranges of pool and never any address
// of reserved. Every prefix must be valid and masked (no host bits set).
// Pool entries must not overlap each other, nor any reserved prefix;
// reserved prefixes may overlap each other. The slices are copied.
func New(pool, reserved []netip.Prefix) (*Allocator, error) {
	for _, list := range []struct {
		name     string
		prefixes []netip.Prefix
	}{{"pool", pool}, {"reserved", reserved}} {
		for i, p := range list.prefixes {
			if err := checkPrefix(p); err != nil {
				return nil, fmt.Errorf("%s entry %d: %w", list.name, i, err)
			}
		}
	}
	for i, p := range pool {
		for _, q := range pool[i+1:] {
			if p.Overlaps(q) {
				return nil, fmt.Errorf("pool %s overlaps pool %s", p, q)
			}
		}
		for _, r := range reserved {
			if p.Overlaps(r) {
				return nil, fmt.Errorf("pool %s overlaps reserved %s", p, r)
			}
		}
	}
	a := &Allocator{pool: slices.Clone(pool), held: map[string]netip.Prefix{}}
	rs := make([]span, 0, len(reserved))
	for _, r := range reserved {
		rs = append(rs, spanOf(r, ""))
	}
	// Two prefixes are nested or disjoint. Sorted by first address, the
	// larger first, nested ones follow what contains them and are dropped.
	slices.SortFunc(rs, func(x, y span) int {
		if c := x.compare(y.interval); c != 0 {
			return c
		}
		return x.prefix.Bits() - y.prefix.Bits()
	})
	for _, r := range rs {
		if n := len(a.reserved); n > 0 && a.reserved[n-1].contains(r.interval) {
			continue
		}
		a.reserved = append(a.reserved, r)
		a.markBusy(r.interval)
	}
	return a, nil
}

// checkPrefix reports why p cannot be held or be part of the pool.
func checkPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return errors.New("invalid prefix")
	}
	if m := p.Masked(); m != p {
		return fmt.Errorf("%s has host bits set (the network is %s)", p, m)
	}
	return nil
}

// Take gives key exactly p when p overlaps no reserved prefix and no prefix
// held by another key. p may lie outside the pool: a peer keeping its own
// CIDR. A key holds one prefix: on success p replaces what key held before;
// on failure key keeps it. The error says what p overlaps: the reserved
// prefix, or the prefix held by another key.
func (a *Allocator) Take(key string, p netip.Prefix) error {
	if key == "" {
		return fmt.Errorf("take %s: empty key", p)
	}
	if err := checkPrefix(p); err != nil {
		return fmt.Errorf("take for %s: %w", key, err)
	}
	s := spanOf(p, key)
	if r, ok := firstOverlap(a.reserved, s.interval, ""); ok {
		return fmt.Errorf("%s overlaps reserved %s", p, r.prefix)
	}
	if h, ok := firstOverlap(a.holders, s.interval, key); ok {
		return fmt.Errorf("%s overlaps %s (held by %s)", p, h.prefix, h.key)
	}
	a.hold(s)
	return nil
}

// Allocate gives key the first free prefix of length bits inside the pool:
// the pool entries in their order, then addresses in ascending order. It
// replaces what key held; the range key held counts as free. When key
// already holds a prefix of that length inside the pool, Allocate returns it
// unchanged.
//
// Only pool entries that can hold a /bits (of a length at most bits, in a
// family where /bits exists) are searched; when there is none, Allocate
// fails. When none of them has room, the error wraps ErrPoolExhausted, as it
// does for an empty pool. On failure key keeps what it held.
//
// Allocate takes time in the number of separate busy runs (reserved and
// held ranges, merged when adjacent) of the pool entries it searches, never
// in the number of addresses.
func (a *Allocator) Allocate(key string, bits int) (netip.Prefix, error) {
	if key == "" {
		return netip.Prefix{}, fmt.Errorf("allocate a /%d: empty key", bits)
	}
	if len(a.pool) == 0 {
		return netip.Prefix{}, fmt.Errorf("no free /%d: the pool is empty: %w", bits, ErrPoolExhausted)
	}
	var usable []netip.Prefix
	maxLen := 0
	for _, q := range a.pool {
		maxLen = max(maxLen, q.Addr().BitLen())
		if q.Bits() <= bits && bits <= q.Addr().BitLen() {
			usable = append(usable, q)
		}
	}
	if len(usable) == 0 {
		if bits < 0 || bits > maxLen {
			return netip.Prefix{}, fmt.Errorf("allocate a /%d: not a prefix length of pool %s", bits, join(a.pool))
		}
		return netip.Prefix{}, fmt.Errorf("allocate a /%d: no entry of pool %s is that large", bits, join(a.pool))
	}
	old, had := a.held[key]
	if had && old.Bits() == bits {
		for _, q := range usable {
			if q.Contains(old.Addr()) {
				return old, nil
			}
		}
	}
	// What key holds is free for it: release it, and give it back if
	// nothing else is found (nothing changed, so it is still free).
	a.Release(key)
	for _, q := range usable {
		if p, ok := a.firstFree(q, bits); ok {
			a.hold(spanOf(p, key))
			return p, nil
		}
	}
	if had {
		a.hold(spanOf(old, key))
	}
	return netip.Prefix{}, fmt.Errorf("no free /%d in pool %s: %w", bits, join(usable), ErrPoolExhausted)
}

// firstFree returns the first prefix of length bits in q overlapping no busy
// run.
//
// It steps through the candidates of q in address order. When a candidate
// overlaps a busy run, the next candidate is the first one after the run's
// end: the runs before it are never looked at again, so a search walks each
// busy run of q at most once.
func (a *Allocator) firstFree(q netip.Prefix, bits int) (netip.Prefix, bool) {
	whole := intervalOf(q)
	host := hostMask(q.Addr().BitLen() - bits)
	i := searchFrom(a.busy, whole.is6, whole.first)
	for cur := whole.first; ; {
		cand := interval{is6: whole.is6, first: cur, last: cur.or(host)}
		for i < len(a.busy) && a.busy[i].is6 == cand.is6 && a.busy[i].last.less(cand.first) {
			i++
		}
		if i == len(a.busy) || !cand.overlaps(a.busy[i]) {
			return netip.PrefixFrom(cand.first.addr(cand.is6), bits), true
		}
		// The candidate after the one holding the run's end: aligned,
		// past the run.
		next, carry := a.busy[i].last.or(host).add1()
		if carry || whole.last.less(next) {
			return netip.Prefix{}, false
		}
		cur = next
	}
}

// Release frees what key holds. It does nothing when key holds nothing.
func (a *Allocator) Release(key string) {
	p, ok := a.held[key]
	if !ok {
		return
	}
	s := spanOf(p, key)
	if i, found := slices.BinarySearchFunc(a.holders, s.interval, span.compareTo); found {
		a.holders = slices.Delete(a.holders, i, i+1)
	}
	a.markFree(s.interval)
	delete(a.held, key)
}

// Held returns the prefix key holds, and false when it holds none.
func (a *Allocator) Held(key string) (netip.Prefix, bool) {
	p, ok := a.held[key]
	return p, ok
}

// Allocations returns a copy of what every key holds: key -> prefix. It is
// what the caller persists, to Take back after a restart.
func (a *Allocator) Allocations() map[string]netip.Prefix {
	out := make(map[string]netip.Prefix, len(a.held))
	maps.Copy(out, a.held)
	return out
}

// Free reports whether p overlaps no reserved prefix and no held prefix,
// except the one held by the key except ("" for none). An invalid p is not
// free; host bits of p are ignored.
func (a *Allocator) Free(p netip.Prefix, except string) bool {
	if !p.IsValid() {
		return false
	}
	x := intervalOf(p.Masked())
	if _, ok := firstOverlap(a.reserved, x, ""); ok {
		return false
	}
	_, ok := firstOverlap(a.holders, x, except)
	return !ok
}

// hold records s as what s.key holds, replacing what it held. s must
// overlap no other holder and nothing reserved.
func (a *Allocator) hold(s span) {
	a.Release(s.key)
	i, _ := slices.BinarySearchFunc(a.holders, s.interval, span.compareTo)
	a.holders = slices.Insert(a.holders, i, s)
	a.markBusy(s.interval)
	if a.held == nil {
		a.held = map[string]netip.Prefix{}
	}
	a.held[s.key] = s.prefix
}

// markBusy adds x, which overlaps no busy run, to the busy runs, merging it
// with the runs it touches.
func (a *Allocator) markBusy(x interval) {
	i, _ := slices.BinarySearchFunc(a.busy, x, interval.compare)
	left := i > 0 && a.busy[i-1].touches(x)
	right := i < len(a.busy) && x.touches(a.busy[i])
	switch {
	case left && right:
		a.busy[i-1].last = a.busy[i].last
		a.busy = slices.Delete(a.busy, i, i+1)
	case left:
		a.busy[i-1].last = x.last
	case right:
		a.busy[i].first = x.first
	default:
		a.busy = slices.Insert(a.busy, i, x)
	}
}

// markFree removes x, which lies in one busy run, from the busy runs. What
// is left of the run is still busy: the reserved and held ranges making up
// a run are disjoint, so x was the only one covering its addresses.
func (a *Allocator) markFree(x interval) {
	i := searchFrom(a.busy, x.is6, x.first)
	if i == len(a.busy) || !a.busy[i].contains(x) {
		return // not busy: cannot happen while the invariants hold
	}
	run := a.busy[i]
	var rest []interval
	if run.first.less(x.first) {
		rest = append(rest, interval{is6: run.is6, first: run.first, last: x.first.sub1()})
	}
	if x.last.less(run.last) {
		after, _ := x.last.add1()
		rest = append(rest, interval{is6: run.is6, first: after, last: run.last})
	}
	a.busy = slices.Replace(a.busy, i, i+1, rest...)
}

// join lists prefixes for an error message.
func join(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// interval is a range of addresses [first, last] of one family, as numbers.
type interval struct {
	is6         bool
	first, last u128
}

// intervalOf returns the addresses of the masked prefix p.
func intervalOf(p netip.Prefix) interval {
	first := addrValue(p.Addr())
	return interval{
		is6:   p.Addr().Is6(),
		first: first,
		last:  first.or(hostMask(p.Addr().BitLen() - p.Bits())),
	}
}

// bounds returns x itself: what searchFrom needs of a list's elements.
func (x interval) bounds() interval { return x }

// compare orders intervals by family (IPv4 first), then first address.
func (x interval) compare(y interval) int {
	if x.is6 != y.is6 {
		if x.is6 {
			return 1
		}
		return -1
	}
	return x.first.compare(y.first)
}

// overlaps reports whether x and y share an address.
func (x interval) overlaps(y interval) bool {
	return x.is6 == y.is6 && !x.last.less(y.first) && !y.last.less(x.first)
}

// contains reports whether every address of y is in x.
func (x interval) contains(y interval) bool {
	return x.is6 == y.is6 && !y.first.less(x.first) && !x.last.less(y.last)
}

// touches reports whether y starts right after x ends.
func (x interval) touches(y interval) bool {
	next, carry := x.last.add1()
	return x.is6 == y.is6 && !carry && next == y.first
}

// span is a reserved or held prefix, with its addresses.
type span struct {
	interval
	prefix netip.Prefix
	key    string // the holder, for holders
}

// spanOf returns the span of the masked prefix p, held by key.
func spanOf(p netip.Prefix, key string) span {
	return span{interval: intervalOf(p), prefix: p, key: key}
}

// compareTo orders spans like intervals, for binary searches.
func (s span) compareTo(x interval) int { return s.compare(x) }

// searchFrom returns the index of the first element of family is6 in the
// sorted list of disjoint intervals that ends at or after v (len(list), or
// an element of another family, when there is none).
func searchFrom[T interface{ bounds() interval }](list []T, is6 bool, v u128) int {
	lo, hi := 0, len(list)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		x := list[m].bounds()
		if x.is6 == is6 && x.last.less(v) || !x.is6 && is6 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// firstOverlap returns the lowest span of the sorted, disjoint list that
// overlaps x, ignoring the one held by except when except is not "".
func firstOverlap(list []span, x interval, except string) (span, bool) {
	for i := searchFrom(list, x.is6, x.first); i < len(list) && list[i].is6 == x.is6 && !x.last.less(list[i].first); i++ {
		if except == "" || list[i].key != except {
			return list[i], true
		}
	}
	return span{}, false
}

// u128 is an unsigned 128-bit number: an address of either family, from its
// 16-byte form (an IPv4 address a.b.c.d is ::ffff:a.b.c.d).
type u128 struct{ hi, lo uint64 }

// addrValue returns a as a number.
func addrValue(a netip.Addr) u128 {
	b := a.As16()
	var v u128
	for _, x := range b[:8] {
		v.hi = v.hi<<8 | uint64(x)
	}
	for _, x := range b[8:] {
		v.lo = v.lo<<8 | uint64(x)
	}
	return v
}

// addr returns v as an address: IPv6 when is6, else IPv4.
func (v u128) addr(is6 bool) netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(v.hi >> (56 - 8*i))
		b[8+i] = byte(v.lo >> (56 - 8*i))
	}
	a := netip.AddrFrom16(b)
	if !is6 {
		return a.Unmap()
	}
	return a
}

// hostMask returns the number whose n low bits are set, 0 <= n <= 128.
func hostMask(n int) u128 {
	switch {
	case n <= 0:
		return u128{}
	case n < 64:
		return u128{lo: 1<<n - 1}
	case n < 128:
		return u128{hi: 1<<(n-64) - 1, lo: ^uint64(0)}
	default:
		return u128{hi: ^uint64(0), lo: ^uint64(0)}
	}
}

func (v u128) or(w u128) u128 { return u128{v.hi | w.hi, v.lo | w.lo} }

func (v u128) less(w u128) bool { return v.hi < w.hi || v.hi == w.hi && v.lo < w.lo }

func (v u128) compare(w u128) int {
	switch {
	case v.less(w):
		return -1
	case w.less(v):
		return 1
	}
	return 0
}

// add1 returns v+1, and whether it wrapped around past the last number.
func (v u128) add1() (u128, bool) {
	v.lo++
	if v.lo != 0 {
		return v, false
	}
	v.hi++
	return v, v.hi == 0
}

// sub1 returns v-1; v must not be zero.
func (v u128) sub1() u128 {
	if v.lo == 0 {
		v.hi--
	}
	v.lo--
	return v
}
