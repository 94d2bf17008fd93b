// Package nettest is `ferryctl test network`: it runs short-lived agnhost
// pods in the consumer and, through ferry's own offloading, in each
// provider, checks the fabric's paths both ways (pod to pod, pod to Service
// by DNS name, offloaded pod to the consumer's API server, MTU-sized
// datagrams and 64 KiB requests), and says for each failure why, from what
// the consumer knows of its fabric (the peer's NetworkConfig: TunnelUp, the
// last handshake, the remapped ranges; its own gateway Deployment).
package nettest

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Path is the kind of a check.
type Path string

// The paths a run checks.
const (
	// PathPod: an HTTP request from a pod to another pod's IP address.
	PathPod Path = "pod-to-pod"
	// PathService: an HTTP request to a Service by its DNS name.
	PathService Path = "service-dns"
	// PathAPIServer: an HTTP request to kubernetes.default:443, the
	// consumer's API server (which answers any plain HTTP request).
	PathAPIServer Path = "api-server"
	// PathMTU: a UDP datagram of the path MTU, DF set (Linux's default path
	// MTU discovery on UDP sockets), after a small one.
	PathMTU Path = "mtu-udp"
	// PathLarge: a 64 KiB HTTP request echoed back (64 KiB each way).
	PathLarge Path = "tcp-64KiB"
)

// Cause is why a check failed.
type Cause string

// The causes Diagnose names, most basic first.
const (
	// CauseProbe: the check itself could not run (port-forward to the
	// client pod, a pod not running): nothing is known of the path.
	CauseProbe Cause = "probe failed"
	// CauseGatewayDown: this cluster's ferry-gateway Deployment has no
	// ready replica: nothing crosses to any peer.
	CauseGatewayDown Cause = "gateway not running"
	// CauseTunnelDown: the gateway reports the tunnel to the peer down
	// (TunnelUp False), never reported it, its last handshake is older than
	// WireGuard's 3-minute reject time, or the peer's gateway does not
	// answer the gateway's round-trip probe through it.
	CauseTunnelDown Cause = "tunnel down"
	// CauseNATMissing: the mapping of the peer is not set: no remapped range
	// for its pods here, or the peer has not said where it sees this
	// cluster's pods or API server.
	CauseNATMissing Cause = "NAT missing"
	// CauseDNS: the client could not resolve the name.
	CauseDNS Cause = "DNS"
	// CauseMTU: small packets on the same path and direction pass, large
	// ones do not: a hop with a smaller MTU and no path MTU discovery.
	CauseMTU Cause = "MTU"
	// CauseNoRoute: the tunnel is up and the mapping set, yet the packets do
	// not arrive (routes or nftables on a node or the gateway, or a
	// NetworkPolicy); within one cluster, its CNI or kube-proxy.
	CauseNoRoute Cause = "no route"
)

// rejectAfter is WireGuard's REJECT_AFTER_TIME: a tunnel whose last
// handshake is older carries nothing (a live one rekeys every 2 minutes).
const rejectAfter = 3 * time.Minute

// PeerState is what this cluster knows of its fabric toward one peer.
type PeerState struct {
	// ClusterID is the peer's.
	ClusterID string `json:"clusterID"`
	// GatewayReady and GatewayReplicas are this cluster's ferry-gateway
	// Deployment's ready and desired replicas; GatewayKnown is false when it
	// could not be read (not found, or forbidden to this credential).
	GatewayKnown    bool  `json:"gatewayKnown"`
	GatewayReady    int32 `json:"gatewayReady"`
	GatewayReplicas int32 `json:"gatewayReplicas"`
	// Tunnel is the peer NetworkConfig's TunnelUp condition: TunnelKnown
	// false when there is none.
	TunnelKnown   bool   `json:"tunnelKnown"`
	TunnelUp      bool   `json:"tunnelUp"`
	TunnelReason  string `json:"tunnelReason,omitempty"`
	TunnelMessage string `json:"tunnelMessage,omitempty"`
	// LastHandshake is the tunnel's last handshake; zero when none.
	LastHandshake time.Time `json:"lastHandshake,omitzero"`
	// Remapped is the peer NetworkConfig's Remapped condition True.
	Remapped      bool   `json:"remapped"`
	RemappedWhy   string `json:"remappedWhy,omitempty"`
	PodCIDR       string `json:"podCIDR,omitempty"`
	RemappedCIDR  string `json:"remappedPodCIDR,omitempty"`
	PodCIDRAtPeer string `json:"podCIDRAtPeer,omitempty"`
	// APIServerAtPeer is where the peer's pods reach this cluster's API server.
	APIServerAtPeer string `json:"apiServerAddressAtPeer,omitempty"`
	// MTU is the MTU of routes toward peers (this cluster's gateway status).
	MTU int32 `json:"mtu,omitempty"`
}

// Outcome is a failed check, as Diagnose needs it.
type Outcome struct {
	Path Path
	// Cross: the check crosses from one cluster to the other.
	Cross bool
	// Probe is set when the check could not run at all.
	Probe string
	// Err is the client's error (agnhost's /dial errors).
	Err string
	// SmallPassed: for PathMTU and PathLarge, a small packet on the same
	// path, same direction, passed.
	SmallPassed bool
	// Cluster names the cluster an in-cluster check ran in.
	Cluster string
}

// Diagnose names the cause of a failed check and says what points to it;
// p is the peer of a cross-cluster check (nil for an in-cluster one).
func Diagnose(o Outcome, p *PeerState, now time.Time) (Cause, string) {
	cause, why := diagnose(o, p, now)
	if o.Err != "" && !strings.Contains(why, o.Err) {
		why += "; the client saw: " + o.Err
	}
	return cause, why
}

func diagnose(o Outcome, p *PeerState, now time.Time) (Cause, string) {
	if o.Probe != "" {
		return CauseProbe, o.Probe
	}
	if !o.Cross || p == nil {
		if IsDNSError(o.Err) {
			return CauseDNS, fmt.Sprintf("within %s: the name does not resolve (CoreDNS, or the Service's reflection): %s", o.Cluster, o.Err)
		}
		return CauseNoRoute, fmt.Sprintf("within %s, no cross-cluster hop: its CNI, kube-proxy or the target pod: %s", o.Cluster, o.Err)
	}
	if p.GatewayKnown && p.GatewayReady == 0 {
		state := fmt.Sprintf("has 0 of %d replicas ready", p.GatewayReplicas)
		if p.GatewayReplicas == 0 {
			state = "is scaled to 0"
		}
		return CauseGatewayDown, fmt.Sprintf("this cluster's ferry-gateway Deployment %s: nothing crosses to %s", state, p.ClusterID)
	}
	if cause, why := tunnelDown(p, now); cause != "" {
		return cause, why
	}
	if !p.Remapped || p.RemappedCIDR == "" {
		why := p.RemappedWhy
		if why == "" {
			why = "no remapped range"
		}
		return CauseNATMissing, fmt.Sprintf("%s's pods have no range in this cluster (Remapped: %s)", p.ClusterID, why)
	}
	if p.PodCIDRAtPeer == "" {
		return CauseNATMissing, fmt.Sprintf("%s has not reported where it sees this cluster's pods (NetworkConfig status.podCIDRAtPeer empty)", p.ClusterID)
	}
	if o.Path == PathAPIServer && p.APIServerAtPeer == "" {
		return CauseNATMissing, fmt.Sprintf("%s has not reported where its pods reach this cluster's API server (status.apiServerAddressAtPeer empty)", p.ClusterID)
	}
	if IsDNSError(o.Err) {
		return CauseDNS, fmt.Sprintf("the name does not resolve (CoreDNS, or ferry's reflection of the Service to %s): %s", p.ClusterID, o.Err)
	}
	if (o.Path == PathMTU || o.Path == PathLarge) && o.SmallPassed {
		return CauseMTU, fmt.Sprintf("small packets pass on this path, large ones do not (route MTU toward peers %d): a hop with a smaller MTU that drops instead of fragmenting, ICMP 'fragmentation needed' filtered, or the MSS not clamped: %s", p.MTU, o.Err)
	}
	return CauseNoRoute, fmt.Sprintf("tunnel up (last handshake %s) and mapping set, yet the packets do not arrive: routes or nftables on a node or a gateway, or a NetworkPolicy: %s", ago(p.LastHandshake, now), o.Err)
}

// tunnelDown says whether the peer's tunnel is down and why.
func tunnelDown(p *PeerState, now time.Time) (Cause, string) {
	switch {
	case !p.TunnelKnown:
		return CauseTunnelDown, fmt.Sprintf("the gateway never reported a tunnel to %s (no TunnelUp condition on its NetworkConfig)", p.ClusterID)
	case !p.TunnelUp:
		return CauseTunnelDown, fmt.Sprintf("TunnelUp False to %s (%s: %s)", p.ClusterID, p.TunnelReason, p.TunnelMessage)
	case p.LastHandshake.IsZero():
		return CauseTunnelDown, fmt.Sprintf("no handshake with %s reported", p.ClusterID)
	case now.Sub(p.LastHandshake) > rejectAfter:
		return CauseTunnelDown, fmt.Sprintf("last handshake with %s %s (over WireGuard's %s reject time: the report is stale or the peer's gateway is gone)", p.ClusterID, ago(p.LastHandshake, now), rejectAfter)
	case strings.Contains(p.TunnelMessage, "round-trip probe"):
		return CauseTunnelDown, fmt.Sprintf("%s's gateway does not answer through the tunnel: %s", p.ClusterID, p.TunnelMessage)
	}
	return "", ""
}

// IsDNSError reports whether a client error is a failed name lookup (Go's
// resolver: "lookup NAME on SERVER: no such host", "server misbehaving", a
// lookup timing out).
func IsDNSError(err string) bool {
	return strings.Contains(err, "lookup ") || strings.Contains(err, "no such host")
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}
