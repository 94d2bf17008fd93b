package nat

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ferry-io/ferry/fabric"
)

// Limits of the names the kernel takes.
const (
	maxTableName  = 255 // NFT_NAME_MAXLEN, less its NUL
	maxIfname     = 15  // IFNAMSIZ, less its NUL
	maxLabel      = 63  // a DNS label
	maxCounterLen = 255 // NFT_OBJ_MAXNAMELEN, less its NUL
)

// Validate checks that rs can be installed and means one thing: every
// problem found is reported, each naming its field (such as
// Peers[1].Egress[0]).
func (rs Ruleset) Validate() error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}

	switch {
	case rs.Table == "":
		fail("Table is empty")
	case len(rs.Table) > maxTableName:
		fail("Table %.20q...: longer than %d bytes", rs.Table, maxTableName)
	case strings.ContainsFunc(rs.Table, isControl):
		fail("Table %q: control characters are not allowed", rs.Table)
	}
	if err := checkIfname(rs.Tunnel); err != nil {
		fail("Tunnel %w", err)
	}
	for i, l := range rs.Local {
		if err := checkPrefix(l); err != nil {
			fail("Local[%d] %w", i, err)
		}
	}
	if rs.filters() {
		if err := checkIfname(rs.Overlay); err != nil {
			fail("Overlay %w (the filter, on with Local, needs it)", err)
		} else if rs.Overlay == rs.Tunnel {
			fail("Overlay %q: the same link as Tunnel", rs.Overlay)
		}
	}

	type owned struct {
		field string
		p     netip.Prefix
	}
	var addresses []owned // every peer's addresses so far
	names := map[string]int{}
	for i, p := range rs.Peers {
		peer := fmt.Sprintf("Peers[%d]", i)
		if err := checkLabel(p.Name); err != nil {
			fail("%s.Name %w", peer, err)
		} else if j, dup := names[p.Name]; dup {
			fail("%s.Name %q: Peers[%d] has the same name", peer, p.Name, j)
		} else {
			names[p.Name] = i
		}

		if len(p.Addresses) == 0 {
			fail("%s.Addresses is empty: the peer would match no traffic", peer)
		}
		has4, has6 := false, false
		for j, a := range p.Addresses {
			field := fmt.Sprintf("%s.Addresses[%d]", peer, j)
			if err := checkPrefix(a); err != nil {
				fail("%s %w", field, err)
				continue
			}
			has4, has6 = has4 || a.Addr().Is4(), has6 || a.Addr().Is6()
			for _, o := range addresses {
				if a.Overlaps(o.p) {
					fail("%s %s overlaps %s %s", field, a, o.field, o.p)
				}
			}
			addresses = append(addresses, owned{field, a})
		}

		for _, dir := range []struct {
			name     string
			mappings []fabric.Mapping
		}{{"Ingress", p.Ingress}, {"Egress", p.Egress}} {
			var froms []owned
			for j, m := range dir.mappings {
				field := fmt.Sprintf("%s.%s[%d]", peer, dir.name, j)
				if err := checkMapping(m); err != nil {
					fail("%s %w", field, err)
					continue
				}
				if m.From.Addr().Is4() && !has4 || m.From.Addr().Is6() && !has6 {
					fail("%s %s: %s.Addresses has no %s prefix, so it would never apply", field, m, peer, familyName(m.From))
				}
				for _, o := range froms {
					if m.From.Overlaps(o.p) {
						fail("%s %s: From overlaps that of %s (%s)", field, m, o.field, o.p)
					}
				}
				froms = append(froms, owned{field, m.From})
			}
		}
	}
	return errors.Join(errs...)
}

// checkIfname checks an interface name as the kernel does.
func checkIfname(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > maxIfname:
		return fmt.Errorf("%q: longer than %d bytes", name, maxIfname)
	case name == "." || name == "..":
		return fmt.Errorf("%q: not an interface name", name)
	case strings.ContainsAny(name, "/:") || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("%q: an interface name has no '/', ':', spaces or control characters", name)
	}
	return nil
}

// checkLabel checks that name is a DNS label (RFC 1123), as cluster IDs
// are.
func checkLabel(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > maxLabel:
		return fmt.Errorf("%q: longer than %d characters", name, maxLabel)
	case len(rxPrefix+name) > maxCounterLen:
		return fmt.Errorf("%q: too long for a counter name", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(name)-1
		if !ok {
			return fmt.Errorf("%q: not a DNS label (lower case letters, digits and inner '-')", name)
		}
	}
	return nil
}

// checkPrefix checks a peer's address prefix.
func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return errors.New("is not a valid prefix")
	case p.Addr().Zone() != "":
		return fmt.Errorf("%s: IPv6 zones are not allowed", p)
	case p.Addr().Is4In6():
		return fmt.Errorf("%s: an IPv4-mapped IPv6 prefix is not allowed (write it as IPv4)", p)
	case p.Masked() != p:
		return fmt.Errorf("%s: host bits set (the network is %s)", p, p.Masked())
	}
	return nil
}

// checkMapping checks a mapping's prefixes, as fabric.NewMapping does, and
// what this package adds.
func checkMapping(m fabric.Mapping) error {
	for _, side := range []struct {
		name string
		p    netip.Prefix
	}{{"From", m.From}, {"To", m.To}} {
		if !side.p.IsValid() {
			return fmt.Errorf("%s: %s is not a valid prefix", m, side.name)
		}
		if err := checkPrefix(side.p); err != nil {
			return fmt.Errorf("%s: %s %w", m, side.name, err)
		}
	}
	if _, err := fabric.NewMapping(m.From, m.To); err != nil {
		return err
	}
	return nil
}

func familyName(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }
