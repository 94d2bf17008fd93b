// Package fabric holds the network fabric's address rules shared by its
// controllers, the virtual kubelet and reflection: parsing CIDRs and the 1:1
// translation between two prefixes of the same size.
package fabric

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParsePrefix parses s as a CIDR in canonical form: an IPv4 or IPv6
// address, a slash and a prefix length, with every host bit zero.
//
// field names the input in errors, which read like
//
//	spec.podCIDR "10.244.1.7/16": host bits set (the network is 10.244.0.0/16)
//	--pod-cidr "10.244.0.0": not a CIDR (want address/length, such as 10.244.0.0/16)
//
// An empty s, an IPv6 zone (fe80::%eth0/64) and an IPv4-mapped IPv6 prefix
// (::ffff:10.244.0.0/112, which is written 10.244.0.0/16) are errors too.
func ParsePrefix(field, s string) (netip.Prefix, error) {
	if s == "" {
		if field == "" {
			return netip.Prefix{}, errors.New("CIDR is empty")
		}
		return netip.Prefix{}, fmt.Errorf("%s is empty", field)
	}
	subject := strconv.Quote(s)
	if field != "" {
		subject = field + " " + subject
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s: %w", subject, explainPrefixError(s, err))
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() >= 96 {
			v4 := netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
			return netip.Prefix{}, fmt.Errorf("%s: an IPv4-mapped IPv6 prefix is not allowed (write the IPv4 CIDR %s)", subject, v4)
		}
		return netip.Prefix{}, fmt.Errorf("%s: an IPv4-mapped IPv6 prefix is not allowed (write an IPv4 CIDR, such as 10.244.0.0/16)", subject)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%s: host bits set (the network is %s)", subject, m)
	}
	return p, nil
}

// explainPrefixError turns netip.ParsePrefix's error for s into one that
// says what is wrong in the user's terms, wrapping err when it is the best
// explanation there is.
func explainPrefixError(s string, err error) error {
	addrPart, lenPart, hasSlash := strings.Cut(s, "/")
	if strings.Contains(addrPart, "%") {
		return errors.New("IPv6 zones are not allowed in a CIDR")
	}
	if !hasSlash {
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Is6() {
			return errors.New("not a CIDR (want address/length, such as fd00:10:244::/64)")
		}
		return errors.New("not a CIDR (want address/length, such as 10.244.0.0/16)")
	}
	a, aerr := netip.ParseAddr(addrPart)
	if aerr != nil {
		return fmt.Errorf("bad address: %w", aerr)
	}
	maxBits := a.BitLen()
	if n, nerr := strconv.Atoi(lenPart); nerr != nil || n < 0 || n > maxBits ||
		strconv.Itoa(n) != lenPart {
		family := "IPv4"
		if a.Is6() {
			family = "IPv6"
		}
		return fmt.Errorf("bad prefix length %q (want 0 to %d for %s)", lenPart, maxBits, family)
	}
	return fmt.Errorf("not a CIDR: %w", err)
}

// Mapping translates addresses of From into To, keeping the host bits: the
// fabric's 1:1 prefix mapping, like iptables' NETMAP. The address whose
// network bits are those of From and host bits are h becomes the address
// with the network bits of To and the same h.
//
// The zero Mapping is invalid: it translates nothing. Build one with
// NewMapping to have it checked.
type Mapping struct {
	// From is the prefix whose addresses are translated.
	From netip.Prefix
	// To is where they go: a prefix of the same family and length.
	To netip.Prefix
}

// NewMapping returns the Mapping from into to, after checking that both
// prefixes are valid, masked (no host bits set), of the same address family
// and of the same length. Errors say which prefix is at fault and why.
func NewMapping(from, to netip.Prefix) (Mapping, error) {
	for _, side := range []struct {
		name string
		p    netip.Prefix
	}{{"from", from}, {"to", to}} {
		if !side.p.IsValid() {
			return Mapping{}, fmt.Errorf("mapping %s -> %s: %s is not a valid prefix", from, to, side.name)
		}
		if m := side.p.Masked(); m != side.p {
			return Mapping{}, fmt.Errorf("mapping %s -> %s: %s %s has host bits set (the network is %s)", from, to, side.name, side.p, m)
		}
	}
	if from.Addr().BitLen() != to.Addr().BitLen() {
		return Mapping{}, fmt.Errorf("mapping %s -> %s: the prefixes are of different address families", from, to)
	}
	if from.Bits() != to.Bits() {
		return Mapping{}, fmt.Errorf("mapping %s -> %s: the prefixes are of different lengths (/%d and /%d)", from, to, from.Bits(), to.Bits())
	}
	return Mapping{From: from, To: to}, nil
}

// valid reports whether m can translate: both prefixes valid, of the same
// family and length.
func (m Mapping) valid() bool {
	return m.From.IsValid() && m.To.IsValid() &&
		m.From.Addr().BitLen() == m.To.Addr().BitLen() &&
		m.From.Bits() == m.To.Bits()
}

// Translate returns a's address in To (the network bits of To and the host
// bits of a) when From contains a. Otherwise, or when m is invalid, it
// returns a unchanged and false.
//
// a is matched as netip.Prefix.Contains does: an IPv4-mapped IPv6 address
// is not in an IPv4 prefix (Unmap it first, as TranslateString does), and an
// address with an IPv6 zone is in no prefix.
func (m Mapping) Translate(a netip.Addr) (netip.Addr, bool) {
	if !m.valid() || !m.From.Contains(a) {
		return a, false
	}
	src, dst := a.As16(), m.To.Addr().As16()
	// IPv4 addresses sit in the last 4 bytes of As16; the network bits
	// are counted from there.
	network := m.To.Bits() + 128 - a.BitLen()
	for i := range dst {
		switch {
		case network >= 8:
			network -= 8
		case network <= 0:
			dst[i] = src[i]
		default:
			keep := byte(0xff) << (8 - network)
			dst[i] = dst[i]&keep | src[i]&^keep
			network = 0
		}
	}
	if a.Is4() {
		return netip.AddrFrom4([4]byte(dst[12:])), true
	}
	return netip.AddrFrom16(dst), true
}

// Inverse returns the mapping that takes To back into From.
func (m Mapping) Inverse() Mapping {
	return Mapping{From: m.To, To: m.From}
}

// IsIdentity reports whether m maps From onto itself, translating every
// address of From to itself.
func (m Mapping) IsIdentity() bool {
	return m.From == m.To
}

// TranslateString is Translate for an IP in text form. An IPv4-mapped IPv6
// address ("::ffff:10.244.1.2") is taken as its IPv4 form. The result is in
// canonical text form (that of netip.Addr.String). When ip is not an IP, or
// not in From, TranslateString returns ip unchanged and false.
func (m Mapping) TranslateString(ip string) (string, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip, false
	}
	out, ok := m.Translate(a.Unmap())
	if !ok {
		return ip, false
	}
	return out.String(), true
}

// String returns m as "from->to", such as "10.244.0.0/16->10.71.0.0/16".
func (m Mapping) String() string {
	return m.From.String() + "->" + m.To.String()
}

// Overlaps reports whether a and b share an address. Invalid prefixes
// overlap nothing, and prefixes of different families never overlap.
func Overlaps(a, b netip.Prefix) bool {
	return a.IsValid() && b.IsValid() && a.Overlaps(b)
}
