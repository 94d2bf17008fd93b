package nettest

import (
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC)

// healthy is a peer whose fabric is fine as far as this cluster knows.
func healthy() *PeerState {
	return &PeerState{ClusterID: "provider", GatewayKnown: true, GatewayReady: 1, GatewayReplicas: 1,
		TunnelKnown: true, TunnelUp: true, TunnelReason: "Handshake", LastHandshake: now.Add(-30 * time.Second),
		Remapped: true, PodCIDR: "10.244.0.0/16", RemappedCIDR: "10.71.0.0/16", PodCIDRAtPeer: "10.72.0.0/16", APIServerAtPeer: "10.73.0.1", MTU: 1340}
}

func TestDiagnose(t *testing.T) {
	timeout := "Get \"http://10.71.0.5:8080/hostname\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
	dns := "Get \"http://away-0:80/hostname\": dial tcp: lookup away-0 on 10.96.0.10:53: no such host"
	for _, tc := range []struct {
		name   string
		o      Outcome
		peer   func(*PeerState)
		want   Cause
		detail string
	}{
		{"the probe could not run", Outcome{Path: PathPod, Cross: true, Probe: "port-forward to x/home: refused"}, nil, CauseProbe, "port-forward"},
		{"gateway replicas not ready", Outcome{Path: PathPod, Cross: true, Err: timeout}, func(p *PeerState) { p.GatewayReady = 0 }, CauseGatewayDown, "0 of 1 replicas ready"},
		{"gateway Deployment scaled to 0", Outcome{Path: PathPod, Cross: true, Err: timeout}, func(p *PeerState) { p.GatewayReady, p.GatewayReplicas = 0, 0 }, CauseGatewayDown, "ferry-gateway Deployment is scaled to 0"},
		{"gateway scaled to 0 wins over a stale tunnel", Outcome{Path: PathService, Cross: true, Err: timeout},
			func(p *PeerState) { p.GatewayReady, p.LastHandshake = 0, now.Add(-10*time.Minute) }, CauseGatewayDown, "ferry-gateway"},
		{"gateway unknown (forbidden) is not blamed", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) { p.GatewayKnown, p.GatewayReady = false, 0 }, CauseNoRoute, "tunnel up"},
		{"TunnelUp False", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) {
				p.TunnelUp, p.TunnelReason, p.TunnelMessage = false, "NoHandshake", "no handshake with 1.2.3.4:51820 yet"
			}, CauseTunnelDown, "NoHandshake"},
		{"no TunnelUp condition", Outcome{Path: PathPod, Cross: true, Err: timeout}, func(p *PeerState) { p.TunnelKnown = false }, CauseTunnelDown, "never reported"},
		{"handshake older than the reject time", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) { p.LastHandshake = now.Add(-4 * time.Minute) }, CauseTunnelDown, "4m"},
		{"no handshake", Outcome{Path: PathPod, Cross: true, Err: timeout}, func(p *PeerState) { p.LastHandshake = time.Time{} }, CauseTunnelDown, "no handshake"},
		{"peer gateway does not answer the round-trip probe", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) {
				p.TunnelMessage = "userspace tunnel to x; round-trip probe of 10.72.0.3 failed: timeout"
			}, CauseTunnelDown, "does not answer"},
		{"not remapped", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) {
				p.Remapped, p.RemappedCIDR, p.RemappedWhy = false, "", "PoolExhausted: no free /16"
			}, CauseNATMissing, "PoolExhausted"},
		{"peer never said where it sees us", Outcome{Path: PathPod, Cross: true, Err: "address \"10.244.0.5\": ..."},
			func(p *PeerState) { p.PodCIDRAtPeer = "" }, CauseNATMissing, "podCIDRAtPeer"},
		{"API server mapping missing", Outcome{Path: PathAPIServer, Cross: true, Err: timeout},
			func(p *PeerState) { p.APIServerAtPeer = "" }, CauseNATMissing, "apiServerAddressAtPeer"},
		{"API server mapping is not needed by pod paths", Outcome{Path: PathPod, Cross: true, Err: timeout},
			func(p *PeerState) { p.APIServerAtPeer = "" }, CauseNoRoute, ""},
		{"DNS across", Outcome{Path: PathService, Cross: true, Err: dns}, nil, CauseDNS, "no such host"},
		{"tunnel down wins over DNS", Outcome{Path: PathService, Cross: true, Err: dns}, func(p *PeerState) { p.TunnelUp = false }, CauseTunnelDown, ""},
		{"MTU: small datagrams pass, large ones do not", Outcome{Path: PathMTU, Cross: true, SmallPassed: true, Err: "reading from udp connection failed. err:'read udp: i/o timeout'"}, nil, CauseMTU, "1340"},
		{"MTU check with small datagrams failing too is not MTU", Outcome{Path: PathMTU, Cross: true, Err: "small datagrams fail too: i/o timeout"}, nil, CauseNoRoute, "small datagrams"},
		{"64 KiB fails where small requests pass", Outcome{Path: PathLarge, Cross: true, SmallPassed: true, Err: timeout}, nil, CauseMTU, "small packets pass"},
		{"64 KiB fails and small requests fail too", Outcome{Path: PathLarge, Cross: true, Err: timeout}, nil, CauseNoRoute, ""},
		{"everything up, still nothing arrives", Outcome{Path: PathPod, Cross: true, Err: timeout}, nil, CauseNoRoute, "last handshake 30s ago"},
		{"in-cluster DNS", Outcome{Path: PathService, Cluster: "consumer", Err: dns}, nil, CauseDNS, "within consumer"},
		{"in-cluster failure is never the fabric's", Outcome{Path: PathPod, Cluster: "consumer", Err: timeout}, func(p *PeerState) { p.GatewayReady = 0 }, CauseNoRoute, "within consumer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := healthy()
			if tc.peer != nil {
				tc.peer(p)
			}
			if !tc.o.Cross {
				p = nil
			}
			got, detail := Diagnose(tc.o, p, now)
			if got != tc.want {
				t.Errorf("cause %q, want %q (detail: %s)", got, tc.want, detail)
			}
			if !strings.Contains(detail, tc.detail) {
				t.Errorf("detail %q does not say %q", detail, tc.detail)
			}
			if !strings.Contains(detail, tc.o.Err) {
				t.Errorf("detail %q does not quote the client's error %q", detail, tc.o.Err)
			}
		})
	}
}

func TestIsDNSError(t *testing.T) {
	for err, want := range map[string]bool{
		"dial tcp: lookup away-0 on 10.96.0.10:53: no such host":             true,
		"dial tcp: lookup home on 10.96.0.10:53: server misbehaving":         true,
		"host and/or port param are invalid. lookup x: no such host":         true,
		"dial tcp 10.71.0.5:8080: connect: no route to host":                 false,
		"context deadline exceeded (Client.Timeout exceeded while awaiting)": false,
	} {
		if got := IsDNSError(err); got != want {
			t.Errorf("IsDNSError(%q) = %t, want %t", err, got, want)
		}
	}
}

func TestExpired(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{now.Add(time.Minute).Format(time.RFC3339), false}, {now.Add(-time.Second).Format(time.RFC3339), true}, {"", true}, {"tomorrow", true}} {
		if got := Expired(tc.v, now); got != tc.want {
			t.Errorf("Expired(%q) = %t, want %t", tc.v, got, tc.want)
		}
	}
}

func TestShorten(t *testing.T) {
	long := "Get \"http://10.77.0.29:8080/echo?msg=" + strings.Repeat("0123456789abcdef", 4096) + "\": context deadline exceeded"
	got := shorten(long)
	if len(got) > 260 || !strings.HasPrefix(got, "Get \"http://10.77.0.29:8080/echo?msg=0123") || !strings.HasSuffix(got, "\": context deadline exceeded") {
		t.Errorf("shorten: %d bytes: %q", len(got), got)
	}
	if short := "dial tcp: lookup x: no such host"; shorten(short) != short {
		t.Errorf("shorten(%q) = %q", short, shorten(short))
	}
}
