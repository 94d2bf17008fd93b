package gateway

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// collector reads the tunnel and the NAT counters at each scrape.
type collector struct {
	r     *Reconciler
	rules atomic.Int64

	rxBytes, txBytes, rxPackets, txPackets, peerDropped, wgRx, wgTx, handshake, rtt, reachable, up, rulesDesc, dropped *prometheus.Desc
}

func newCollector(r *Reconciler) *collector {
	peer := []string{"peer"}
	return &collector{r: r,
		rxBytes:   prometheus.NewDesc("ferry_gateway_peer_received_bytes_total", "Bytes forwarded from the peer through the tunnel (nftables counter).", peer, nil),
		txBytes:   prometheus.NewDesc("ferry_gateway_peer_sent_bytes_total", "Bytes forwarded to the peer through the tunnel (nftables counter).", peer, nil),
		rxPackets: prometheus.NewDesc("ferry_gateway_peer_received_packets_total", "Packets forwarded from the peer through the tunnel (nftables counter).", peer, nil),
		txPackets: prometheus.NewDesc("ferry_gateway_peer_sent_packets_total", "Packets forwarded to the peer through the tunnel (nftables counter).", peer, nil),
		peerDropped: prometheus.NewDesc("ferry_gateway_peer_dropped_packets_total",
			"Packets from the peer through the tunnel, or for it into the tunnel, that the forward filter dropped (nftables counter; also in ferry_gateway_forward_dropped_packets_total).", peer, nil),
		wgRx:      prometheus.NewDesc("ferry_gateway_peer_tunnel_received_bytes_total", "Bytes WireGuard received from the peer, with its own overhead.", peer, nil),
		wgTx:      prometheus.NewDesc("ferry_gateway_peer_tunnel_sent_bytes_total", "Bytes WireGuard sent to the peer, with its own overhead.", peer, nil),
		handshake: prometheus.NewDesc("ferry_gateway_peer_last_handshake_timestamp_seconds", "Unix time of the last WireGuard handshake with the peer.", peer, nil),
		rtt:       prometheus.NewDesc("ferry_gateway_peer_round_trip_seconds", "Last measured round trip to the peer's gateway through the tunnel.", peer, nil),
		reachable: prometheus.NewDesc("ferry_gateway_peer_reachable",
			"1 when the last ICMP echo through the tunnel to the peer's gateway pod (every 10 s) was answered, 0 when it was not; absent while the peer's gateway address is unknown.", peer, nil),
		up:        prometheus.NewDesc("ferry_gateway_peer_up", "1 when the tunnel to the peer had a handshake in the last 3 minutes.", peer, nil),
		rulesDesc: prometheus.NewDesc("ferry_gateway_nat_rules", "nftables rules the gateway installed.", nil, nil),
		dropped: prometheus.NewDesc("ferry_gateway_forward_dropped_packets_total",
			"Packets the gateway's forward filter dropped: forwarded through the tunnel or from the nodes' overlay, or to or from this cluster's pods, but not between a peer's addresses and this cluster's (nftables counter).", nil, nil),
	}
}

func (c *collector) setRules(n int) { c.rules.Store(int64(n)) }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rxBytes, c.txBytes, c.rxPackets, c.txPackets, c.peerDropped, c.wgRx, c.wgTx, c.handshake, c.rtt, c.reachable, c.up, c.rulesDesc, c.dropped} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.rulesDesc, prometheus.GaugeValue, float64(c.rules.Load()))
	counters, err := c.r.DataPlane.Counters()
	if err == nil {
		for peer, n := range counters {
			ch <- prometheus.MustNewConstMetric(c.rxBytes, prometheus.CounterValue, float64(n.RxBytes), peer)
			ch <- prometheus.MustNewConstMetric(c.txBytes, prometheus.CounterValue, float64(n.TxBytes), peer)
			ch <- prometheus.MustNewConstMetric(c.rxPackets, prometheus.CounterValue, float64(n.RxPackets), peer)
			ch <- prometheus.MustNewConstMetric(c.txPackets, prometheus.CounterValue, float64(n.TxPackets), peer)
			ch <- prometheus.MustNewConstMetric(c.peerDropped, prometheus.CounterValue, float64(n.DroppedPackets), peer)
		}
	}
	if dropped, err := c.r.DataPlane.ForwardDropped(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(dropped.Packets))
	}
	dev, err := c.r.DataPlane.Device()
	if err != nil || dev == nil {
		return
	}
	names := c.r.peerNames()
	for _, p := range dev.Peers {
		name, ok := names[p.PublicKey.String()]
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.wgRx, prometheus.CounterValue, float64(p.ReceiveBytes), name)
		ch <- prometheus.MustNewConstMetric(c.wgTx, prometheus.CounterValue, float64(p.TransmitBytes), name)
		up := 0.0
		if !p.LastHandshakeTime.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.handshake, prometheus.GaugeValue, float64(p.LastHandshakeTime.UnixNano())/1e9, name)
			if c.r.Now().Sub(p.LastHandshakeTime) <= handshakeFresh {
				up = 1
			}
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, name)
		if rtt, ok := c.r.probes.Load(name); ok {
			ch <- prometheus.MustNewConstMetric(c.rtt, prometheus.GaugeValue, rtt.(time.Duration).Seconds(), name)
			ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, 1, name)
		} else if _, failed := c.r.probeErrs.Load(name); failed {
			ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, 0, name)
		}
	}
}

// registerCollector adds the gateway's metrics to controller-runtime's
// registry (served on the metrics address).
func registerCollector(c *collector) error {
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			return nil // a second gateway in one process (tests)
		}
		return err
	}
	return nil
}

// activeGauge is ferry_gateway_active: 1 on the replica holding the
// gateway Lease (or on a gateway without election), 0 on a passive one.
var activeGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "ferry_gateway_active",
	Help: "1 on the active gateway replica (the holder of the gateway Lease, or a gateway run without --leader-elect), 0 on a passive one.",
})

func init() { ctrlmetrics.Registry.MustRegister(activeGauge) }
