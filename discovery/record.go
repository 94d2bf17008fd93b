package discovery

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

const (
	// ServiceType is ferry's DNS-SD service type.
	ServiceType = "_ferry._tcp"
	// LinkDomain is the domain of multicast DNS.
	LinkDomain = "local."
	// TXTVersion is the version of the TXT format this package writes and
	// reads (key txtvers).
	TXTVersion = "1"
	// fingerprintPrefix starts a CA fingerprint (key ca).
	fingerprintPrefix = "sha256:"
	// servicesName lists a domain's service types (RFC 6763 section 9).
	servicesName = "_services._dns-sd._udp."
	// maxVersion bounds the version key's value.
	maxVersion = 64
)

// TXT keys of the record format (see the package documentation).
const (
	keyTXTVersion = "txtvers"
	keyClusterID  = "id"
	keyCA         = "ca"
	keyVersion    = "version"
)

// Cluster is a ferry cluster as discovery found it.
type Cluster struct {
	// Instance is the DNS-SD instance name (its first label).
	Instance string `json:"instance"`
	// ClusterID is the cluster's ferry ID (TXT id).
	ClusterID string `json:"clusterID"`
	// Endpoint is the https URL of its API server (from SRV).
	Endpoint string `json:"endpoint"`
	// CAFingerprint identifies the CA of its API server (TXT ca).
	CAFingerprint string `json:"caFingerprint"`
	// Version is the advertiser's ferry version, if it gave one.
	Version string `json:"version,omitempty"`
}

// Result is what one browse found: the clusters, and each instance skipped
// for bad records, with why.
type Result struct {
	Clusters []Cluster
	Skipped  []error
}

// ServiceDomain is the name under which ferry's instances in domain live,
// _ferry._tcp.<domain>.
func ServiceDomain(domain string) string {
	return ServiceType + "." + dns.Fqdn(domain)
}

// instanceRecords is what DNS-SD says of one service instance: its SRV
// record, TXT strings, and the addresses of the SRV target when known.
type instanceRecords struct {
	Name   string
	Target string
	Port   uint16
	TXT    []string
	Addrs  []netip.Addr
}

// cluster reads one instance under serviceDomain into a Cluster; the error
// names the record and field that break the format.
func (r instanceRecords) cluster(serviceDomain string) (Cluster, error) {
	instance, err := instanceLabel(r.Name, serviceDomain)
	if err != nil {
		return Cluster{}, err
	}
	host, err := endpointHost(r.Target, r.Addrs)
	if err != nil {
		return Cluster{}, fmt.Errorf("instance %q: %w", instance, err)
	}
	if r.Port == 0 {
		return Cluster{}, fmt.Errorf("instance %q: SRV port 0: no service there", instance)
	}
	c, err := parseTXT(r.TXT)
	if err != nil {
		return Cluster{}, fmt.Errorf("instance %q: %w", instance, err)
	}
	c.Instance = instance
	// url.URL escapes the zone of a link-local IPv6 address (%25).
	c.Endpoint = (&url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(r.Port)))}).String()
	if _, err := url.Parse(c.Endpoint); err != nil {
		// e.g. a link-local address whose zone no URL can carry.
		return Cluster{}, fmt.Errorf("instance %q: SRV target %q: endpoint %s: %w", instance, r.Target, c.Endpoint, err)
	}
	return c, nil
}

// instanceLabel is the first label of name, which must be one label under
// serviceDomain.
func instanceLabel(name, serviceDomain string) (string, error) {
	if _, ok := dns.IsDomainName(name); !ok || !dns.IsFqdn(name) {
		return "", fmt.Errorf("PTR target %q: not a domain name", name)
	}
	idx := dns.Split(name)
	if len(idx) < 2 || !strings.EqualFold(name[idx[1]:], serviceDomain) {
		return "", fmt.Errorf("PTR target %q: not an instance of %s", name, serviceDomain)
	}
	return name[:idx[1]-1], nil
}

// endpointHost is the host of the endpoint an SRV target names: the target
// itself, or its address when it is a link-local (.local) name.
func endpointHost(target string, addrs []netip.Addr) (string, error) {
	switch _, ok := dns.IsDomainName(target); {
	case target == "" || target == ".":
		return "", fmt.Errorf("SRV target %q: no service there", target)
	case !ok || !dns.IsFqdn(target):
		return "", fmt.Errorf("SRV target %q: not a domain name", target)
	}
	// A DNS label may hold any byte; an endpoint's host may not.
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(strings.TrimSuffix(target, "."))); len(errs) > 0 {
		return "", fmt.Errorf("SRV target %q: not a host name: %s", target, errs[0])
	}
	if !dns.IsSubDomain(LinkDomain, target) {
		return strings.TrimSuffix(target, "."), nil
	}
	var v6 string
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			return a.Unmap().String(), nil
		}
		if v6 == "" {
			v6 = a.String()
		}
	}
	if v6 == "" {
		return "", fmt.Errorf("SRV target %q: a link-local name without an A or AAAA record", target)
	}
	return v6, nil
}

// parseTXT reads the TXT strings of an instance (RFC 6763 section 6: keys
// are case-insensitive, the first of a repeated key counts, unknown keys
// and strings without a key are ignored). Every bad field is named.
func parseTXT(txt []string) (Cluster, error) {
	kv := map[string]string{}
	for _, s := range txt {
		k, v, _ := strings.Cut(s, "=")
		k = strings.ToLower(k)
		if _, seen := kv[k]; k == "" || seen {
			continue
		}
		kv[k] = v
	}
	var errs []error
	if v, ok := kv[keyTXTVersion]; !ok {
		errs = append(errs, fmt.Errorf("TXT %s: missing (want %s=%s)", keyTXTVersion, keyTXTVersion, TXTVersion))
	} else if v != TXTVersion {
		errs = append(errs, fmt.Errorf("TXT %s %q: this ferry reads version %s only", keyTXTVersion, v, TXTVersion))
	}
	var c Cluster
	if v, ok := kv[keyClusterID]; !ok {
		errs = append(errs, fmt.Errorf("TXT %s: missing (the cluster ID)", keyClusterID))
	} else if err := ferryv1alpha1.ValidateClusterID("TXT "+keyClusterID, v); err != nil {
		errs = append(errs, err)
	} else {
		c.ClusterID = v
	}
	if v, ok := kv[keyCA]; !ok {
		errs = append(errs, fmt.Errorf("TXT %s: missing (the API server's CA fingerprint, %s<hex>)", keyCA, fingerprintPrefix))
	} else if err := ValidateFingerprint(v); err != nil {
		errs = append(errs, fmt.Errorf("TXT %s: %w", keyCA, err))
	} else {
		c.CAFingerprint = v
	}
	if v, ok := kv[keyVersion]; ok {
		if err := validateVersion(v); err != nil {
			errs = append(errs, fmt.Errorf("TXT %s: %w", keyVersion, err))
		} else {
			c.Version = v
		}
	}
	return c, errors.Join(errs...)
}

// ValidateFingerprint says why fp is not a CA fingerprint:
// "sha256:" and 64 lowercase hex digits.
func ValidateFingerprint(fp string) error {
	hexDigits, ok := strings.CutPrefix(fp, fingerprintPrefix)
	if !ok || len(hexDigits) != 2*sha256.Size || strings.ToLower(hexDigits) != hexDigits {
		return fmt.Errorf("%q: want %s and %d lowercase hex digits", fp, fingerprintPrefix, 2*sha256.Size)
	}
	if _, err := hex.DecodeString(hexDigits); err != nil {
		return fmt.Errorf("%q: want %s and %d lowercase hex digits", fp, fingerprintPrefix, 2*sha256.Size)
	}
	return nil
}

func validateVersion(v string) error {
	if len(v) > maxVersion {
		return fmt.Errorf("%d characters: at most %d", len(v), maxVersion)
	}
	for _, r := range v {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return fmt.Errorf("%q: printable ASCII without spaces only", v)
		}
	}
	return nil
}

// Fingerprints are the CA fingerprints of the certificates in a PEM bundle
// (a kubeconfig's certificate-authority-data), in order.
func Fingerprints(bundle []byte) ([]string, error) {
	var fps []string
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("CA bundle: certificate %d: %w", len(fps)+1, err)
		}
		sum := sha256.Sum256(block.Bytes)
		fps = append(fps, fingerprintPrefix+hex.EncodeToString(sum[:]))
	}
	if len(fps) == 0 {
		return nil, errors.New("CA bundle: no PEM certificate in it")
	}
	return fps, nil
}

// Advertisement is what a cluster publishes about itself.
type Advertisement struct {
	// ClusterID names the instance and goes in TXT id.
	ClusterID string
	// Server is the https URL of the API server as peers reach it.
	Server string
	// CAFingerprint is the fingerprint of the API server's CA.
	CAFingerprint string
	// Version is ferry's version, optional.
	Version string
	// Addresses of Server's host, for the local link, whose answers carry
	// them (needed there when the host is a name); ignored elsewhere.
	Addresses []netip.Addr
}

// Records are the DNS-SD records of a in domain, in the order a responder
// sends them: the PTR, the instance's SRV and TXT, the target's addresses
// (local link only), and the service type's enumeration PTR. Errors name the
// field of a that cannot be published.
func (a Advertisement) Records(domain string, ttl uint32) ([]dns.RR, error) {
	domain = dns.Fqdn(domain)
	if _, ok := dns.IsDomainName(domain); !ok || domain == "." {
		return nil, fmt.Errorf("domain %q: not a domain name", domain)
	}
	if err := ferryv1alpha1.ValidateClusterID("cluster ID", a.ClusterID); err != nil {
		return nil, err
	}
	if err := ValidateFingerprint(a.CAFingerprint); err != nil {
		return nil, fmt.Errorf("CA fingerprint: %w", err)
	}
	if a.Version != "" {
		if err := validateVersion(a.Version); err != nil {
			return nil, fmt.Errorf("version: %w", err)
		}
	}
	host, port, err := splitServer(a.Server)
	if err != nil {
		return nil, err
	}
	link := dns.IsSubDomain(LinkDomain, domain)
	target := dns.Fqdn(host)
	addrs := a.Addresses
	if ip, err := netip.ParseAddr(host); err == nil {
		if !link {
			return nil, fmt.Errorf("server %q: its host is an IP address; unicast DNS-SD needs a host name that the API server's certificate covers", a.Server)
		}
		target = a.ClusterID + "." + domain
		addrs = []netip.Addr{ip}
	} else if _, ok := dns.IsDomainName(target); !ok {
		return nil, fmt.Errorf("server %q: host %q is not a domain name", a.Server, host)
	}
	if link && len(addrs) == 0 {
		return nil, fmt.Errorf("server %q: the local link needs the addresses of %s", a.Server, host)
	}
	service := ServiceDomain(domain)
	instance := a.ClusterID + "." + service
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	txt := []string{keyTXTVersion + "=" + TXTVersion, keyClusterID + "=" + a.ClusterID, keyCA + "=" + a.CAFingerprint}
	if a.Version != "" {
		txt = append(txt, keyVersion+"="+a.Version)
	}
	rrs := []dns.RR{
		&dns.PTR{Hdr: hdr(service, dns.TypePTR), Ptr: instance},
		&dns.SRV{Hdr: hdr(instance, dns.TypeSRV), Port: port, Target: target},
		&dns.TXT{Hdr: hdr(instance, dns.TypeTXT), Txt: txt},
	}
	if link {
		for _, ip := range addrs {
			if ip = ip.Unmap(); ip.Is4() {
				rrs = append(rrs, &dns.A{Hdr: hdr(target, dns.TypeA), A: ip.AsSlice()})
			} else {
				rrs = append(rrs, &dns.AAAA{Hdr: hdr(target, dns.TypeAAAA), AAAA: ip.AsSlice()})
			}
		}
	}
	rrs = append(rrs, &dns.PTR{Hdr: hdr(servicesName+domain, dns.TypePTR), Ptr: service})
	return rrs, nil
}

// splitServer reads an API server URL: https, a host, a port (443 when
// none), no path.
func splitServer(server string) (string, uint16, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", 0, fmt.Errorf("server %q: %w", server, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return "", 0, fmt.Errorf("server %q: want https://host[:port]", server)
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return "", 0, fmt.Errorf("server %q: a path, query or user cannot be advertised; want https://host[:port]", server)
	}
	port := uint64(443)
	if p := u.Port(); p != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil || port == 0 {
			return "", 0, fmt.Errorf("server %q: port %q: want 1-65535", server, p)
		}
	}
	return u.Hostname(), uint16(port), nil
}
