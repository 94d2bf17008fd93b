package peeringquota

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// usedRatio exports how much of each limit a consumer has spent, so that
// quota exhaustion can be alerted on (manifests/monitoring) before new
// ShadowPods are refused.
var usedRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "ferry", Subsystem: "peeringquota", Name: "used_ratio",
	Help: "Share of a PeeringQuota limit charged (ShadowPods counted plus reservations), per resource; 1 or more: new ShadowPods requesting it are refused.",
}, []string{"namespace", "peeringquota", "consumer", "resource"})

func init() { ctrlmetrics.Registry.MustRegister(usedRatio) }

// recordUsage sets q's series of usedRatio, or removes them when q is nil
// (deleted).
func recordUsage(namespace, name string, q *ferryv1alpha1.PeeringQuota) {
	usedRatio.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "peeringquota": name})
	if q == nil {
		return
	}
	charged := quota.Charged(q, "")
	for resource, limit := range q.Spec.Limits {
		c := charged[resource]
		ratio := 1.0
		if !limit.IsZero() {
			ratio = c.AsApproximateFloat64() / limit.AsApproximateFloat64()
		}
		usedRatio.WithLabelValues(namespace, name, string(q.Spec.ConsumerClusterID), string(resource)).Set(ratio)
	}
}
