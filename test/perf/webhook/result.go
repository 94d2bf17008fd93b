package webhook

import (
	"fmt"
	"io"
	"time"
)

// RunStats are the create calls of one namespace.
type RunStats struct {
	// P50 and P99 of a create call's latency.
	P50, P99 time.Duration
	// Throughput is pods created per second.
	Throughput float64
}

// Result compares pod creation through the webhooks with creation the
// webhooks ignore.
type Result struct {
	Pods, Concurrency int
	Plain, Webhook    RunStats
}

// Targets of the webhook issue.
const (
	targetThroughputRatio = 0.9
	targetAddedP99        = 5 * time.Millisecond
)

// ThroughputRatio is the throughput with the webhooks over the one without.
func (r Result) ThroughputRatio() float64 { return r.Webhook.Throughput / r.Plain.Throughput }

// AddedP99 is the p99 latency the webhooks add.
func (r Result) AddedP99() time.Duration { return r.Webhook.P99 - r.Plain.P99 }

// Print writes one line per target and last the RESULT line.
func (r Result) Print(w io.Writer) {
	verdict := func(met bool) string {
		if met {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "target throughput_ratio >= %.2f: %s (%.2f)\n", targetThroughputRatio, verdict(r.ThroughputRatio() >= targetThroughputRatio), r.ThroughputRatio())
	fmt.Fprintf(w, "target added_p99_ms < %.0f: %s (%.2f)\n", ms(targetAddedP99), verdict(r.AddedP99() < targetAddedP99), ms(r.AddedP99()))
	fmt.Fprintf(w, "RESULT pods=%d concurrency=%d plain_p50_ms=%.2f plain_p99_ms=%.2f webhook_p50_ms=%.2f webhook_p99_ms=%.2f added_p99_ms=%.2f plain_pods_per_s=%.0f webhook_pods_per_s=%.0f throughput_ratio=%.2f\n",
		r.Pods, r.Concurrency, ms(r.Plain.P50), ms(r.Plain.P99), ms(r.Webhook.P50), ms(r.Webhook.P99), ms(r.AddedP99()),
		r.Plain.Throughput, r.Webhook.Throughput, r.ThroughputRatio())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
