package gateway

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// probeTimeout bounds one round-trip probe.
const probeTimeout = time.Second

var probeSeq atomic.Uint32

// probeInBackground starts a probe round unless one runs: a probe waiting
// out its timeout (a peer gateway failing over) never holds up the
// reconcile, which must install a peer's new endpoint at once. The report
// shows the last finished round.
func (r *Reconciler) probeInBackground(ctx context.Context, plan Plan) {
	if !r.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.probing.Store(false)
		r.probe(ctx, plan)
	}()
}

// probe measures the round trip to each peer's gateway pod through the
// tunnel (an ICMP echo, which the NAT and connection tracking carry like
// any flow) and keeps the last result per peer.
func (r *Reconciler) probe(ctx context.Context, plan Plan) {
	for _, p := range plan.Peers {
		if !p.Probe.IsValid() {
			r.probes.Delete(string(p.ClusterID))
			r.probeErrs.Delete(string(p.ClusterID))
			continue
		}
		rtt, err := r.DataPlane.Ping(p.Probe, probeTimeout)
		if err != nil {
			log.FromContext(ctx).V(1).Info("Round-trip probe failed", "peer", p.ClusterID, "address", p.Probe, "err", err)
			r.probes.Delete(string(p.ClusterID))
			r.probeErrs.Store(string(p.ClusterID), err.Error())
			continue
		}
		r.probes.Store(string(p.ClusterID), rtt)
		r.probeErrs.Delete(string(p.ClusterID))
	}
}

// Ping sends one ICMP echo to addr from the gateway's namespace and
// returns the round trip.
func (d *DataPlane) Ping(addr netip.Addr, timeout time.Duration) (time.Duration, error) {
	network, proto := "ip4:icmp", 1
	var echo, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if addr.Is6() {
		network, proto, echo, reply = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	var conn *icmp.PacketConn
	if err := d.NS.Do(func() error {
		var err error
		conn, err = icmp.ListenPacket(network, "")
		return err
	}); err != nil {
		return 0, fmt.Errorf("open an ICMP socket: %w", err)
	}
	defer conn.Close()
	id, seq := os.Getpid()&0xffff, int(probeSeq.Add(1)&0xffff)
	msg := icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("ferry-probe")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := conn.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := conn.WriteTo(b, &net.IPAddr{IP: addr.AsSlice()}); err != nil {
		return 0, fmt.Errorf("send echo to %s: %w", addr, err)
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return 0, fmt.Errorf("no echo reply from %s: %w", addr, err)
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && from.String() == addr.String() {
			return time.Since(start), nil
		}
	}
}
