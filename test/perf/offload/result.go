package offload

import (
	"fmt"
	"io"
	"time"
)

// RunStats are one run's figures.
type RunStats struct {
	// P50 and P99 of the time from a pod's create call to a watch seeing it
	// Running and Ready.
	P50, P99 time.Duration
	// Throughput is pods per second from the first create call to the last
	// pod Running.
	Throughput float64
	// RequestsPerPod is the API requests the counted API servers served
	// during the run, per pod.
	RequestsPerPod float64
	// CPUSecondsPerPod is the CPU time every process of the test bed used
	// during the run (both clusters' etcd, API servers, controller
	// managers, schedulers and kwok, the virtual kubelet, and this process
	// with ferry's controller managers), per pod.
	CPUSecondsPerPod float64
}

// Result is one benchmark run: the direct run is the baseline of the
// offloaded one.
type Result struct {
	Pods int
	// Claims: every pod was a StatefulSet's, with a claim (bench-storage).
	Claims          bool
	Direct, Offload RunStats
	// VirtualKubeletPeakRSS is the virtual kubelet's peak resident memory
	// over the offloaded run, in bytes.
	VirtualKubeletPeakRSS int64
}

// Targets of the offloading issue, as ratios against the direct run in the
// same run (absolute times depend on the machine), and of the storage
// fabric's issue for pods with claims.
const (
	targetP99Ratio        = 1.3
	targetThroughputRatio = 0.8
	targetPeakRSSMiB      = 100
	targetClaimsP99Ratio  = 2
	targetCPURatio        = 2.5
)

// CPURatio is the offloaded CPU time per pod over the direct one.
func (r Result) CPURatio() float64 { return r.Offload.CPUSecondsPerPod / r.Direct.CPUSecondsPerPod }

// P99Ratio is the offloaded p99 over the direct one.
func (r Result) P99Ratio() float64 { return r.Offload.P99.Seconds() / r.Direct.P99.Seconds() }

// ThroughputRatio is the offloaded throughput over the direct one.
func (r Result) ThroughputRatio() float64 { return r.Offload.Throughput / r.Direct.Throughput }

// Print writes one line per target, met or missed, and last the RESULT line.
func (r Result) Print(w io.Writer) {
	rssMiB := float64(r.VirtualKubeletPeakRSS) / (1 << 20)
	type target struct {
		name   string
		value  float64
		limit  float64
		atMost bool
	}
	targets := []target{
		{"p99_ratio", r.P99Ratio(), targetP99Ratio, true},
		{"throughput_ratio", r.ThroughputRatio(), targetThroughputRatio, false},
		{"vk_peak_rss_mib", rssMiB, targetPeakRSSMiB, true},
		{"cpu_ratio", r.CPURatio(), targetCPURatio, true},
	}
	workload := ""
	if r.Claims {
		workload = "workload=statefulset-pods-with-claims "
		targets = []target{{"p99_ratio", r.P99Ratio(), targetClaimsP99Ratio, true}}
	}
	for _, t := range targets {
		op, met := ">=", t.value >= t.limit
		if t.atMost {
			op, met = "<=", t.value <= t.limit
		}
		verdict := "met"
		if !met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "target %s %s %g: %s (%.2f)\n", t.name, op, t.limit, verdict, t.value)
	}
	fmt.Fprintf(w, "RESULT %spods=%d direct_p50_ms=%.0f direct_p99_ms=%.0f offload_p50_ms=%.0f offload_p99_ms=%.0f p99_ratio=%.2f"+
		" direct_throughput_pods_per_s=%.1f offload_throughput_pods_per_s=%.1f throughput_ratio=%.2f vk_peak_rss_mib=%.0f"+
		" requests_per_pod_direct=%.1f requests_per_pod_offload=%.1f cpu_ms_per_pod_direct=%.2f cpu_ms_per_pod_offload=%.2f cpu_ratio=%.2f\n",
		workload, r.Pods, millis(r.Direct.P50), millis(r.Direct.P99), millis(r.Offload.P50), millis(r.Offload.P99), r.P99Ratio(),
		r.Direct.Throughput, r.Offload.Throughput, r.ThroughputRatio(), rssMiB,
		r.Direct.RequestsPerPod, r.Offload.RequestsPerPod, r.Direct.CPUSecondsPerPod*1000, r.Offload.CPUSecondsPerPod*1000, r.CPURatio())
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
