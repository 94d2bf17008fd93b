package webhook

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferry-io/ferry/test/localwebhook"
)

// RunStats are the create calls of one namespace.
type RunStats struct {
	// P50 and P99 of a create call's latency.
	P50, P99 time.Duration
	// Throughput is pods created per second.
	Throughput float64
	// APIServerCPU and HarnessCPU are the CPU time per pod of kube-apiserver
	// and of this process (ferry-webhook and the load generator).
	APIServerCPU, HarnessCPU time.Duration
}

// Result compares pod creation where ferry places pods, by each placement
// measured, with creation ferry ignores.
type Result struct {
	Pods, Concurrency int
	// Main is the placement of the unprefixed figures: the default one
	// (localwebhook.DefaultPlacement) when it was measured.
	Main  localwebhook.Placement
	Plain RunStats
	// Placed are the namespaces placed by each measured placement.
	Placed map[localwebhook.Placement]RunStats
}

// Targets of issue 20 (added CPU) and of the webhook issue.
const (
	targetAddedCPU        = 300 * time.Microsecond
	targetThroughputRatio = 0.9
	targetAddedP99        = 5 * time.Millisecond
)

// ThroughputRatio is the throughput with placement p over the one without.
func (r Result) ThroughputRatio(p localwebhook.Placement) float64 {
	return r.Placed[p].Throughput / r.Plain.Throughput
}

// AddedP99 is the p99 latency placement p adds.
func (r Result) AddedP99(p localwebhook.Placement) time.Duration {
	return r.Placed[p].P99 - r.Plain.P99
}

// AddedCPU is the CPU per pod placement p adds: the API server's and the
// webhook's (this process's) with p, less the API server's and this
// process's without (the load generator's share, the same in both, cancels
// out).
func (r Result) AddedCPU(p localwebhook.Placement) time.Duration {
	s := r.Placed[p]
	return s.APIServerCPU + s.HarnessCPU - r.Plain.APIServerCPU - r.Plain.HarnessCPU
}

// Print writes one line per target of the main placement and last the
// RESULT line.
func (r Result) Print(w io.Writer) {
	verdict := func(met bool) string {
		if met {
			return "met"
		}
		return "MISSED"
	}
	m := r.Main
	fmt.Fprintf(w, "target added_cpu_ms_per_pod <= %.1f: %s (%.3f, %s)\n", ms(targetAddedCPU), verdict(r.AddedCPU(m) <= targetAddedCPU), ms(r.AddedCPU(m)), m)
	fmt.Fprintf(w, "target throughput_ratio >= %.2f: %s (%.2f, %s)\n", targetThroughputRatio, verdict(r.ThroughputRatio(m) >= targetThroughputRatio), r.ThroughputRatio(m), m)
	fmt.Fprintf(w, "target added_p99_ms < %.0f: %s (%.2f, %s)\n", ms(targetAddedP99), verdict(r.AddedP99(m) < targetAddedP99), ms(r.AddedP99(m)), m)
	var b strings.Builder
	fmt.Fprintf(&b, "RESULT pods=%d concurrency=%d placement=%s added_cpu_ms_per_pod=%.3f plain_p50_ms=%.2f plain_p99_ms=%.2f plain_pods_per_s=%.0f added_p99_ms=%.2f throughput_ratio=%.2f",
		r.Pods, r.Concurrency, m, ms(r.AddedCPU(m)), ms(r.Plain.P50), ms(r.Plain.P99), r.Plain.Throughput, ms(r.AddedP99(m)), r.ThroughputRatio(m))
	for _, p := range []localwebhook.Placement{localwebhook.PlacementWebhook, localwebhook.PlacementPolicy} {
		s, ok := r.Placed[p]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, " %[1]s_p50_ms=%.2[2]f %[1]s_p99_ms=%.2[3]f %[1]s_pods_per_s=%.0[4]f %[1]s_added_cpu_ms_per_pod=%.3[5]f %[1]s_added_p99_ms=%.2[6]f %[1]s_throughput_ratio=%.2[7]f",
			p, ms(s.P50), ms(s.P99), s.Throughput, ms(r.AddedCPU(p)), ms(r.AddedP99(p)), r.ThroughputRatio(p))
	}
	if _, ok := r.Placed[localwebhook.PlacementWebhook]; ok {
		if _, ok := r.Placed[localwebhook.PlacementPolicy]; ok {
			fmt.Fprintf(&b, " policy_over_webhook_added_cpu=%.2f policy_over_webhook_throughput=%.2f",
				float64(r.AddedCPU(localwebhook.PlacementPolicy))/float64(r.AddedCPU(localwebhook.PlacementWebhook)),
				r.Placed[localwebhook.PlacementPolicy].Throughput/r.Placed[localwebhook.PlacementWebhook].Throughput)
		}
	}
	fmt.Fprintln(w, b.String())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
