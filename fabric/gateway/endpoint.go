package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseEndpoint parses ferry-gateway's --endpoint, the address:port peers
// reach the gateway's WireGuard UDP port at: a DNS name, an IPv4 address or
// a bracketed IPv6 address ([fd00::1]:51820), and a port 1-65535. The
// chart's values.schema.json holds network.gateway.endpoint to the same
// rule; a test of the chart compares the two.
func ParseEndpoint(s string) (host string, port int32, err error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("want address:port: %w", err)
	}
	p, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q is not a port number (1-65535)", portText)
	}
	bracketed := strings.HasPrefix(s, "[")
	if a, err := netip.ParseAddr(host); err == nil {
		switch {
		case a.Zone() != "":
			return "", 0, fmt.Errorf("address %q: an IPv6 zone is not allowed (peers are elsewhere)", host)
		case a.Is6() && !bracketed:
			return "", 0, fmt.Errorf("address %q: write an IPv6 address in brackets, such as [%s]:%s", host, host, portText)
		case a.Is4() && bracketed:
			return "", 0, fmt.Errorf("address %q: only an IPv6 address is written in brackets", host)
		}
		return host, int32(p), nil
	}
	if bracketed {
		return "", 0, fmt.Errorf("address %q: only an IPv6 address is written in brackets", host)
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return "", 0, fmt.Errorf("address %q is neither an IP address nor a DNS name: %s", host, errs[0])
	}
	return host, int32(p), nil
}
