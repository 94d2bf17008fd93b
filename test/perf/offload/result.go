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
	// NetRequestsPerPod is RequestsPerPod less what the idle clusters serve
	// over as long (leases, probes, resyncs: most of a slow run's requests).
	NetRequestsPerPod float64
	// RequestsPerPodBy is RequestsPerPod by counted cluster (its name).
	RequestsPerPodBy map[string]float64
	// CPUSecondsPerPod is the CPU time every process of the test bed used
	// during the run (both clusters' etcd, API servers, controller
	// managers, schedulers and kwok, the virtual kubelet, and this process
	// with ferry's controller managers), per pod.
	CPUSecondsPerPod float64
	// FerryAddedP50 and FerryAddedP99, of an offloaded run, are the time
	// ferry's own steps took per pod (ferryStages): what offloading adds to
	// the provider's own way to Running.
	FerryAddedP50, FerryAddedP99 time.Duration
	// ShadowPodReconcilesPerPod, of an offloaded run, is how often the
	// provider's ShadowPod controller reconciled, per pod.
	ShadowPodReconcilesPerPod float64
}

// Result is one shape's two runs: the direct run is the baseline of the
// offloaded one.
type Result struct {
	Shape Shape
	// Claims: every pod was a StatefulSet's, with a claim (bench-storage).
	Claims          bool
	Direct, Offload RunStats
	// VirtualKubeletPeakRSS is the virtual kubelet's peak resident memory
	// up to the end of the offloaded run, in bytes (the burst runs first:
	// its figure is the one at its pods).
	VirtualKubeletPeakRSS int64
}

// Targets, as ratios against the direct run of the same shape in the same
// run (absolute times depend on the machine): the offloading issue's for
// the burst, issue 20's for the other shapes and the costs, the storage
// fabric's for pods with claims.
const (
	targetBurstP99Ratio       = 1.3
	targetRateP99Ratio        = 1.5
	targetPacedP99Ratio       = 2.0
	targetThroughputRatio     = 0.8
	targetPeakRSSMiB          = 64
	targetClaimsP99Ratio      = 1.5
	targetCPURatio            = 2.5
	targetRequestsPerPod      = 10
	targetShadowPodReconciles = 1.5
)

// CPURatio is the offloaded CPU time per pod over the direct one.
func (r Result) CPURatio() float64 { return r.Offload.CPUSecondsPerPod / r.Direct.CPUSecondsPerPod }

// P99Ratio is the offloaded p99 over the direct one.
func (r Result) P99Ratio() float64 { return r.Offload.P99.Seconds() / r.Direct.P99.Seconds() }

// ThroughputRatio is the offloaded throughput over the direct one.
func (r Result) ThroughputRatio() float64 { return r.Offload.Throughput / r.Direct.Throughput }

type target struct {
	name   string
	value  float64
	limit  float64
	atMost bool
}

// targets are the shape's targets: the ratios each shape has, and the costs
// per pod; throughput and memory only for the burst (the other shapes'
// throughput is their rate, and memory grows with every shape's pods).
func (r Result) targets() []target {
	if r.Claims {
		return []target{{"p99_ratio", r.P99Ratio(), targetClaimsP99Ratio, true}}
	}
	p99 := map[string]float64{ShapeBurst: targetBurstP99Ratio, ShapeRate: targetRateP99Ratio, ShapePaced: targetPacedP99Ratio}[r.Shape.Name]
	var ts []target
	if p99 > 0 {
		ts = append(ts, target{"p99_ratio", r.P99Ratio(), p99, true})
	}
	if r.Shape.Name == ShapeBurst {
		ts = append(ts,
			target{"throughput_ratio", r.ThroughputRatio(), targetThroughputRatio, false},
			target{"vk_peak_rss_mib", float64(r.VirtualKubeletPeakRSS) / (1 << 20), targetPeakRSSMiB, true})
	}
	return append(ts,
		target{"cpu_ratio", r.CPURatio(), targetCPURatio, true},
		target{"net_requests_per_pod_offload", r.Offload.NetRequestsPerPod, targetRequestsPerPod, true},
		target{"shadowpod_reconciles_per_pod", r.Offload.ShadowPodReconcilesPerPod, targetShadowPodReconciles, true})
}

// Print writes one line per target, met or missed, and last the RESULT line.
func (r Result) Print(w io.Writer) {
	for _, t := range r.targets() {
		op, met := ">=", t.value >= t.limit
		if t.atMost {
			op, met = "<=", t.value <= t.limit
		}
		verdict := "met"
		if !met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "target %s %s %s %g: %s (%.2f)\n", r.Shape.Name, t.name, op, t.limit, verdict, t.value)
	}
	workload := ""
	if r.Claims {
		workload = "workload=statefulset-pods-with-claims "
	}
	fmt.Fprintf(w, "RESULT %sshape=%s pods=%d direct_p50_ms=%.0f direct_p99_ms=%.0f offload_p50_ms=%.0f offload_p99_ms=%.0f p99_ratio=%.2f"+
		" ferry_added_p50_ms=%.0f ferry_added_p99_ms=%.0f"+
		" direct_throughput_pods_per_s=%.1f offload_throughput_pods_per_s=%.1f throughput_ratio=%.2f vk_peak_rss_mib=%.0f"+
		" requests_per_pod_direct=%.1f requests_per_pod_offload=%.1f net_requests_per_pod_direct=%.1f net_requests_per_pod_offload=%.1f cpu_ms_per_pod_direct=%.2f cpu_ms_per_pod_offload=%.2f cpu_ratio=%.2f"+
		" shadowpod_reconciles_per_pod=%.2f",
		workload, r.Shape.Name, r.Shape.Pods, millis(r.Direct.P50), millis(r.Direct.P99), millis(r.Offload.P50), millis(r.Offload.P99), r.P99Ratio(),
		millis(r.Offload.FerryAddedP50), millis(r.Offload.FerryAddedP99),
		r.Direct.Throughput, r.Offload.Throughput, r.ThroughputRatio(), float64(r.VirtualKubeletPeakRSS)/(1<<20),
		r.Direct.RequestsPerPod, r.Offload.RequestsPerPod, r.Direct.NetRequestsPerPod, r.Offload.NetRequestsPerPod, r.Direct.CPUSecondsPerPod*1000, r.Offload.CPUSecondsPerPod*1000, r.CPURatio(),
		r.Offload.ShadowPodReconcilesPerPod)
	if r.Claims {
		// The offloaded pods' requests per pod in each cluster, against
		// the direct ones' (all in the provider).
		fmt.Fprintf(w, " requests_per_pod_offload_provider=%.1f requests_per_pod_offload_consumer=%.1f",
			r.Offload.RequestsPerPodBy[string(providerID)], r.Offload.RequestsPerPodBy[string(consumerID)])
	}
	fmt.Fprintln(w)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
