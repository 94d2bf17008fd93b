package discovery

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DNSBrowser browses a unicast DNS domain through one DNS server.
type DNSBrowser struct {
	// Server is the DNS server, host:port.
	Server string
	// Timeout bounds each query.
	Timeout time.Duration
}

// DefaultDNSServer is the first name server of resolv.conf, host:port.
func DefaultDNSServer(resolvConf string) (string, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", resolvConf, err)
	}
	if len(cfg.Servers) == 0 {
		return "", fmt.Errorf("%s names no name server", resolvConf)
	}
	return net.JoinHostPort(cfg.Servers[0], cfg.Port), nil
}

// Browse lists the ferry clusters published in domain: the PTR records of
// _ferry._tcp.<domain>, then each instance's SRV and TXT records (from the
// answer's additional section when the server put them there, RFC 6763
// section 12, else asked for). An instance whose records are bad or
// missing is skipped and named in Result.Skipped; a failure to ask at all
// is an error.
func (b DNSBrowser) Browse(ctx context.Context, domain string) (Result, error) {
	if _, ok := dns.IsDomainName(domain); !ok || dns.Fqdn(domain) == "." {
		return Result{}, fmt.Errorf("domain %q: not a domain name", domain)
	}
	service := ServiceDomain(domain)
	resp, err := b.query(ctx, service, dns.TypePTR)
	if err != nil {
		return Result{}, err
	}
	var res Result
	seen := map[string]bool{}
	for _, rr := range resp.Answer {
		ptr, ok := rr.(*dns.PTR)
		if !ok || !strings.EqualFold(ptr.Hdr.Name, service) || seen[strings.ToLower(ptr.Ptr)] {
			continue
		}
		seen[strings.ToLower(ptr.Ptr)] = true
		c, err := b.instance(ctx, ptr.Ptr, service, resp.Extra)
		if err != nil {
			res.Skipped = append(res.Skipped, err)
			continue
		}
		res.Clusters = append(res.Clusters, c)
	}
	return res, nil
}

// instance reads one instance's records, from extra when they are there.
func (b DNSBrowser) instance(ctx context.Context, name, service string, extra []dns.RR) (Cluster, error) {
	if _, err := instanceLabel(name, service); err != nil {
		return Cluster{}, err
	}
	srv, txt := instanceRRs(name, extra)
	if srv == nil {
		resp, err := b.query(ctx, name, dns.TypeSRV)
		if err != nil {
			return Cluster{}, fmt.Errorf("instance %q: %w", name, err)
		}
		srv, _ = instanceRRs(name, resp.Answer)
	}
	if txt == nil {
		resp, err := b.query(ctx, name, dns.TypeTXT)
		if err != nil {
			return Cluster{}, fmt.Errorf("instance %q: %w", name, err)
		}
		_, txt = instanceRRs(name, resp.Answer)
	}
	if srv == nil {
		return Cluster{}, fmt.Errorf("instance %q: no SRV record", name)
	}
	if txt == nil {
		return Cluster{}, fmt.Errorf("instance %q: no TXT record", name)
	}
	return instanceRecords{Name: name, Target: srv.Target, Port: srv.Port, TXT: txt.Txt}.cluster(service)
}

// instanceRRs picks name's SRV record of the lowest priority (the highest
// weight among equals, RFC 2782) and its first TXT record from rrs.
func instanceRRs(name string, rrs []dns.RR) (*dns.SRV, *dns.TXT) {
	var srv *dns.SRV
	var txt *dns.TXT
	for _, rr := range rrs {
		if !strings.EqualFold(rr.Header().Name, name) {
			continue
		}
		switch rr := rr.(type) {
		case *dns.SRV:
			if srv == nil || rr.Priority < srv.Priority || rr.Priority == srv.Priority && rr.Weight > srv.Weight {
				srv = rr
			}
		case *dns.TXT:
			if txt == nil {
				txt = rr
			}
		}
	}
	return srv, txt
}

// query asks the server one question, over TCP again when the UDP answer
// was truncated. A name that does not exist is an empty answer.
func (b DNSBrowser) query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(dns.DefaultMsgSize, false)
	c := &dns.Client{Timeout: b.Timeout}
	resp, _, err := c.ExchangeContext(ctx, m, b.Server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, b.Server)
	}
	if err != nil {
		return nil, fmt.Errorf("ask %s for %s %s: %w", b.Server, dns.TypeToString[qtype], name, err)
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		return resp, nil
	default:
		return nil, fmt.Errorf("ask %s for %s %s: %s", b.Server, dns.TypeToString[qtype], name, dns.RcodeToString[resp.Rcode])
	}
}
