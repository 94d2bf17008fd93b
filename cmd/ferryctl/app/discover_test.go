package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/discovery"
	"github.com/ferry-io/ferry/discovery/discoverytest"
	"github.com/ferry-io/ferry/test/netlab"
)

// The package's tests run in a network namespace of their own when root
// (the local-link test needs one).
func TestMain(m *testing.M) { netlab.Main(m) }

// writeKubeconfig writes a kubeconfig for server with ca (none when nil)
// and a token, and returns its path.
func writeKubeconfig(t *testing.T, name, server string, ca []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "not-a-real-token"}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs ferryctl with args and returns its stdout, stderr and error.
func run(ctx context.Context, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// advertisedDomain serves example.org with what `ferryctl advertise
// --domain` prints for cluster edge (API server https://localhost:1, which
// refuses connections) and a record set without a cluster ID, and returns
// the DNS server's address and edge's CA.
func advertisedDomain(t *testing.T) (string, []byte) {
	t.Helper()
	ca := discoverytest.CA(t, "edge")
	kubeconfig := writeKubeconfig(t, "edge", "https://localhost:1", ca)
	zone, _, err := run(context.Background(), "advertise", "--kubeconfig", kubeconfig, "--cluster-id", "edge", "--domain", "example.org")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(zone, "edge._ferry._tcp.example.org.\t300\tIN\tSRV\t0 0 1 localhost.") {
		t.Errorf("advertise --domain printed %q, want edge's SRV record", zone)
	}
	zone += "_ferry._tcp.example.org. 60 IN PTR anon._ferry._tcp.example.org.\n" +
		"anon._ferry._tcp.example.org. 60 IN SRV 0 0 6443 api.anon.example.org.\n" +
		`anon._ferry._tcp.example.org. 60 IN TXT "txtvers=1" "ca=sha256:` + strings.Repeat("0", 64) + `"` + "\n"
	return discoverytest.ServeZone(t, discoverytest.ParseZone(t, zone), true), ca
}

func TestDiscoverListsWhatAdvertisePublishes(t *testing.T) {
	server, ca := advertisedDomain(t)
	fps, err := discovery.Fingerprints(ca)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(context.Background(), "discover", "--domain", "example.org", "--dns-server", server, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got []discovery.Cluster
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("discover -o json printed %q: %v", out, err)
	}
	if len(got) != 1 || got[0].ClusterID != "edge" || got[0].Endpoint != "https://localhost:1" || got[0].CAFingerprint != fps[0] || got[0].Version == "" {
		t.Errorf("discover found %+v, want edge at https://localhost:1 with CA %s and a version", got, fps[0])
	}
	if !strings.Contains(errOut, `warning: skipped instance "anon": TXT id: missing`) {
		t.Errorf("discover warned %q, want the record set without an ID named", errOut)
	}
	table, _, err := run(context.Background(), "discover", "--domain", "example.org", "--dns-server", server)
	if err != nil || !strings.Contains(table, "CLUSTER ID") || !strings.Contains(table, "https://localhost:1") {
		t.Errorf("discover printed %q, %v; want a table with edge", table, err)
	}
	wide, _, err := run(context.Background(), "discover", "--domain", "example.org", "--dns-server", server, "-o", "wide")
	if err != nil || !strings.Contains(wide, "CA FINGERPRINT") || !strings.Contains(wide, fps[0]) || strings.Contains(table, fps[0]) {
		t.Errorf("discover -o wide printed %q, %v; want the whole fingerprint, which the table shortens", wide, err)
	}
	names, _, err := run(context.Background(), "discover", "--domain", "example.org", "--dns-server", server, "-o", "name")
	if err != nil || names != "edge\n" {
		t.Errorf("discover -o name printed %q, %v; want edge", names, err)
	}
	_, errOut, err = run(context.Background(), "discover", "--domain", "example.net", "--dns-server", server)
	if err != nil || !strings.Contains(errOut, "No ferry cluster found in domain example.net") {
		t.Errorf("discover in an empty domain: %q, %v; want a note that none was found", errOut, err)
	}
}

func TestDiscoverRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"discover"}, "say where to look: --domain DOMAIN (unicast DNS) or --mdns"},
		{[]string{"discover", "--domain", "a", "--mdns"}, "--domain and --mdns: give one"},
		{[]string{"discover", "--mdns", "--dns-server", "1.1.1.1"}, "--dns-server: only with --domain"},
		{[]string{"discover", "--domain", "a", "--interface", "eth0"}, "--interface: only with --mdns"},
		{[]string{"discover", "--mdns", "--timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"discover", "--mdns", "-o", "csv"}, `-o "csv": must be one of table, wide, json, yaml, name`},
		{[]string{"discover", "--mdns", "--interface", "no-such-if0"}, `--interface "no-such-if0"`},
		{[]string{"discover", "--domain", "a..b", "--dns-server", "127.0.0.1:1"}, `domain "a..b"`},
		{[]string{"discover", "--domain", "a", "--dns-server", "[::1"}, `--dns-server "[::1": want host or host:port`},
		{[]string{"advertise", "--mdns", "--domain", "a"}, "give one of --domain DOMAIN"},
		{[]string{"advertise", "--domain", "a", "--interface", "eth0"}, "--interface: only with --mdns"},
	} {
		_, _, err := run(context.Background(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ferryctl %s = %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestAdvertiseNamesWhatItCannotPublish(t *testing.T) {
	ca := discoverytest.CA(t, "edge")
	for _, tc := range []struct {
		server string
		ca     []byte
		extra  []string
		want   string
	}{
		{"https://api.edge.example.org", nil, nil, "--kubeconfig: no certificate authority for https://api.edge.example.org"},
		{"https://api.edge.example.org", []byte("junk"), nil, "--kubeconfig: CA bundle: no PEM certificate"},
		{"https://192.0.2.1:6443", ca, nil, "its host is an IP address; unicast DNS-SD needs a host name"},
		{"https://api.edge.example.org", ca, []string{"--cluster-id", "Edge_1"}, `--cluster-id "Edge_1"`},
		{"https://api.edge.example.org", ca, []string{"--server", "http://api.edge.example.org"}, "want https://host[:port]"},
	} {
		kubeconfig := writeKubeconfig(t, "edge", tc.server, tc.ca)
		args := append([]string{"advertise", "--kubeconfig", kubeconfig, "--domain", "example.org"}, tc.extra...)
		if !strings.Contains(strings.Join(args, " "), "--cluster-id") {
			args = append(args, "--cluster-id", "edge")
		}
		_, _, err := run(context.Background(), args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ferryctl %s = %v, want an error saying %q", strings.Join(args[1:], " "), err, tc.want)
		}
	}
}

func TestPeerDiscoveredUsesTheEndpointAndChecksTheCA(t *testing.T) {
	server, ca := advertisedDomain(t)
	consumer := writeKubeconfig(t, "consumer", "https://localhost:2", ca)
	withCA := writeKubeconfig(t, "provider", "https://elsewhere.example.org:6443", ca)
	otherCA := writeKubeconfig(t, "provider", "https://elsewhere.example.org:6443", discoverytest.CA(t, "other"))
	noCA := writeKubeconfig(t, "provider", "https://elsewhere.example.org:6443", nil)
	peer := func(provider, name string, extra ...string) []string {
		args := []string{"peer", "--consumer-kubeconfig", consumer, "--discovered", name, "--domain", "example.org", "--dns-server", server, "--timeout", "20s"}
		if provider != "" {
			args = append(args, "--provider-kubeconfig", provider)
		}
		return append(args, extra...)
	}
	for _, tc := range []struct {
		args    []string
		want    string
		wantOut string
	}{
		{peer(withCA, "nope"), `--discovered "nope": no such ferry cluster in domain example.org (DNS server ` + server + `) (found: edge)`, ""},
		{peer("", "edge"), `--discovered "edge": needs --provider-kubeconfig: discovery gives the provider's endpoint and CA fingerprint, not credentials`, ""},
		{peer(withCA, "edge", "--reissue-credential"), "--discovered: not with --reissue-credential", ""},
		{peer(otherCA, "edge"), `--discovered "edge": the provider kubeconfig's CA (sha256:`, ""},
		{peer(noCA, "edge"), `--discovered "edge": the provider kubeconfig names no CA`, ""},
		{[]string{"peer", "--domain", "example.org"}, "--domain: only with --discovered", ""},
		{[]string{"peer", "--mdns"}, "--mdns: only with --discovered", ""},
		{[]string{"peer", "--discovered", "edge", "--provider-kubeconfig", withCA}, "say where to look", ""},
		// The CA matches: ferryctl goes to the advertised endpoint, not the
		// kubeconfig's, and finds nobody there.
		{peer(withCA, "edge"), `--discovered "edge": provider cluster (https://localhost:1)`,
			`Discovered provider "edge" in domain example.org (DNS server ` + server + `): using https://localhost:1 instead of the kubeconfig's https://elsewhere.example.org:6443`},
	} {
		out, _, err := run(context.Background(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ferryctl %s = %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if !strings.Contains(out, tc.wantOut) {
			t.Errorf("ferryctl %s printed %q, want %q", strings.Join(tc.args, " "), out, tc.wantOut)
		}
	}
}

// TestAdvertiseOnTheLinkIsDiscovered runs `ferryctl advertise --mdns` in
// a namespace at the far end of a veth and `ferryctl discover --mdns` in
// the test's own.
func TestAdvertiseOnTheLinkIsDiscovered(t *testing.T) {
	link := discoverytest.NewLink(t)
	ca := discoverytest.CA(t, "edge")
	kubeconfig := writeKubeconfig(t, "edge", "https://"+link.RemoteAddr.String()+":6443", ca)
	link.Serve(t, "Answering for cluster", func(ctx context.Context, out io.Writer) error {
		cmd := NewCommand()
		cmd.SetArgs([]string{"advertise", "--mdns", "--interface", link.Remote.Name, "--kubeconfig", kubeconfig, "--cluster-id", "edge"})
		cmd.SetOut(out)
		cmd.SetErr(io.Discard)
		return cmd.ExecuteContext(ctx)
	})
	found, _, err := run(context.Background(), "discover", "--mdns", "--interface", link.Local.Name, "--timeout", "1s", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []discovery.Cluster
	if err := yaml.Unmarshal([]byte(found), &got); err != nil {
		t.Fatalf("discover -o yaml printed %q: %v", found, err)
	}
	if len(got) != 1 || got[0].ClusterID != "edge" || got[0].Endpoint != "https://192.0.2.2:6443" {
		t.Errorf("discover --mdns found %+v, want edge at https://192.0.2.2:6443", got)
	}
}
