package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// prefixes parses CIDRs.
func prefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// mustNew returns an Allocator of pool and reserved, given as CIDRs.
func mustNew(t testing.TB, pool, reserved []string) *Allocator {
	t.Helper()
	a, err := New(prefixes(pool...), prefixes(reserved...))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// mustAllocate allocates a /bits to key and checks it got want.
func mustAllocate(t *testing.T, a *Allocator, key string, bits int, want string) {
	t.Helper()
	got, err := a.Allocate(key, bits)
	if err != nil {
		t.Fatalf("Allocate(%q, %d): %v", key, bits, err)
	}
	if got.String() != want {
		t.Fatalf("Allocate(%q, %d) = %s, want %s", key, bits, got, want)
	}
	if h, ok := a.Held(key); !ok || h != got {
		t.Fatalf("Held(%q) = %s, %v after Allocate gave %s", key, h, ok, got)
	}
}

// mustTake takes p for key.
func mustTake(t *testing.T, a *Allocator, key, p string) {
	t.Helper()
	if err := a.Take(key, netip.MustParsePrefix(p)); err != nil {
		t.Fatalf("Take(%q, %s): %v", key, p, err)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		pool, reserved []netip.Prefix
		err            string
	}{
		{prefixes("10.64.0.0/11"), prefixes("10.0.0.0/16", "10.0.0.0/8"), "pool 10.64.0.0/11 overlaps reserved 10.0.0.0/8"},
		{prefixes("10.64.0.0/11"), prefixes("10.64.0.0/12"), "pool 10.64.0.0/11 overlaps reserved 10.64.0.0/12"},
		{prefixes("10.64.0.0/11", "10.80.0.0/16"), nil, "pool 10.64.0.0/11 overlaps pool 10.80.0.0/16"},
		{prefixes("10.64.0.0/11", "10.64.0.0/11"), nil, "pool 10.64.0.0/11 overlaps pool 10.64.0.0/11"},
		{prefixes("10.64.0.1/11"), nil, "pool entry 0: 10.64.0.1/11 has host bits set (the network is 10.64.0.0/11)"},
		{[]netip.Prefix{{}}, nil, "pool entry 0: invalid prefix"},
		{prefixes("10.64.0.0/11"), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}}, "reserved entry 1: invalid prefix"},
		{prefixes("10.64.0.0/11"), prefixes("fd00::1/64"), "reserved entry 0: fd00::1/64 has host bits set (the network is fd00::/64)"},
		// Fine: reserved entries overlapping each other, families apart.
		{prefixes("10.64.0.0/11", "fd00::/8"), prefixes("10.0.0.0/16", "10.0.0.0/10", "10.0.0.5/32", "::/1", "::ffff:0:0/96"), ""},
		{nil, nil, ""},
	} {
		_, err := New(tc.pool, tc.reserved)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("New(%v, %v): %v", tc.pool, tc.reserved, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("New(%v, %v): error %v, want %q", tc.pool, tc.reserved, err, tc.err)
		}
	}
}

func TestNewCopies(t *testing.T) {
	pool := prefixes("10.64.0.0/16")
	a, err := New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool[0] = netip.MustParsePrefix("192.168.0.0/16")
	mustAllocate(t, a, "k", 24, "10.64.0.0/24")
}

func TestAllocateFirstFit(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11"}, []string{"10.0.0.0/16", "10.96.0.0/12"})
	mustAllocate(t, a, "a", 16, "10.64.0.0/16")
	mustAllocate(t, a, "b", 16, "10.65.0.0/16")
	// Smaller holders inside the pool, taken or allocated, are skipped.
	mustTake(t, a, "t1", "10.66.0.0/24")
	mustTake(t, a, "t2", "10.67.255.255/32")
	mustAllocate(t, a, "c", 16, "10.68.0.0/16")
	mustAllocate(t, a, "d", 24, "10.66.1.0/24")
	mustAllocate(t, a, "e", 15, "10.70.0.0/15")
	mustAllocate(t, a, "f", 32, "10.66.2.0/32")
	// A larger holder is skipped whole.
	mustTake(t, a, "t3", "10.72.0.0/14")
	mustAllocate(t, a, "g", 16, "10.69.0.0/16")
	mustAllocate(t, a, "h", 16, "10.76.0.0/16")
	// Release then reuse: the first fit is the released range.
	a.Release("b")
	if _, ok := a.Held("b"); ok {
		t.Fatal("b still holds a range after Release")
	}
	mustAllocate(t, a, "i", 16, "10.65.0.0/16")
	a.Release("no such key")
}

func TestAllocatePoolOrder(t *testing.T) {
	a := mustNew(t, []string{"192.168.0.0/23", "10.0.0.0/8", "172.16.0.0/12"}, nil)
	mustAllocate(t, a, "a", 24, "192.168.0.0/24")
	mustAllocate(t, a, "b", 24, "192.168.1.0/24")
	mustAllocate(t, a, "c", 24, "10.0.0.0/24")
	// Only the entries large enough are searched.
	mustAllocate(t, a, "d", 12, "10.16.0.0/12")
	mustAllocate(t, a, "e", 9, "10.128.0.0/9")
	if _, err := a.Allocate("f", 9); err == nil || err.Error() != "no free /9 in pool 10.0.0.0/8: pool exhausted" {
		t.Errorf("Allocate: %v", err)
	}
}

func TestAllocateExhausted(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/15"}, nil)
	mustAllocate(t, a, "a", 16, "10.64.0.0/16")
	mustTake(t, a, "t", "10.65.128.0/17")
	_, err := a.Allocate("b", 16)
	if !errors.Is(err, ErrPoolExhausted) || err.Error() != "no free /16 in pool 10.64.0.0/15: pool exhausted" {
		t.Fatalf("Allocate: %v, want the pool exhausted", err)
	}
	if _, ok := a.Held("b"); ok {
		t.Fatal("b holds a range after a failed Allocate")
	}
	// Failing keeps what the key held.
	mustAllocate(t, a, "c", 17, "10.65.0.0/17")
	if _, err := a.Allocate("c", 16); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Allocate: %v, want the pool exhausted", err)
	}
	if h, _ := a.Held("c"); h.String() != "10.65.0.0/17" {
		t.Fatalf("c holds %s after a failed Allocate, want 10.65.0.0/17", h)
	}
	a.Release("t")
	mustAllocate(t, a, "b", 17, "10.65.128.0/17")
}

func TestAllocateErrors(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11", "192.168.0.0/16"}, nil)
	for _, tc := range []struct {
		key  string
		bits int
		err  string
	}{
		{"k", 33, "allocate a /33: not a prefix length of pool 10.64.0.0/11, 192.168.0.0/16"},
		{"k", -1, "not a prefix length"},
		{"k", 10, "allocate a /10: no entry of pool 10.64.0.0/11, 192.168.0.0/16 is that large"},
		{"", 16, "empty key"},
	} {
		_, err := a.Allocate(tc.key, tc.bits)
		if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, ErrPoolExhausted) {
			t.Errorf("Allocate(%q, %d): %v, want an error saying %q", tc.key, tc.bits, err, tc.err)
		}
	}
	// Only the entries large enough count for the exhaustion message.
	mustAllocate(t, a, "a", 11, "10.64.0.0/11")
	if _, err := a.Allocate("b", 11); err == nil || err.Error() != "no free /11 in pool 10.64.0.0/11: pool exhausted" {
		t.Errorf("Allocate: %v", err)
	}
	for _, a := range []*Allocator{mustNew(t, nil, nil), {}} {
		if _, err := a.Allocate("k", 24); !errors.Is(err, ErrPoolExhausted) {
			t.Errorf("Allocate from an empty pool: %v, want it exhausted", err)
		}
	}
	if len(a.Allocations()) != 1 {
		t.Errorf("failed Allocate calls changed the allocations: %v", a.Allocations())
	}
}

func TestAllocateIdempotent(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11"}, nil)
	mustAllocate(t, a, "a", 16, "10.64.0.0/16")
	mustAllocate(t, a, "b", 16, "10.65.0.0/16")
	mustAllocate(t, a, "a", 16, "10.64.0.0/16")
	a.Release("a")
	mustAllocate(t, a, "b", 16, "10.65.0.0/16")
	// A holder taken outside the pool is replaced by one inside it.
	mustTake(t, a, "c", "192.168.0.0/16")
	mustAllocate(t, a, "c", 16, "10.64.0.0/16")
	// Another size replaces the range, which counts as free for the key.
	mustAllocate(t, a, "c", 24, "10.64.0.0/24")
	mustAllocate(t, a, "c", 15, "10.66.0.0/15")
	mustAllocate(t, a, "c", 24, "10.64.0.0/24")
	mustAllocate(t, a, "c", 12, "10.80.0.0/12")
	want := map[string]string{"b": "10.65.0.0/16", "c": "10.80.0.0/12"}
	if got := a.Allocations(); fmt.Sprint(got) != fmt.Sprint(prefixMap(want)) {
		t.Errorf("Allocations() = %v, want %v", got, want)
	}
}

// prefixMap parses the values of m.
func prefixMap(m map[string]string) map[string]netip.Prefix {
	out := map[string]netip.Prefix{}
	for k, v := range m {
		out[k] = netip.MustParsePrefix(v)
	}
	return out
}

func TestTake(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11"}, []string{"10.0.0.0/16", "10.0.0.0/10", "10.1.2.3/32", "fd00::/64"})
	// Outside the pool.
	mustTake(t, a, "peer", "192.168.0.0/16")
	mustTake(t, a, "peer6", "fd00:1::/64")
	mustTake(t, a, "in-pool", "10.64.0.0/24")
	for _, tc := range []struct {
		key, p, err string
	}{
		{"x", "10.1.0.0/16", "10.1.0.0/16 overlaps reserved 10.0.0.0/10"},
		{"x", "0.0.0.0/0", "0.0.0.0/0 overlaps reserved 10.0.0.0/10"},
		{"x", "fd00::1/128", "fd00::1/128 overlaps reserved fd00::/64"},
		{"x", "192.168.1.0/24", "192.168.1.0/24 overlaps 192.168.0.0/16 (held by peer)"},
		{"x", "192.0.0.0/8", "192.0.0.0/8 overlaps 192.168.0.0/16 (held by peer)"},
		{"x", "10.64.0.0/16", "10.64.0.0/16 overlaps 10.64.0.0/24 (held by in-pool)"},
		{"peer", "10.64.0.0/16", "10.64.0.0/16 overlaps 10.64.0.0/24 (held by in-pool)"},
		{"x", "10.64.0.1/16", "take for x: 10.64.0.1/16 has host bits set (the network is 10.64.0.0/16)"},
		{"x", "", "take for x: invalid prefix"},
		{"", "10.65.0.0/16", "take 10.65.0.0/16: empty key"},
	} {
		var p netip.Prefix
		if tc.p != "" {
			p = netip.MustParsePrefix(tc.p)
		}
		if err := a.Take(tc.key, p); err == nil || err.Error() != tc.err {
			t.Errorf("Take(%q, %s): %v, want %q", tc.key, p, err, tc.err)
		}
	}
	// On failure, a key keeps what it had.
	if h, _ := a.Held("peer"); h.String() != "192.168.0.0/16" {
		t.Errorf("peer holds %s after a failed Take", h)
	}
	// Taking again what one holds, or something overlapping it, is fine.
	mustTake(t, a, "peer", "192.168.0.0/16")
	mustTake(t, a, "peer", "192.168.0.0/17")
	mustTake(t, a, "x", "192.168.128.0/17")
	// Taking an allocated range away is not.
	mustAllocate(t, a, "alloc", 16, "10.65.0.0/16")
	if err := a.Take("y", netip.MustParsePrefix("10.65.3.0/24")); err == nil {
		t.Error("Take of an allocated range: no error")
	}
	a.Release("alloc")
	mustTake(t, a, "y", "10.65.3.0/24")
	want := map[string]string{
		"peer": "192.168.0.0/17", "peer6": "fd00:1::/64", "in-pool": "10.64.0.0/24",
		"x": "192.168.128.0/17", "y": "10.65.3.0/24",
	}
	if got := a.Allocations(); fmt.Sprint(got) != fmt.Sprint(prefixMap(want)) {
		t.Errorf("Allocations() = %v, want %v", got, want)
	}
}

func TestFree(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11"}, []string{"10.0.0.0/10"})
	mustTake(t, a, "k", "10.64.0.0/16")
	for _, tc := range []struct {
		p, except string
		want      bool
	}{
		{"10.65.0.0/16", "", true},
		{"10.64.1.0/24", "", false},
		{"10.64.1.0/24", "k", true},
		{"10.64.1.0/24", "other", false},
		{"10.0.0.0/24", "", false},
		{"10.0.0.0/24", "k", false},
		{"0.0.0.0/0", "", false},
		{"::/0", "", true},
		{"10.64.1.7/16", "", false}, // host bits are ignored
		{"", "", false},
	} {
		var p netip.Prefix
		if tc.p != "" {
			p = netip.MustParsePrefix(tc.p)
		}
		if got := a.Free(p, tc.except); got != tc.want {
			t.Errorf("Free(%s, %q) = %v, want %v", p, tc.except, got, tc.want)
		}
	}
}

func TestAllocationsIsACopy(t *testing.T) {
	a := mustNew(t, []string{"10.64.0.0/11"}, nil)
	mustAllocate(t, a, "a", 16, "10.64.0.0/16")
	got := a.Allocations()
	got["a"] = netip.MustParsePrefix("10.99.0.0/16")
	got["b"] = netip.MustParsePrefix("10.98.0.0/16")
	if h, _ := a.Held("a"); h.String() != "10.64.0.0/16" {
		t.Errorf("a holds %s after the copy was changed", h)
	}
	if _, ok := a.Held("b"); ok {
		t.Error("b holds a range after the copy was changed")
	}
}

func TestZeroAllocator(t *testing.T) {
	var a Allocator
	mustTake(t, &a, "k", "10.0.0.0/8")
	if err := a.Take("j", netip.MustParsePrefix("10.1.0.0/16")); err == nil {
		t.Error("Take of a held range: no error")
	}
	if !a.Free(netip.MustParsePrefix("11.0.0.0/8"), "") {
		t.Error("11.0.0.0/8 is not free")
	}
	a.Release("k")
	if len(a.Allocations()) != 0 {
		t.Errorf("Allocations() = %v after Release", a.Allocations())
	}
}

func TestIPv6(t *testing.T) {
	a := mustNew(t, []string{"fd00:10::/32", "10.64.0.0/11"}, []string{"fd00:11::/48", "fd00::/32"})
	mustAllocate(t, a, "a", 48, "fd00:10::/48")
	mustAllocate(t, a, "b", 64, "fd00:10:1::/64")
	mustAllocate(t, a, "c", 48, "fd00:10:2::/48")
	mustAllocate(t, a, "d", 16, "10.64.0.0/16")
	mustAllocate(t, a, "e", 24, "10.65.0.0/24")
	// A /32 exists in both families: the pool order decides, and the
	// IPv6 entry is not free as a whole.
	mustAllocate(t, a, "e2", 32, "10.65.1.0/32")
	mustTake(t, a, "f", "fd00:10:4::/47")
	mustAllocate(t, a, "g", 47, "fd00:10:6::/47")
	mustAllocate(t, a, "h", 128, "fd00:10:1:1::/128")
	if err := a.Take("i", netip.MustParsePrefix("fd00::/31")); err == nil || err.Error() != "fd00::/31 overlaps reserved fd00::/32" {
		t.Errorf("Take: %v", err)
	}
}

func TestAcross64Bits(t *testing.T) {
	// Host bits on both sides of the 64-bit boundary.
	a := mustNew(t, []string{"fd00:0:0:ff00::/56"}, nil)
	mustTake(t, a, "t", "fd00:0:0:ff00::/64")
	mustAllocate(t, a, "a", 72, "fd00:0:0:ff01::/72")
	mustAllocate(t, a, "b", 63, "fd00:0:0:ff02::/63")
	mustAllocate(t, a, "c", 72, "fd00:0:0:ff01:100::/72")
	mustTake(t, a, "u", "fd00:0:0:ff04::/62")
	mustAllocate(t, a, "d", 64, "fd00:0:0:ff08::/64")
	mustAllocate(t, a, "e", 57, "fd00:0:0:ff80::/57")

	// Releasing the upper half of a busy run split at the boundary.
	a = mustNew(t, []string{"fd00::/63"}, nil)
	mustAllocate(t, a, "a", 64, "fd00::/64")
	mustAllocate(t, a, "b", 64, "fd00:0:0:1::/64")
	a.Release("b")
	mustAllocate(t, a, "c", 64, "fd00:0:0:1::/64")
	a.Release("a")
	mustAllocate(t, a, "d", 64, "fd00::/64")
}

func TestU128(t *testing.T) {
	allOnes := u128{^uint64(0), ^uint64(0)}
	for _, tc := range []struct {
		v, next u128
		carry   bool
	}{
		{u128{}, u128{lo: 1}, false},
		{u128{lo: ^uint64(0)}, u128{hi: 1}, false},
		{u128{hi: 7, lo: ^uint64(0)}, u128{hi: 8}, false},
		{allOnes, u128{}, true},
	} {
		if got, carry := tc.v.add1(); got != tc.next || carry != tc.carry {
			t.Errorf("%v.add1() = %v, %v", tc.v, got, carry)
		}
		if !tc.carry {
			if got := tc.next.sub1(); got != tc.v {
				t.Errorf("%v.sub1() = %v, want %v", tc.next, got, tc.v)
			}
		}
	}
	for n, want := range map[int]u128{0: {}, 1: {lo: 1}, 63: {lo: 1<<63 - 1}, 64: {lo: ^uint64(0)}, 65: {hi: 1, lo: ^uint64(0)}, 128: allOnes} {
		if got := hostMask(n); got != want {
			t.Errorf("hostMask(%d) = %v, want %v", n, got, want)
		}
	}
	for _, s := range []string{"0.0.0.0", "255.255.255.255", "10.1.2.3", "::", "::ffff:1.2.3.4", "fd00::1:0:0:0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		a := netip.MustParseAddr(s)
		if got := addrValue(a).addr(a.Is6()); got != a {
			t.Errorf("%s comes back as %s", a, got)
		}
	}
}

func TestEndOfAddressSpace(t *testing.T) {
	for _, tc := range []struct {
		pool string
		bits int
		n    int
		last string
	}{
		{"255.255.255.240/28", 32, 16, "255.255.255.255/32"},
		{"255.255.255.0/24", 26, 4, "255.255.255.192/26"},
		{"0.0.0.0/0", 1, 2, "128.0.0.0/1"},
		{"0.0.0.0/0", 0, 1, "0.0.0.0/0"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124", 128, 16, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"},
		{"ffff:ffff:ffff:ffff::/64", 66, 4, "ffff:ffff:ffff:ffff:c000::/66"},
		{"ffff::/16", 18, 4, "ffff:c000::/18"},
		{"::/0", 1, 2, "8000::/1"},
		{"::/0", 0, 1, "::/0"},
	} {
		a := mustNew(t, []string{tc.pool}, nil)
		var got netip.Prefix
		for i := range tc.n {
			p, err := a.Allocate(fmt.Sprint(i), tc.bits)
			if err != nil {
				t.Fatalf("%s: allocation %d of a /%d: %v", tc.pool, i, tc.bits, err)
			}
			got = p
		}
		if got.String() != tc.last {
			t.Errorf("%s: last /%d is %s, want %s", tc.pool, tc.bits, got, tc.last)
		}
		if p, err := a.Allocate("one more", tc.bits); !errors.Is(err, ErrPoolExhausted) {
			t.Errorf("%s: one more /%d: %s, %v; want the pool exhausted", tc.pool, tc.bits, p, err)
		}
		// Holders reaching the end of the space are skipped too.
		a.Release("0")
		if p, err := a.Allocate("again", tc.bits); err != nil || p != netip.PrefixFrom(netip.MustParsePrefix(tc.pool).Addr(), tc.bits) {
			t.Errorf("%s: after a release: %s, %v", tc.pool, p, err)
		}
	}
}

func TestManyHolders(t *testing.T) {
	// 20000 single addresses at the start of a /8: the first free /24 is
	// after them, found without walking addresses one by one.
	a := mustNew(t, []string{"10.0.0.0/8"}, nil)
	for i := range 20000 {
		mustTake(t, a, fmt.Sprint("ip", i), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32).String())
	}
	mustAllocate(t, a, "net", 24, "10.0.79.0/24")
	mustAllocate(t, a, "net2", 31, "10.0.78.32/31")
	mustAllocate(t, a, "net3", 16, "10.1.0.0/16")
}

func TestFillPool(t *testing.T) {
	// Every /24 of a /8, then one more: first fit over a packed pool does
	// not walk the holders one by one.
	a := mustNew(t, []string{"10.0.0.0/8"}, []string{"11.0.0.0/8"})
	for i := range 1 << 16 {
		p, err := a.Allocate(fmt.Sprint(i), 24)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if want := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24); p != want {
			t.Fatalf("allocation %d: %s, want %s", i, p, want)
		}
	}
	if _, err := a.Allocate("one more", 24); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("one more: %v", err)
	}
	a.Release("12345")
	a.Release("12346")
	if _, err := a.Allocate("one more", 23); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("a /23 over two unaligned free /24s: %v", err)
	}
	a.Release("12344")
	mustAllocate(t, a, "one more", 23, "10.48.56.0/23")
	mustAllocate(t, a, "last", 24, "10.48.58.0/24")
}

// BenchmarkAllocateFragmented allocates /24s from a /8 whose every /24
// holds a single address: each allocation steps through the 4096 of them.
func BenchmarkAllocateFragmented(b *testing.B) {
	a := mustNew(b, []string{"10.0.0.0/8"}, nil)
	for i := range 4096 {
		if err := a.Take(fmt.Sprint("ip-", i), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 32)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := a.Allocate("net", 24)
		if err != nil || p.String() != "10.16.0.0/24" {
			b.Fatal(p, err)
		}
		a.Release("net")
	}
}

func BenchmarkAllocate(b *testing.B) {
	for _, bc := range []struct {
		pool string
		bits int
		n    int
	}{
		{"10.0.0.0/8", 24, 4096},
		{"10.0.0.0/8", 32, 4096},
		{"fd00::/48", 64, 4096},
	} {
		b.Run(fmt.Sprintf("%s/%d×%d", bc.pool, bc.bits, bc.n), func(b *testing.B) {
			keys := make([]string, bc.n)
			for i := range keys {
				keys[i] = fmt.Sprint("peer-", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				a := mustNew(b, []string{bc.pool}, nil)
				for _, k := range keys {
					if _, err := a.Allocate(k, bc.bits); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.n), "ns/allocation")
		})
	}
}
