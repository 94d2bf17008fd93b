package fabric

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func TestParsePrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the prefix, or "" for an error
		err  string // a part of the error
	}{
		{in: "10.244.0.0/16", want: "10.244.0.0/16"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "10.96.0.1/32", want: "10.96.0.1/32"},
		{in: "fd00::/64", want: "fd00::/64"},
		{in: "FD00:0::/64", want: "fd00::/64"},
		{in: "::/0", want: "::/0"},
		{in: "fd00::1/128", want: "fd00::1/128"},
		{in: "", err: "spec.podCIDR is empty"},
		{in: "10.244.0.0", err: `spec.podCIDR "10.244.0.0": not a CIDR (want address/length, such as 10.244.0.0/16)`},
		{in: "fd00::", err: "not a CIDR (want address/length, such as fd00:10:244::/64)"},
		{in: "pods", err: `spec.podCIDR "pods": not a CIDR`},
		{in: "10.244.1.7/16", err: `spec.podCIDR "10.244.1.7/16": host bits set (the network is 10.244.0.0/16)`},
		{in: "fd00::1/64", err: "host bits set (the network is fd00::/64)"},
		{in: "::ffff:10.244.0.0/112", err: "IPv4-mapped IPv6 prefix is not allowed (write the IPv4 CIDR 10.244.0.0/16)"},
		{in: "::ffff:10.0.0.0/104", err: "IPv4-mapped"},
		{in: "::ffff:10.0.0.0/80", err: "IPv4-mapped"},
		{in: "fe80::%eth0/64", err: "zones are not allowed"},
		{in: "fe80::1%eth0", err: "zones are not allowed"},
		{in: "10.0.0.0/33", err: `bad prefix length "33" (want 0 to 32 for IPv4)`},
		{in: "fd00::/129", err: `bad prefix length "129" (want 0 to 128 for IPv6)`},
		{in: "10.0.0.0/-1", err: "bad prefix length"},
		{in: "10.0.0.0/08", err: "bad prefix length"},
		{in: "10.0.0.0/", err: "bad prefix length"},
		{in: "10.0.0.0/ 8", err: "bad prefix length"},
		{in: "10.0.0.256/8", err: "bad address"},
		{in: " 10.0.0.0/8", err: "bad address"},
		{in: "10.0.0.0/8/8", err: "bad prefix length"},
	} {
		p, err := ParsePrefix("spec.podCIDR", tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && p.String() != tc.want:
			t.Errorf("%q: got %s, want %s", tc.in, p, tc.want)
		case tc.err != "" && err == nil:
			t.Errorf("%q: got %s, want an error saying %q", tc.in, p, tc.err)
		case tc.err != "" && (!strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "spec.podCIDR")):
			t.Errorf("%q: error %q, want one naming spec.podCIDR and saying %q", tc.in, err, tc.err)
		case tc.err != "" && p.IsValid():
			t.Errorf("%q: error with a valid prefix %s", tc.in, p)
		}
	}
	if _, err := ParsePrefix("", "10.0.0.1/8"); err == nil || !strings.HasPrefix(err.Error(), `"10.0.0.1/8": host bits set`) {
		t.Errorf("no field: error %v", err)
	}
	if _, err := ParsePrefix("", ""); err == nil || err.Error() != "CIDR is empty" {
		t.Errorf("no field, empty: error %v", err)
	}
}

// mustMapping returns the checked mapping from -> to.
func mustMapping(t testing.TB, from, to string) Mapping {
	t.Helper()
	m, err := NewMapping(netip.MustParsePrefix(from), netip.MustParsePrefix(to))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		in, want string
		ok       bool
	}{
		{"10.244.0.0/16", "10.71.0.0/16", "10.244.3.7", "10.71.3.7", true},
		{"10.244.0.0/16", "10.71.0.0/16", "10.244.0.0", "10.71.0.0", true},
		{"10.244.0.0/16", "10.71.0.0/16", "10.244.255.255", "10.71.255.255", true},
		{"10.244.0.0/16", "10.71.0.0/16", "10.245.3.7", "10.245.3.7", false},
		{"10.244.0.0/16", "10.71.0.0/16", "fd00::1", "fd00::1", false},
		{"10.244.0.0/14", "10.64.0.0/14", "10.247.255.1", "10.67.255.1", true},
		{"10.240.0.0/13", "10.64.0.0/13", "10.245.1.1", "10.69.1.1", true},
		{"10.244.1.128/25", "192.168.0.0/25", "10.244.1.200", "192.168.0.72", true},
		{"10.244.1.128/25", "192.168.0.0/25", "10.244.1.100", "10.244.1.100", false},
		{"10.96.0.1/32", "10.64.0.9/32", "10.96.0.1", "10.64.0.9", true},
		{"10.96.0.1/32", "10.64.0.9/32", "10.96.0.2", "10.96.0.2", false},
		{"0.0.0.0/0", "0.0.0.0/0", "1.2.3.4", "1.2.3.4", true},
		{"128.0.0.0/1", "0.0.0.0/1", "255.255.255.255", "127.255.255.255", true},
		{"fd00:1::/64", "fd00:2::/64", "fd00:1::abcd", "fd00:2::abcd", true},
		{"fd00:1::/64", "fd00:2::/64", "fd00:3::abcd", "fd00:3::abcd", false},
		{"fd00:1::/127", "fd00:2::/127", "fd00:1::1", "fd00:2::1", true},
		{"fd00:1::/60", "fd00:2:0:30::/60", "fd00:1:0:f:1:2:3:4", "fd00:2:0:3f:1:2:3:4", true},
		{"fd00::1/128", "2001:db8::5/128", "fd00::1", "2001:db8::5", true},
		{"::/0", "::/0", "2001:db8::1", "2001:db8::1", true},
		{"::/0", "::/0", "10.0.0.1", "10.0.0.1", false},
		{"8000::/1", "::/1", "ffff::1", "7fff::1", true},
	} {
		m := mustMapping(t, tc.from, tc.to)
		in := netip.MustParseAddr(tc.in)
		got, ok := m.Translate(in)
		if got.String() != tc.want || ok != tc.ok {
			t.Errorf("%s: Translate(%s) = %s, %v; want %s, %v", m, tc.in, got, ok, tc.want, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if !m.To.Contains(got) {
			t.Errorf("%s: Translate(%s) = %s, outside To", m, tc.in, got)
		}
		if back, ok := m.Inverse().Translate(got); !ok || back != in {
			t.Errorf("%s: Inverse().Translate(%s) = %s, %v; want %s", m, got, back, ok, in)
		}
	}
}

func TestTranslateString(t *testing.T) {
	m := mustMapping(t, "10.244.0.0/16", "10.71.0.0/16")
	m6 := mustMapping(t, "fd00:1::/64", "fd00:2::/64")
	for _, tc := range []struct {
		m      Mapping
		in, to string
		ok     bool
	}{
		{m, "10.244.3.7", "10.71.3.7", true},
		{m, "10.245.3.7", "10.245.3.7", false},
		{m, "::ffff:10.244.1.2", "10.71.1.2", true},
		{m, "::ffff:10.245.1.2", "::ffff:10.245.1.2", false},
		{m, "not-an-ip", "not-an-ip", false},
		{m, "", "", false},
		{m, "10.244.3.7/32", "10.244.3.7/32", false},
		{m6, "FD00:1:0:0::ABCD", "fd00:2::abcd", true},
		{m6, "fd00:1::1%eth0", "fd00:1::1%eth0", false},
		{Mapping{}, "10.244.3.7", "10.244.3.7", false},
	} {
		got, ok := tc.m.TranslateString(tc.in)
		if got != tc.to || ok != tc.ok {
			t.Errorf("%s: TranslateString(%q) = %q, %v; want %q, %v", tc.m, tc.in, got, ok, tc.to, tc.ok)
		}
		if ok {
			back, _ := tc.m.Inverse().TranslateString(got)
			if want := netip.MustParseAddr(tc.in).Unmap().String(); back != want {
				t.Errorf("%s: inverse of %s is %s, want %s", tc.m, got, back, want)
			}
		}
	}
}

func TestNewMapping(t *testing.T) {
	for _, tc := range []struct {
		from, to netip.Prefix
		err      string
	}{
		{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("10.1.0.0/24"), "different lengths (/16 and /24)"},
		{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/16"), "different address families"},
		{netip.MustParsePrefix("10.0.0.1/16"), netip.MustParsePrefix("10.1.0.0/16"), "from 10.0.0.1/16 has host bits set (the network is 10.0.0.0/16)"},
		{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("10.1.0.1/16"), "to 10.1.0.1/16 has host bits set"},
		{netip.Prefix{}, netip.MustParsePrefix("10.1.0.0/16"), "from is not a valid prefix"},
		{netip.MustParsePrefix("10.1.0.0/16"), netip.Prefix{}, "to is not a valid prefix"},
	} {
		if m, err := NewMapping(tc.from, tc.to); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("NewMapping(%s, %s) = %s, %v; want an error saying %q", tc.from, tc.to, m, err, tc.err)
		}
	}
	m := mustMapping(t, "10.244.0.0/16", "10.71.0.0/16")
	if got := m.String(); got != "10.244.0.0/16->10.71.0.0/16" {
		t.Errorf("String() = %q", got)
	}
	if got := m.Inverse().String(); got != "10.71.0.0/16->10.244.0.0/16" {
		t.Errorf("Inverse().String() = %q", got)
	}
	if m.IsIdentity() || !mustMapping(t, "10.244.0.0/16", "10.244.0.0/16").IsIdentity() {
		t.Error("IsIdentity is wrong")
	}
}

func TestInvalidMapping(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	for _, m := range []Mapping{
		{},
		{From: netip.MustParsePrefix("10.0.0.0/8")},
		{From: netip.MustParsePrefix("10.0.0.0/8"), To: netip.MustParsePrefix("11.0.0.0/16")},
		{From: netip.MustParsePrefix("10.0.0.0/8"), To: netip.MustParsePrefix("fd00::/8")},
	} {
		if got, ok := m.Translate(a); ok || got != a {
			t.Errorf("%s: Translate(%s) = %s, %v; want it unchanged, false", m, a, got, ok)
		}
	}
}

func TestOverlaps(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		a, b netip.Prefix
		want bool
	}{
		{p("10.0.0.0/8"), p("10.1.0.0/16"), true},
		{p("10.1.0.0/16"), p("10.0.0.0/8"), true},
		{p("10.0.0.0/16"), p("10.1.0.0/16"), false},
		{p("10.0.0.0/16"), p("10.0.0.0/16"), true},
		{p("0.0.0.0/0"), p("192.168.1.1/32"), true},
		{p("0.0.0.0/0"), p("::/0"), false},
		{p("::ffff:0:0/96"), p("10.0.0.0/8"), false},
		{p("fd00::/8"), p("fd12::/16"), true},
		{p("fd00::/16"), p("fd01::/16"), false},
		{netip.Prefix{}, p("10.0.0.0/8"), false},
		{netip.Prefix{}, netip.Prefix{}, false},
	} {
		if got := Overlaps(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlaps(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// addrOf returns the address of family v6 (else IPv4) made of the first
// bytes of b, padded with zeros.
func addrOf(b []byte, v6 bool) netip.Addr {
	var a [16]byte
	copy(a[:], b)
	if v6 {
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte(a[:4]))
}

func FuzzMappingRoundTrip(f *testing.F) {
	f.Add([]byte{10, 244, 0, 0}, []byte{10, 71, 0, 0}, []byte{10, 244, 3, 7}, uint8(16), false, true)
	f.Add([]byte{10, 244, 0, 0}, []byte{10, 71, 0, 0}, []byte{10, 245, 3, 7}, uint8(16), false, false)
	f.Add([]byte{}, []byte{}, []byte{1, 2, 3, 4}, uint8(0), false, true)
	f.Add([]byte{255, 255, 255, 255}, []byte{1, 2, 3, 4}, []byte{255, 255, 255, 255}, uint8(32), false, true)
	f.Add([]byte{0xfd}, []byte{0xfd, 1}, bytes.Repeat([]byte{0xff}, 16), uint8(64), true, true)
	f.Add([]byte{0xfd}, []byte{0xfd, 1}, bytes.Repeat([]byte{0xab}, 16), uint8(128), true, true)
	f.Add([]byte{0xfd}, []byte{0xfd, 1}, []byte{0xfd, 0, 1}, uint8(61), true, false)
	f.Fuzz(func(t *testing.T, fromB, toB, addrB []byte, n uint8, v6, inside bool) {
		bitLen := 32
		if v6 {
			bitLen = 128
		}
		bits := int(n) % (bitLen + 1)
		a := addrOf(addrB, v6)
		from := netip.PrefixFrom(addrOf(fromB, v6), bits).Masked()
		if inside {
			from = netip.PrefixFrom(a, bits).Masked()
		}
		to := netip.PrefixFrom(addrOf(toB, v6), bits).Masked()
		m, err := NewMapping(from, to)
		if err != nil {
			t.Fatalf("NewMapping(%s, %s): %v", from, to, err)
		}
		out, ok := m.Translate(a)
		if ok != from.Contains(a) {
			t.Fatalf("%s: Translate(%s) ok = %v", m, a, ok)
		}
		if !ok {
			if out != a {
				t.Fatalf("%s: Translate(%s) = %s, not ok but changed", m, a, out)
			}
			return
		}
		if !to.Contains(out) || out.BitLen() != bitLen {
			t.Fatalf("%s: Translate(%s) = %s, outside %s", m, a, out, to)
		}
		// The host bits are a's: a and out differ only where From and To do.
		x, y := a.As16(), out.As16()
		fb, tb := from.Addr().As16(), to.Addr().As16()
		for i := range x {
			if x[i]^y[i] != fb[i]^tb[i] {
				t.Fatalf("%s: Translate(%s) = %s, host bits changed", m, a, out)
			}
		}
		if back, ok := m.Inverse().Translate(out); !ok || back != a {
			t.Fatalf("%s: %s -> %s -> %s, %v", m, a, out, back, ok)
		}
		if s, ok := m.TranslateString(a.String()); !ok || s != out.String() {
			t.Fatalf("%s: TranslateString(%s) = %s, %v; want %s", m, a, s, ok, out)
		}
	})
}

func FuzzParsePrefix(f *testing.F) {
	for _, s := range []string{
		"10.244.0.0/16", "10.244.1.7/16", "", "::/0", "::ffff:1.2.3.0/120",
		"1.2.3.4/33", "fe80::%eth0/64", "10.0.0.0", "fd00::/64", "10.0.0.0/08",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrefix("field", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "field") {
				t.Fatalf("%q: error %q does not name the field", s, err)
			}
			if p.IsValid() {
				t.Fatalf("%q: error %q with a valid prefix %s", s, err, p)
			}
			return
		}
		if !p.IsValid() || p.Masked() != p {
			t.Fatalf("%q parsed to non-canonical %s", s, p)
		}
		if p.Addr().Is4In6() || p.Addr().Zone() != "" {
			t.Fatalf("%q parsed to %s", s, p)
		}
		if q, err := ParsePrefix("field", p.String()); err != nil || q != p {
			t.Fatalf("%q: %s does not reparse: %s, %v", s, p, q, err)
		}
		if std, err := netip.ParsePrefix(s); err != nil || std != p {
			t.Fatalf("%q: netip.ParsePrefix says %s, %v; ParsePrefix %s", s, std, err, p)
		}
	})
}
