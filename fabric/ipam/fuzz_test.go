package ipam

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"testing"
)

// fuzzInput reads the fuzz bytes, yielding zeros once they run out.
type fuzzInput []byte

func (in *fuzzInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// intn returns a number in [0, n).
func (in *fuzzInput) intn(n int) int { return int(in.byte()) % n }

// space is where a fuzz run's prefixes live: a 32-bit number space, its
// top 16 bits fixed, placed in IPv4 or at one of three places of IPv6 (its
// low bits, across the 64-bit boundary, or its top bits, where 255.255.x.y
// reaches the end of the IPv6 address space).
type space struct {
	top   uint32 // the fixed top 16 bits, in place
	shift int    // where the 32 bits sit in an IPv6 address; -1 for IPv4
}

// prefix returns the prefix of length bits (counted in the 32-bit space)
// starting at the space's number low (its low 16 bits), masked.
func (s space) prefix(low uint16, bits int) netip.Prefix {
	v := s.top | uint32(low)
	if s.shift < 0 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits).Masked()
	}
	x := new(big.Int).Lsh(big.NewInt(int64(v)), uint(s.shift))
	if s.shift < 96 {
		x.Or(x, new(big.Int).Lsh(big.NewInt(0xfd00), 112))
	}
	return netip.PrefixFrom(fromBig(x, true), bits+96-s.shift).Masked()
}

// length converts a prefix length of the 32-bit space to the real one.
func (s space) length(bits int) int {
	if s.shift < 0 {
		return bits
	}
	return bits + 96 - s.shift
}

func toBig(a netip.Addr) *big.Int {
	b := a.As16()
	if a.Is4() {
		return new(big.Int).SetBytes(b[12:])
	}
	return new(big.Int).SetBytes(b[:])
}

func fromBig(x *big.Int, is6 bool) netip.Addr {
	var b [16]byte
	x.FillBytes(b[:])
	if !is6 {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

// model is what the fuzz test expects of the Allocator, computed the slow
// and obvious way.
type model struct {
	pool, reserved []netip.Prefix
	held           map[string]netip.Prefix
}

// free reports whether p overlaps nothing reserved and nothing held but by
// except.
func (m *model) free(p netip.Prefix, except string) bool {
	for _, r := range m.reserved {
		if r.Overlaps(p) {
			return false
		}
	}
	for k, h := range m.held {
		if k != except && h.Overlaps(p) {
			return false
		}
	}
	return true
}

// inPool reports whether a pool entry contains p.
func (m *model) inPool(p netip.Prefix) bool {
	for _, q := range m.pool {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// usable returns the pool entries that can hold a /bits.
func (m *model) usable(bits int) []netip.Prefix {
	var out []netip.Prefix
	for _, q := range m.pool {
		if q.Bits() <= bits && bits <= q.Addr().BitLen() {
			out = append(out, q)
		}
	}
	return out
}

// firstFit returns what Allocate(key, bits) must give, trying candidates one
// by one; known is false when there are too many to try.
func (m *model) firstFit(key string, bits int) (p netip.Prefix, found, known bool) {
	usable := m.usable(bits)
	if h, ok := m.held[key]; ok && h.Bits() == bits {
		for _, q := range usable {
			if q.Contains(h.Addr()) {
				return h, true, true
			}
		}
	}
	budget := 1 << 12
	for _, q := range usable {
		host := q.Addr().BitLen() - bits
		step := new(big.Int).Lsh(big.NewInt(1), uint(host))
		n := new(big.Int).Lsh(big.NewInt(1), uint(bits-q.Bits()))
		start := toBig(q.Addr())
		for i := big.NewInt(0); i.Cmp(n) < 0; i.Add(i, big.NewInt(1)) {
			if budget--; budget < 0 {
				return netip.Prefix{}, false, false
			}
			a := new(big.Int).Add(start, new(big.Int).Mul(i, step))
			c := netip.PrefixFrom(fromBig(a, q.Addr().Is6()), bits)
			if m.free(c, key) {
				return c, true, true
			}
		}
	}
	return netip.Prefix{}, false, true
}

// check compares the Allocator with the model and checks its invariants.
func (m *model) check(t *testing.T, a *Allocator, step string) {
	t.Helper()
	got := a.Allocations()
	if !maps.Equal(got, m.held) {
		t.Fatalf("%s: Allocations() = %v, want %v", step, got, m.held)
	}
	for k, p := range got {
		if h, ok := a.Held(k); !ok || h != p {
			t.Fatalf("%s: Held(%q) = %s, %v; want %s", step, k, h, ok, p)
		}
		if !p.IsValid() || p.Masked() != p {
			t.Fatalf("%s: %q holds %s", step, k, p)
		}
		for _, r := range m.reserved {
			if r.Overlaps(p) {
				t.Fatalf("%s: %q holds %s, which overlaps reserved %s", step, k, p, r)
			}
		}
		for j, q := range got {
			if j != k && q.Overlaps(p) {
				t.Fatalf("%s: %q holds %s, %q holds %s", step, k, p, j, q)
			}
		}
	}
}

// FuzzAllocator runs random operations on an Allocator with a random pool
// and reserved prefixes, checking each against a model and the invariants:
// no two holders overlap, no holder overlaps a reserved prefix, allocations
// lie in the pool and are the first fit, and nothing leaks.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 0, 4, 1, 0, 0, 8, 1, 0, 0x80, 4, 0, 0, 4, 0, 1, 4, 1, 1, 2, 2, 2, 0, 4, 1, 3})
	f.Add([]byte{1, 1, 2, 0x10, 0, 6, 0xff, 0xf0, 12, 1, 0xff, 0xff, 14, 0, 1, 16, 0, 2, 16, 1, 3, 0x10, 0x40, 14, 2, 1, 5})
	f.Add([]byte{2, 0, 3, 0, 0, 2, 0x40, 0, 4, 0x80, 0, 2, 2, 0x50, 0, 10, 0x90, 0, 14, 0, 0, 10, 1, 1, 12, 0, 2, 12, 2, 0})
	f.Add([]byte{3, 1, 1, 0xff, 0, 8, 0, 0, 0, 16, 0, 1, 16, 0, 2, 16, 0, 3, 14, 1, 4, 0xff, 0xff, 16, 0, 5, 12, 2, 6})
	f.Add([]byte{0, 0, 3, 0x10, 0, 4, 0x10, 0, 6, 0x20, 0, 5, 1, 0x20, 0x80, 8, 1, 2, 16, 0, 1, 6, 0, 1, 16, 2, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		sp := space{top: 10 << 24, shift: -1}
		switch in.intn(4) {
		case 1:
			sp.shift = 0
		case 2:
			sp.shift = 48
		case 3:
			sp.shift = 96
		}
		if in.intn(2) == 1 {
			sp.top = 0xffff << 16
		}
		// Prefixes in the space, 16 to 32 bits long (pool: 18 to 32).
		prefix := func(minBits int) netip.Prefix {
			low := uint16(in.byte())<<8 | uint16(in.byte())
			return sp.prefix(low, minBits+in.intn(33-minBits))
		}
		var rawPool, rawReserved []netip.Prefix
		for range 1 + in.intn(3) {
			rawPool = append(rawPool, prefix(18))
		}
		for range in.intn(5) {
			rawReserved = append(rawReserved, prefix(16))
		}

		// New refuses exactly the overlapping pools.
		m := &model{held: map[string]netip.Prefix{}}
		bad := false
		for i, p := range rawPool {
			for _, q := range rawPool[i+1:] {
				bad = bad || p.Overlaps(q)
			}
			for _, r := range rawReserved {
				bad = bad || p.Overlaps(r)
			}
		}
		if _, err := New(rawPool, rawReserved); (err != nil) != bad {
			t.Fatalf("New(%v, %v): %v", rawPool, rawReserved, err)
		}
		// Keep the pool entries that fit, to run the operations on.
		m.reserved = rawReserved
		for _, p := range rawPool {
			if m.free(p, "") && !overlapsAny(p, m.pool) {
				m.pool = append(m.pool, p)
			}
		}
		a, err := New(m.pool, m.reserved)
		if err != nil {
			t.Fatalf("New(%v, %v): %v", m.pool, m.reserved, err)
		}

		keys := []string{"a", "b", "c", "d", "e", "f"}
		for n := 0; len(in) > 0 && n < 64; n++ {
			key := keys[in.intn(len(keys))]
			switch op := in.intn(8); {
			case op < 4:
				// Allocate, lengths 16 to 33 in the space: some too
				// large or invalid for the pool.
				bits := sp.length(16 + in.intn(18))
				want, found, known := m.firstFit(key, bits)
				got, err := a.Allocate(key, bits)
				step := fmt.Sprintf("step %d: Allocate(%q, %d) = %s, %v", n, key, bits, got, err)
				switch {
				case err == nil:
					if got.Bits() != bits || !m.inPool(got) || !m.free(got, key) {
						t.Fatalf("%s: not a free /%d of the pool %v", step, bits, m.pool)
					}
					if known && (!found || got != want) {
						t.Fatalf("%s: want %s, %v", step, want, found)
					}
					m.held[key] = got
				case len(m.usable(bits)) == 0:
					if len(m.pool) > 0 && errors.Is(err, ErrPoolExhausted) {
						t.Fatalf("%s: the pool cannot hold a /%d, it is not exhausted", step, bits)
					}
				default:
					if !errors.Is(err, ErrPoolExhausted) || known && found {
						t.Fatalf("%s: want %s", step, want)
					}
				}
				m.check(t, a, step)
			case op < 6:
				p := prefix(16)
				if in.intn(4) == 0 {
					p = netip.PrefixFrom(p.Addr(), sp.length(16+in.intn(17)))
				}
				err := a.Take(key, p)
				step := fmt.Sprintf("step %d: Take(%q, %s) = %v", n, key, p, err)
				if ok := p.Masked() == p && m.free(p, key); ok != (err == nil) {
					t.Fatalf("%s: want ok=%v", step, ok)
				}
				if err == nil {
					m.held[key] = p
				}
				m.check(t, a, step)
			case op < 7:
				a.Release(key)
				delete(m.held, key)
				step := fmt.Sprintf("step %d: Release(%q)", n, key)
				if _, ok := a.Held(key); ok {
					t.Fatalf("%s: the key still holds a range", step)
				}
				m.check(t, a, step)
			default:
				p := prefix(16)
				except := keys[in.intn(len(keys))]
				if got, want := a.Free(p, except), m.free(p, except); got != want {
					t.Fatalf("step %d: Free(%s, %q) = %v, want %v", n, p, except, got, want)
				}
			}
		}

		// Nothing leaks: with every key released, the pool holds exactly
		// as many blocks of one size as fit in it.
		for _, k := range keys {
			a.Release(k)
		}
		m.held = map[string]netip.Prefix{}
		m.check(t, a, "after releasing all")
		if len(m.pool) == 0 {
			return
		}
		minBits := 128
		for _, q := range m.pool {
			minBits = min(minBits, q.Bits())
		}
		bits := min(minBits+in.intn(7), m.pool[0].Addr().BitLen())
		fit := 0
		for _, q := range m.usable(bits) {
			fit += 1 << (bits - q.Bits())
		}
		seen := map[netip.Prefix]bool{}
		for i := range fit {
			p, err := a.Allocate(fmt.Sprint("fill-", i), bits)
			if err != nil {
				t.Fatalf("fill %d of %d /%d in %v: %v", i, fit, bits, m.pool, err)
			}
			if seen[p] || p.Bits() != bits || !m.inPool(p) {
				t.Fatalf("fill %d of %d /%d in %v: got %s", i, fit, bits, m.pool, p)
			}
			seen[p] = true
		}
		if p, err := a.Allocate("one more", bits); !errors.Is(err, ErrPoolExhausted) {
			t.Fatalf("%d /%d fill %v, yet one more: %s, %v", fit, bits, m.pool, p, err)
		}
	})
}

// overlapsAny reports whether p overlaps one of ps.
func overlapsAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}
