package discovery

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/ferry-io/ferry/test/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m) }

const testFingerprint = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var goodTXT = []string{"txtvers=1", "id=cluster-a", "ca=" + testFingerprint, "version=v0.3.0"}

func TestParseTXTReadsEveryKey(t *testing.T) {
	got, err := parseTXT(append([]string{"ID=cluster-a"}, "txtvers=1", "id=ignored-second", "ca="+testFingerprint, "version=v0.3.0", "unknown=x", "=novalue", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{ClusterID: "cluster-a", CAFingerprint: testFingerprint, Version: "v0.3.0"}
	if got != want {
		t.Errorf("parseTXT = %+v, want %+v (keys case-insensitive, the first of a repeated key counts)", got, want)
	}
}

func TestParseTXTNamesTheBadField(t *testing.T) {
	for name, tc := range map[string]struct {
		txt  []string
		want []string
	}{
		"no version":         {[]string{"id=a", "ca=" + testFingerprint}, []string{"TXT txtvers: missing"}},
		"future version":     {[]string{"txtvers=2", "id=a", "ca=" + testFingerprint}, []string{`TXT txtvers "2"`}},
		"no id":              {[]string{"txtvers=1", "ca=" + testFingerprint}, []string{"TXT id: missing"}},
		"bad id":             {[]string{"txtvers=1", "id=Not_A_Label", "ca=" + testFingerprint}, []string{`TXT id "Not_A_Label"`}},
		"no ca":              {[]string{"txtvers=1", "id=a"}, []string{"TXT ca: missing"}},
		"short ca":           {[]string{"txtvers=1", "id=a", "ca=sha256:abcd"}, []string{`TXT ca: "sha256:abcd"`}},
		"md5 ca":             {[]string{"txtvers=1", "id=a", "ca=md5:" + strings.Repeat("a", 64)}, []string{"TXT ca:"}},
		"upper-case ca":      {[]string{"txtvers=1", "id=a", "ca=" + strings.ToUpper(testFingerprint)}, []string{"TXT ca:"}},
		"not hex ca":         {[]string{"txtvers=1", "id=a", "ca=sha256:" + strings.Repeat("g", 64)}, []string{"TXT ca:"}},
		"spaced version":     {[]string{"txtvers=1", "id=a", "ca=" + testFingerprint, "version=v 1"}, []string{"TXT version:"}},
		"everything at once": {nil, []string{"TXT txtvers: missing", "TXT id: missing", "TXT ca: missing"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseTXT(tc.txt)
			if err == nil {
				t.Fatalf("parseTXT(%q) accepted", tc.txt)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("parseTXT(%q) = %q, want it to say %q", tc.txt, err, w)
				}
			}
		})
	}
}

func TestInstanceRecordsMakeTheEndpoint(t *testing.T) {
	service := ServiceDomain("example.org")
	for name, tc := range map[string]struct {
		r    instanceRecords
		want string
	}{
		"unicast name":           {instanceRecords{Name: "a." + service, Target: "api.a.example.org.", Port: 6443}, "https://api.a.example.org:6443"},
		"local name, IPv4":       {instanceRecords{Name: "a." + service, Target: "a.local.", Port: 6443, Addrs: []netip.Addr{netip.MustParseAddr("fe80::1"), netip.MustParseAddr("192.0.2.7")}}, "https://192.0.2.7:6443"},
		"local name, IPv6 only":  {instanceRecords{Name: "a." + service, Target: "a.local.", Port: 443, Addrs: []netip.Addr{netip.MustParseAddr("2001:db8::7")}}, "https://[2001:db8::7]:443"},
		"local name, zoned IPv6": {instanceRecords{Name: "a." + service, Target: "a.local.", Port: 443, Addrs: []netip.Addr{netip.MustParseAddr("fe80::7%eth0")}}, "https://[fe80::7%25eth0]:443"},
		"other name with addrs":  {instanceRecords{Name: "a." + service, Target: "api.example.org.", Port: 443, Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.7")}}, "https://api.example.org:443"},
	} {
		tc.r.TXT = goodTXT
		c, err := tc.r.cluster(service)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if c.Endpoint != tc.want || c.Instance != "a" {
			t.Errorf("%s: endpoint %q instance %q, want %q and \"a\"", name, c.Endpoint, c.Instance, tc.want)
		}
	}
}

func TestInstanceRecordsNameTheBadRecord(t *testing.T) {
	service := ServiceDomain("example.org")
	for name, tc := range map[string]struct {
		r    instanceRecords
		want string
	}{
		"other service":       {instanceRecords{Name: "a._http._tcp.example.org.", Target: "h.", Port: 1}, `PTR target "a._http._tcp.example.org.": not an instance of _ferry._tcp.example.org.`},
		"two labels":          {instanceRecords{Name: "a.b." + service, Target: "h.", Port: 1}, "not an instance of"},
		"service itself":      {instanceRecords{Name: service, Target: "h.", Port: 1}, "not an instance of"},
		"no target":           {instanceRecords{Name: "a." + service, Target: ".", Port: 1}, `SRV target ".": no service there`},
		"relative target":     {instanceRecords{Name: "a." + service, Target: "h", Port: 1}, `SRV target "h": not a domain name`},
		"port 0":              {instanceRecords{Name: "a." + service, Target: "h.", Port: 0}, "SRV port 0"},
		"local, no address":   {instanceRecords{Name: "a." + service, Target: "a.local.", Port: 1}, "without an A or AAAA record"},
		"target with a colon": {instanceRecords{Name: "a." + service, Target: "h:1.", Port: 1}, "not a host name"},
	} {
		tc.r.TXT = goodTXT
		_, err := tc.r.cluster(service)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func TestRecordsReadBackAsTheCluster(t *testing.T) {
	for _, tc := range []struct {
		domain, server, want string
		addrs                []netip.Addr
	}{
		{"example.org", "https://api.a.example.org:6443", "https://api.a.example.org:6443", nil},
		{"local.", "https://192.0.2.9:6443", "https://192.0.2.9:6443", nil},
		{"local", "https://[2001:db8::9]", "https://[2001:db8::9]:443", nil},
		{"local.", "https://api.a.example.org:6443", "https://api.a.example.org:6443", []netip.Addr{netip.MustParseAddr("192.0.2.9")}},
	} {
		ad := Advertisement{ClusterID: "a", Server: tc.server, CAFingerprint: testFingerprint, Version: "v1", Addresses: tc.addrs}
		rrs, err := ad.Records(tc.domain, 60)
		if err != nil {
			t.Fatalf("%s in %s: %v", tc.server, tc.domain, err)
		}
		// Through text and back, as a zone file carries them.
		var r instanceRecords
		for _, rr := range rrs {
			rr, err := dns.NewRR(rr.String())
			if err != nil {
				t.Fatalf("%s: %v", rr, err)
			}
			switch rr := rr.(type) {
			case *dns.PTR:
				if rr.Hdr.Name == ServiceDomain(tc.domain) {
					r.Name = rr.Ptr
				}
			case *dns.SRV:
				r.Target, r.Port = rr.Target, rr.Port
			case *dns.TXT:
				r.TXT = rr.Txt
			case *dns.A:
				r.Addrs = append(r.Addrs, netip.MustParseAddr(rr.A.String()))
			case *dns.AAAA:
				r.Addrs = append(r.Addrs, netip.MustParseAddr(rr.AAAA.String()))
			}
		}
		c, err := r.cluster(ServiceDomain(tc.domain))
		if err != nil {
			t.Fatalf("%s in %s: read back: %v", tc.server, tc.domain, err)
		}
		want := Cluster{Instance: "a", ClusterID: "a", Endpoint: tc.want, CAFingerprint: testFingerprint, Version: "v1"}
		if c != want {
			t.Errorf("%s in %s: read back %+v, want %+v", tc.server, tc.domain, c, want)
		}
	}
}

func TestRecordsRefuseWhatCannotBePublished(t *testing.T) {
	good := Advertisement{ClusterID: "a", Server: "https://api.example.org:6443", CAFingerprint: testFingerprint}
	for name, tc := range map[string]struct {
		edit   func(*Advertisement)
		domain string
		want   string
	}{
		"IP in unicast":      {func(a *Advertisement) { a.Server = "https://192.0.2.1:6443" }, "example.org", "its host is an IP address"},
		"name without addrs": {func(*Advertisement) {}, "local", "the local link needs the addresses of api.example.org"},
		"http":               {func(a *Advertisement) { a.Server = "http://api.example.org" }, "example.org", "want https://host[:port]"},
		"path":               {func(a *Advertisement) { a.Server = "https://api.example.org/k8s" }, "example.org", "a path, query or user"},
		"port":               {func(a *Advertisement) { a.Server = "https://api.example.org:0" }, "example.org", `port "0"`},
		"cluster ID":         {func(a *Advertisement) { a.ClusterID = "A B" }, "example.org", `cluster ID "A B"`},
		"fingerprint":        {func(a *Advertisement) { a.CAFingerprint = "abc" }, "example.org", "CA fingerprint"},
		"domain":             {func(*Advertisement) {}, "exa mple..org", "domain"},
	} {
		ad := good
		tc.edit(&ad)
		if _, err := ad.Records(tc.domain, 60); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func TestFingerprintsOfABundle(t *testing.T) {
	if _, err := Fingerprints([]byte("not PEM")); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("Fingerprints(not PEM) = %v, want an error", err)
	}
}

// FuzzParseTXT: any TXT strings either read as a cluster with a valid ID
// and fingerprint, or are refused with an error naming a TXT key; never a
// panic.
func FuzzParseTXT(f *testing.F) {
	f.Add("txtvers=1", "id=a", "ca="+testFingerprint, "version=v1")
	f.Add("TXTVERS=1", "id=A", "ca=sha256:", "version= ")
	f.Add("", "=", "id", "ca=sha256:"+strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		got, err := parseTXT([]string{a, b, c, d})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "TXT ") {
				t.Fatalf("error %q does not name the TXT key", err)
			}
			return
		}
		if got.ClusterID == "" || ValidateFingerprint(got.CAFingerprint) != nil {
			t.Fatalf("accepted %+v", got)
		}
	})
}

// FuzzInstanceRecords: any PTR target, SRV target and port either make a
// cluster whose endpoint is an https URL, or are refused with an error
// naming the record; never a panic.
func FuzzInstanceRecords(f *testing.F) {
	f.Add("a._ferry._tcp.example.org.", "api.example.org.", uint16(6443), "192.0.2.1")
	f.Add(`a\.b._ferry._tcp.example.org.`, "a.local.", uint16(1), "fe80::1%eth0")
	f.Add("._ferry._tcp.example.org.", ".", uint16(0), "")
	f.Add("a._ferry._tcp.example.org", "h..", uint16(1), "x")
	f.Fuzz(func(t *testing.T, name, target string, port uint16, addr string) {
		r := instanceRecords{Name: name, Target: target, Port: port, TXT: goodTXT}
		if a, err := netip.ParseAddr(addr); err == nil {
			r.Addrs = []netip.Addr{a}
		}
		c, err := r.cluster(ServiceDomain("example.org"))
		if err != nil {
			if !strings.Contains(err.Error(), "PTR target") && !strings.Contains(err.Error(), "SRV ") {
				t.Fatalf("error %q names no record", err)
			}
			return
		}
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.Port() != strconv.Itoa(int(port)) || c.Instance == "" {
			t.Fatalf("accepted %+v: endpoint %v", c, err)
		}
	})
}
