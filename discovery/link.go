package discovery

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/mdns"
	"github.com/miekg/dns"
)

// linkTTL is the TTL of the records a Responder sends (RFC 6762 section 10
// recommends 120 s for records that name a host).
const linkTTL = 120

// LinkBrowser browses the local link by multicast DNS.
type LinkBrowser struct {
	// Interface sends the query; nil lets the system choose.
	Interface *net.Interface
	// Timeout is how long answers are collected.
	Timeout time.Duration
	// Log receives the mDNS library's complaints (at V(1)).
	Log logr.Logger
}

// Browse multicasts queries for _ferry._tcp.local. and collects the
// instances answered within Timeout. An instance is reported once its
// SRV, TXT and address records have arrived; one whose records break the
// format is skipped and named in Result.Skipped.
func (b LinkBrowser) Browse(ctx context.Context) (Result, error) {
	entries := make(chan *mdns.ServiceEntry, 64)
	collected := make(chan Result, 1)
	service := ServiceDomain(LinkDomain)
	go func() {
		var res Result
		seen := map[string]bool{}
		for e := range entries {
			// The library passes on every complete answer it hears, for any
			// service.
			name := strings.ToLower(e.Name)
			if seen[name] || !dns.IsSubDomain(service, e.Name) {
				continue
			}
			seen[name] = true
			c, err := entryRecords(e).cluster(service)
			if err != nil {
				res.Skipped = append(res.Skipped, err)
				continue
			}
			res.Clusters = append(res.Clusters, c)
		}
		collected <- res
	}()
	// The library sends one query; repeat it at growing intervals (RFC 6762
	// section 5.2) within Timeout, in case the first one or its answer was
	// lost.
	deadline := time.Now().Add(b.Timeout)
	var err error
	for interval := time.Second; err == nil && ctx.Err() == nil; interval *= 2 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		err = mdns.QueryContext(ctx, &mdns.QueryParam{
			Service:   ServiceType,
			Domain:    LinkDomain,
			Timeout:   min(interval, left),
			Interface: b.Interface,
			Entries:   entries,
			Logger:    libraryLogger(b.Log),
		})
	}
	close(entries)
	res := <-collected
	if err != nil {
		return Result{}, fmt.Errorf("query %s by multicast DNS: %w", service, err)
	}
	return res, nil
}

// entryRecords are the records of what the mDNS library reports.
func entryRecords(e *mdns.ServiceEntry) instanceRecords {
	r := instanceRecords{Name: e.Name, Target: e.Host, TXT: e.InfoFields}
	if e.Port > 0 && e.Port <= 0xffff {
		r.Port = uint16(e.Port)
	}
	if a, ok := netip.AddrFromSlice(e.AddrV4); ok {
		r.Addrs = append(r.Addrs, a.Unmap())
	}
	if e.AddrV6IPAddr != nil {
		if a, ok := netip.AddrFromSlice(e.AddrV6IPAddr.IP); ok {
			r.Addrs = append(r.Addrs, a.WithZone(e.AddrV6IPAddr.Zone))
		}
	}
	return r
}

// Responder answers multicast DNS queries for one cluster's records on the
// local link, until Close.
type Responder struct {
	server *mdns.Server
}

// NewResponder starts answering for a on iface (nil: the system's default
// multicast interface).
func NewResponder(iface *net.Interface, a Advertisement, log logr.Logger) (*Responder, error) {
	rrs, err := a.Records(LinkDomain, linkTTL)
	if err != nil {
		return nil, err
	}
	return serveRecords(iface, rrs, log)
}

// serveRecords answers for rrs, records of one instance in Records' order.
func serveRecords(iface *net.Interface, rrs []dns.RR, log logr.Logger) (*Responder, error) {
	s, err := mdns.NewServer(&mdns.Config{Zone: recordZone(rrs), Iface: iface, Logger: libraryLogger(log)})
	if err != nil {
		return nil, fmt.Errorf("answer multicast DNS on %s: %w", ifaceName(iface), err)
	}
	return &Responder{server: s}, nil
}

// Close stops answering.
func (r *Responder) Close() error { return r.server.Shutdown() }

// recordZone answers questions from a fixed set of records.
type recordZone []dns.RR

// Records answers q with the records of its name and type; a question for
// the service's instances also gets the instances' records (RFC 6763
// section 12.1), addresses last, as the mDNS library's browser wants them.
func (z recordZone) Records(q dns.Question) []dns.RR {
	var out []dns.RR
	browse := false
	for _, rr := range z {
		h := rr.Header()
		if strings.EqualFold(h.Name, q.Name) && (q.Qtype == dns.TypeANY || q.Qtype == h.Rrtype) {
			out = append(out, rr)
			browse = browse || h.Rrtype == dns.TypePTR && dns.IsSubDomain(ServiceDomain(LinkDomain), rr.(*dns.PTR).Ptr)
		}
	}
	if !browse {
		return out
	}
	for _, rr := range z {
		if rr.Header().Rrtype != dns.TypePTR {
			out = append(out, rr)
		}
	}
	return out
}

// libraryLogger adapts l for the mDNS library, which logs with package log.
func libraryLogger(l logr.Logger) *log.Logger {
	if l.GetSink() == nil {
		return log.New(io.Discard, "", 0)
	}
	return log.New(logWriter{l.V(1)}, "", 0)
}

type logWriter struct{ l logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(p)), "library", "hashicorp/mdns")
	return len(p), nil
}

func ifaceName(iface *net.Interface) string {
	if iface == nil {
		return "the default interface"
	}
	return "interface " + iface.Name
}
