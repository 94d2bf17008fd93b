package nettest

import (
	"fmt"
	"net/netip"
)

// Translate maps ip, an address of the CIDR from, to the address at the same
// offset in to, a CIDR of the same size: where a peer sees this cluster's
// pod, given this cluster's pod CIDR and the peer's range for it. Errors
// name the argument at fault.
func Translate(ip, from, to string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", ip, err)
	}
	f, err := netip.ParsePrefix(from)
	if err != nil {
		return "", fmt.Errorf("range %q: %w", from, err)
	}
	t, err := netip.ParsePrefix(to)
	if err != nil {
		return "", fmt.Errorf("range %q: %w", to, err)
	}
	f, t = f.Masked(), t.Masked()
	if f.Bits() != t.Bits() || f.Addr().BitLen() != t.Addr().BitLen() {
		return "", fmt.Errorf("ranges %s and %s differ in size", f, t)
	}
	if !f.Contains(a) {
		return "", fmt.Errorf("address %s is not in %s", a, f)
	}
	src, dst := a.AsSlice(), t.Addr().AsSlice()
	bits := f.Bits()
	for i := range dst {
		// Bits below the prefix come from the address, above it from to.
		keep := 0
		switch {
		case bits >= (i+1)*8:
			keep = 8
		case bits > i*8:
			keep = bits - i*8
		}
		mask := byte(0xff << (8 - keep))
		dst[i] = dst[i]&mask | src[i]&^mask
	}
	out, _ := netip.AddrFromSlice(dst)
	return out.String(), nil
}
