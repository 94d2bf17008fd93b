package nat

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric"
)

// Registers the rules use: NFT_REG_1 and NFT_REG_2, 16 bytes each, wide
// enough for an IPv6 address.
const (
	reg1 = unix.NFT_REG_1
	reg2 = unix.NFT_REG_2
)

// TCP header facts for MSS clamping.
const (
	tcpFlagsOffset = 13   // the flags byte in the TCP header
	tcpFlagSYN     = 0x02 // SYN flag
	tcpFlagRST     = 0x04 // RST flag
	tcpOptMaxseg   = 2    // the MSS option's kind
	tcpOptMSSValue = 2    // the MSS value's offset in the option
	tcpOptMSSLen   = 2    // the MSS value's length
)

// maxComment bounds a rule's comment (nftables keeps at most 255 bytes of
// user data per rule).
const maxComment = 200

// ipFamily is how a rule matches one IP version in an inet table.
type ipFamily struct {
	nfproto  byte   // NFPROTO_IPV4 or NFPROTO_IPV6, for meta nfproto
	saddrOff uint32 // the source address's offset in the network header
	daddrOff uint32 // the destination address's offset in the network header
}

var (
	ipv4 = ipFamily{nfproto: unix.NFPROTO_IPV4, saddrOff: 12, daddrOff: 16}
	ipv6 = ipFamily{nfproto: unix.NFPROTO_IPV6, saddrOff: 8, daddrOff: 24}
)

func familyOf(p netip.Prefix) ipFamily {
	if p.Addr().Is4() {
		return ipv4
	}
	return ipv6
}

// sameFamily reports whether a and b are both IPv4 or both IPv6.
func sameFamily(a, b netip.Prefix) bool {
	return a.Addr().Is4() == b.Addr().Is4()
}

// buildRules returns every rule of rs, in the chains of chains.
func buildRules(rs Ruleset, chains map[string]*nftables.Chain) []*nftables.Rule {
	var rules []*nftables.Rule
	add := func(chain, comment string, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		if len(comment) > maxComment {
			comment = comment[:maxComment]
		}
		ch := chains[chain]
		rules = append(rules, &nftables.Rule{
			Table:    ch.Table,
			Chain:    ch,
			Exprs:    all,
			UserData: userdata.AppendString(nil, userdata.TypeComment, comment),
		})
	}

	for _, p := range rs.Peers {
		// In from the tunnel: the peer's address is the source and the
		// destination is translated; out to it, the other way round.
		for _, d := range []struct {
			maps             []fabric.Mapping
			chain, verb, dir string
			iface            expr.MetaKey
			nat              expr.NATType
			ingress          bool
		}{
			{p.Ingress, chainPrerouting, "ingress", "from", expr.MetaKeyIIFNAME, expr.NATTypeDestNAT, true},
			{p.Egress, chainPostrouting, "egress", "to", expr.MetaKeyOIFNAME, expr.NATTypeSourceNAT, false},
		} {
			for _, m := range d.maps {
				for _, a := range p.Addresses {
					if !sameFamily(a, m.From) {
						continue
					}
					f := familyOf(a)
					peerOff, fromOff := f.saddrOff, f.daddrOff
					if !d.ingress {
						peerOff, fromOff = f.daddrOff, f.saddrOff
					}
					add(d.chain,
						fmt.Sprintf("ferry peer %s: %s %s %s %s", p.Name, d.verb, m, d.dir, a),
						matchNFProto(f),
						matchIfname(d.iface, rs.Tunnel),
						matchPrefix(peerOff, a),
						matchPrefix(fromOff, m.From),
						netmap(d.nat, f, m))
				}
			}
		}
	}

	if rs.ClampMSS {
		add(chainForward, "ferry: clamp the MSS of SYNs into the tunnel",
			matchIfname(expr.MetaKeyOIFNAME, rs.Tunnel), clampMSS())
		add(chainForward, "ferry: clamp the MSS of SYNs from the tunnel",
			matchIfname(expr.MetaKeyIIFNAME, rs.Tunnel), clampMSS())
	}
	if !rs.filters() {
		for _, p := range rs.Peers {
			for _, a := range p.Addresses {
				f := familyOf(a)
				add(chainForward, fmt.Sprintf("ferry peer %s: from %s", p.Name, a),
					matchNFProto(f),
					matchIfname(expr.MetaKeyIIFNAME, rs.Tunnel),
					matchPrefix(f.saddrOff, a),
					countInto(rxPrefix+p.Name))
				add(chainForward, fmt.Sprintf("ferry peer %s: to %s", p.Name, a),
					matchNFProto(f),
					matchIfname(expr.MetaKeyOIFNAME, rs.Tunnel),
					matchPrefix(f.daddrOff, a),
					countInto(txPrefix+p.Name))
			}
		}
		return rules
	}

	// The forward filter: count and accept each peer's traffic with this
	// cluster, then drop and count the rest of what is the gateway's.
	for _, p := range rs.Peers {
		for _, a := range p.Addresses {
			f := familyOf(a)
			for _, l := range rs.Local {
				if !sameFamily(a, l) {
					continue
				}
				add(chainForward, fmt.Sprintf("ferry peer %s: accept from %s to %s", p.Name, a, l),
					matchNFProto(f),
					matchIfname(expr.MetaKeyIIFNAME, rs.Tunnel),
					matchPrefix(f.saddrOff, a),
					matchPrefix(f.daddrOff, l),
					countInto(rxPrefix+p.Name),
					verdict(expr.VerdictAccept))
				add(chainForward, fmt.Sprintf("ferry peer %s: accept from %s to %s", p.Name, l, a),
					matchNFProto(f),
					matchIfname(expr.MetaKeyIIFNAME, rs.Overlay),
					matchIfname(expr.MetaKeyOIFNAME, rs.Tunnel),
					matchPrefix(f.saddrOff, l),
					matchPrefix(f.daddrOff, a),
					countInto(txPrefix+p.Name),
					verdict(expr.VerdictAccept))
			}
		}
	}
	drop := func(what string, match ...[]expr.Any) {
		add(chainForward, "ferry: drop what else is forwarded "+what, append(match, countInto(forwardDropped), verdict(expr.VerdictDrop))...)
	}
	// What a peer sent, or what was meant for it, that the rules above did
	// not accept is counted for that peer as well.
	for _, p := range rs.Peers {
		for _, a := range p.Addresses {
			f := familyOf(a)
			add(chainForward, fmt.Sprintf("ferry peer %s: drop the rest from %s", p.Name, a),
				matchNFProto(f),
				matchIfname(expr.MetaKeyIIFNAME, rs.Tunnel),
				matchPrefix(f.saddrOff, a),
				countInto(dropPrefix+p.Name),
				countInto(forwardDropped),
				verdict(expr.VerdictDrop))
			add(chainForward, fmt.Sprintf("ferry peer %s: drop the rest to %s", p.Name, a),
				matchNFProto(f),
				matchIfname(expr.MetaKeyOIFNAME, rs.Tunnel),
				matchPrefix(f.daddrOff, a),
				countInto(dropPrefix+p.Name),
				countInto(forwardDropped),
				verdict(expr.VerdictDrop))
		}
	}
	for _, link := range []string{rs.Tunnel, rs.Overlay} {
		drop("from "+link, matchIfname(expr.MetaKeyIIFNAME, link))
		drop("to "+link, matchIfname(expr.MetaKeyOIFNAME, link))
	}
	for _, l := range rs.Local {
		f := familyOf(l)
		drop(fmt.Sprintf("to %s", l), matchNFProto(f), matchPrefix(f.daddrOff, l))
		drop(fmt.Sprintf("from %s", l), matchNFProto(f), matchPrefix(f.saddrOff, l))
	}
	return rules
}

// filters reports whether rs makes the forward chain a filter.
func (rs Ruleset) filters() bool { return len(rs.Local) > 0 }

// verdict ends the chain for the packet: accept or drop.
func verdict(kind expr.VerdictKind) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: kind}}
}

// matchNFProto matches packets of family f.
func matchNFProto(f ipFamily) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{f.nfproto}},
	}
}

// matchIfname matches the input (MetaKeyIIFNAME) or output
// (MetaKeyOIFNAME) interface's name exactly.
func matchIfname(key expr.MetaKey, name string) []expr.Any {
	data := make([]byte, unix.IFNAMSIZ)
	copy(data, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: data},
	}
}

// matchPrefix matches packets whose address at offset in the network
// header is in p. The caller has matched p's family.
func matchPrefix(offset uint32, p netip.Prefix) []expr.Any {
	if p.Bits() == 0 {
		return nil // the whole family
	}
	size := uint32(p.Addr().BitLen() / 8)
	exprs := []expr.Any{&expr.Payload{
		OperationType: expr.PayloadLoad, DestRegister: reg1,
		Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size,
	}}
	if p.Bits() < p.Addr().BitLen() {
		exprs = append(exprs, &expr.Bitwise{
			SourceRegister: reg1, DestRegister: reg1, Len: size,
			Mask: netmask(p), Xor: make([]byte, size),
		})
	}
	return append(exprs, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: p.Masked().Addr().AsSlice()})
}

// netmask returns p's network mask, as many bytes as p's addresses.
func netmask(p netip.Prefix) []byte {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i, bits := 0, p.Bits(); bits > 0; i, bits = i+1, bits-8 {
		if bits >= 8 {
			mask[i] = 0xff
		} else {
			mask[i] = byte(0xff) << (8 - bits)
		}
	}
	return mask
}

// lastAddr returns the last address of p: its network with every host bit
// set.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i, m := range netmask(p) {
		b[i] |= ^m
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// netmap translates the packet's source (NATTypeSourceNAT) or destination
// (NATTypeDestNAT) address into m.To keeping its host bits: the kernel's
// NETMAP mode of the nat expression takes the address range To spans and
// replaces only the bits the range's ends share.
func netmap(typ expr.NATType, f ipFamily, m fabric.Mapping) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: reg1, Data: m.To.Masked().Addr().AsSlice()},
		&expr.Immediate{Register: reg2, Data: lastAddr(m.To).AsSlice()},
		&expr.NAT{
			Type:       typ,
			Family:     uint32(f.nfproto),
			RegAddrMin: reg1,
			RegAddrMax: reg2,
			Prefix:     true,
		},
	}
}

// countInto adds the packet to the named counter object.
func countInto(counter string) []expr.Any {
	return []expr.Any{&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter}}
}

// clampMSS is "tcp flags & (syn|rst) == syn tcp option maxseg size set rt
// mtu": it lowers the MSS option of SYN and SYN-ACK segments to what the
// smaller MTU of the routes to the destination and back to the source
// allows (the kernel never raises it).
func clampMSS() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{
			OperationType: expr.PayloadLoad, DestRegister: reg1,
			Base: expr.PayloadBaseTransportHeader, Offset: tcpFlagsOffset, Len: 1,
		},
		&expr.Bitwise{
			SourceRegister: reg1, DestRegister: reg1, Len: 1,
			Mask: []byte{tcpFlagSYN | tcpFlagRST}, Xor: []byte{0},
		},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{tcpFlagSYN}},
		&expr.Rt{Register: reg1, Key: expr.RtTCPMSS},
		&expr.Byteorder{SourceRegister: reg1, DestRegister: reg1, Op: expr.ByteorderHton, Len: 2, Size: 2},
		&expr.Exthdr{
			SourceRegister: reg1, Type: tcpOptMaxseg, Offset: tcpOptMSSValue, Len: tcpOptMSSLen,
			Op: expr.ExthdrOpTcpopt,
		},
	}
}
