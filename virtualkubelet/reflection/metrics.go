package reflection

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the reflection's Prometheus series, labelled by kind.
type metrics struct {
	items    *prometheus.GaugeVec
	errors   *prometheus.CounterVec
	writes   *prometheus.CounterVec
	depth    *prometheus.GaugeVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		items: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "ferry", Subsystem: "reflection", Name: "items",
			Help: "Objects kept reflected on the provider, by kind.",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ferry", Subsystem: "reflection", Name: "errors_total",
			Help: "Failed syncs, by kind.",
		}, []string{"kind"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ferry", Subsystem: "reflection", Name: "writes_total",
			Help: "Writes to the provider (and, for events, to the consumer), by kind and verb.",
		}, []string{"kind", "verb"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "ferry", Subsystem: "reflection", Name: "queue_depth",
			Help: "Objects waiting to be synced, by kind.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ferry", Subsystem: "reflection", Name: "sync_duration_seconds",
			Help:    "Time from an object's change being queued to its sync ending, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"kind"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.items, m.errors, m.writes, m.depth, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
