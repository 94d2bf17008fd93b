package realnodes

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferry-io/ferry/test/perf/stats"
)

// Targets of issue 33.
const (
	TargetStartP99Ratio     = 1.5
	TargetRequestAddedP50Ms = 0.5
	TargetThroughputRatio   = 0.5
)

// Durations are one measurement's samples, or why there are none.
type Durations struct {
	Samples []time.Duration
	// Err is why the measurement failed; Samples are then not reported.
	Err error
}

// OK tells whether the samples are reported.
func (d Durations) OK() bool { return d.Err == nil && len(d.Samples) > 0 }

// P is the p-th percentile of the samples.
func (d Durations) P(p float64) time.Duration { return stats.Percentile(d.Samples, p) }

// Throughput is one stream measurement's total, or why there is none.
type Throughput struct {
	Bytes   int64
	Seconds float64
	Err     error
}

// OK tells whether the throughput is reported.
func (t Throughput) OK() bool { return t.Err == nil && t.Seconds > 0 }

// MbitPerSecond is the throughput in Mbit/s.
func (t Throughput) MbitPerSecond() float64 { return float64(t.Bytes) * 8 / t.Seconds / 1e6 }

// Result is the whole run.
type Result struct {
	Pods int
	// StartDirect and StartOffload are pods' times from the create call to
	// a watch of the cluster they were created in seeing them Ready;
	// StartRemote the offloaded pods' from the create call in the consumer
	// to a watch of the provider seeing the provider's pod Ready.
	StartDirect, StartOffload, StartRemote Durations
	// Requests is the number of timed requests per side.
	Requests int
	// RequestDirect from a provider pod, RequestOffload from a consumer
	// pod, both through a Service to the same offloaded pods.
	RequestDirect, RequestOffload Durations
	// ThroughputDirect from a provider pod, ThroughputOffload from a
	// consumer pod, to the same offloaded pod.
	ThroughputDirect, ThroughputOffload Throughput
	// RequestUnderlay and ThroughputUnderlay are from the consumer pod to
	// the same pods through a NodePort Service of the provider's node:
	// across the underlay without ferry's fabric, what crossing from one
	// real node to the other costs alone.
	RequestUnderlay    Durations
	ThroughputUnderlay Throughput
	// StartInterval is the time between two pairs of start pods; 0: each
	// pair once the one before is Ready.
	StartInterval time.Duration
}

// StartP99Ratio is the offloaded pods' p99 start over the direct ones'.
func (r Result) StartP99Ratio() (float64, bool) {
	if !r.StartDirect.OK() || !r.StartOffload.OK() {
		return 0, false
	}
	return r.StartOffload.P(99).Seconds() / r.StartDirect.P(99).Seconds(), true
}

// RequestAdded is what the offloaded path adds at percentile p.
func (r Result) RequestAdded(p float64) (time.Duration, bool) {
	return added(r.RequestOffload, r.RequestDirect, p)
}

// RequestFabricAdded is what the offloaded path adds at percentile p to
// the underlay path (a NodePort of the provider's node).
func (r Result) RequestFabricAdded(p float64) (time.Duration, bool) {
	return added(r.RequestOffload, r.RequestUnderlay, p)
}

func added(a, b Durations, p float64) (time.Duration, bool) {
	if !a.OK() || !b.OK() {
		return 0, false
	}
	return a.P(p) - b.P(p), true
}

// ThroughputRatio is the cross-cluster throughput over the in-cluster one.
func (r Result) ThroughputRatio() (float64, bool) {
	if !r.ThroughputDirect.OK() || !r.ThroughputOffload.OK() {
		return 0, false
	}
	return r.ThroughputOffload.MbitPerSecond() / r.ThroughputDirect.MbitPerSecond(), true
}

// Failures are the measurements that failed, each with its reason.
func (r Result) Failures() []string {
	var fs []string
	for _, m := range []struct {
		name string
		err  error
	}{
		{"start direct", r.StartDirect.Err}, {"start offloaded", r.StartOffload.Err}, {"start remote", r.StartRemote.Err},
		{"requests in the provider", r.RequestDirect.Err}, {"requests from the consumer", r.RequestOffload.Err},
		{"throughput in the provider", r.ThroughputDirect.Err}, {"throughput from the consumer", r.ThroughputOffload.Err},
		{"requests from the consumer through the provider's node port", r.RequestUnderlay.Err},
		{"throughput from the consumer through the provider's node port", r.ThroughputUnderlay.Err},
	} {
		if m.err != nil {
			fs = append(fs, m.name+": "+m.err.Error())
		}
	}
	return fs
}

const failed = "failed"

func ms(d Durations, p float64) string {
	if !d.OK() {
		return failed
	}
	return fmt.Sprintf("%.2f", float64(d.P(p))/float64(time.Millisecond))
}

func num(v float64, ok bool, format string) string {
	if !ok {
		return failed
	}
	return fmt.Sprintf(format, v)
}

func mbit(t Throughput) string { return num(t.MbitPerSecond(), t.OK(), "%.0f") }

// Print writes a FAILED line per failed measurement, a line per target,
// met, missed or not measured, and last the RESULT line, where a failed
// measurement's figures are "failed".
func (r Result) Print(w io.Writer) {
	for _, f := range r.Failures() {
		fmt.Fprintf(w, "FAILED %s\n", f)
	}
	startRatio, startOK := r.StartP99Ratio()
	added50, addedOK := r.RequestAdded(50)
	added99, _ := r.RequestAdded(99)
	fabric50, fabricOK := r.RequestFabricAdded(50)
	fabric99, _ := r.RequestFabricAdded(99)
	underlayRatio, underlayOK := 0.0, r.ThroughputOffload.OK() && r.ThroughputUnderlay.OK()
	if underlayOK {
		underlayRatio = r.ThroughputOffload.MbitPerSecond() / r.ThroughputUnderlay.MbitPerSecond()
	}
	interval := "paced"
	if r.StartInterval > 0 {
		interval = r.StartInterval.String()
	}
	tputRatio, tputOK := r.ThroughputRatio()
	for _, t := range []struct {
		name   string
		value  float64
		ok     bool
		limit  float64
		atMost bool
	}{
		{"start_p99_ratio", startRatio, startOK, TargetStartP99Ratio, true},
		{"request_added_p50_ms", float64(added50) / float64(time.Millisecond), addedOK, TargetRequestAddedP50Ms, true},
		{"throughput_ratio", tputRatio, tputOK, TargetThroughputRatio, false},
	} {
		op, met := ">=", t.value >= t.limit
		if t.atMost {
			op, met = "<=", t.value <= t.limit
		}
		verdict := fmt.Sprintf("met (%.2f)", t.value)
		switch {
		case !t.ok:
			verdict = "NOT MEASURED"
		case !met:
			verdict = fmt.Sprintf("MISSED (%.2f)", t.value)
		}
		fmt.Fprintf(w, "target %s %s %g: %s\n", t.name, op, t.limit, verdict)
	}
	fields := []string{
		fmt.Sprintf("pods=%d", r.Pods), "start_interval=" + interval,
		"start_direct_p50_ms=" + ms(r.StartDirect, 50), "start_direct_p99_ms=" + ms(r.StartDirect, 99),
		"start_offload_p50_ms=" + ms(r.StartOffload, 50), "start_offload_p99_ms=" + ms(r.StartOffload, 99),
		"start_offload_remote_ready_p50_ms=" + ms(r.StartRemote, 50),
		"start_p99_ratio=" + num(startRatio, startOK, "%.2f"),
		fmt.Sprintf("requests=%d", r.Requests),
		"request_direct_p50_ms=" + ms(r.RequestDirect, 50), "request_direct_p99_ms=" + ms(r.RequestDirect, 99),
		"request_offload_p50_ms=" + ms(r.RequestOffload, 50), "request_offload_p99_ms=" + ms(r.RequestOffload, 99),
		"request_added_p50_ms=" + num(float64(added50)/float64(time.Millisecond), addedOK, "%.2f"),
		"request_added_p99_ms=" + num(float64(added99)/float64(time.Millisecond), addedOK, "%.2f"),
		"throughput_direct_mbit_s=" + mbit(r.ThroughputDirect), "throughput_offload_mbit_s=" + mbit(r.ThroughputOffload),
		"throughput_ratio=" + num(tputRatio, tputOK, "%.2f"),
		"request_underlay_p50_ms=" + ms(r.RequestUnderlay, 50), "request_underlay_p99_ms=" + ms(r.RequestUnderlay, 99),
		"request_fabric_added_p50_ms=" + num(float64(fabric50)/float64(time.Millisecond), fabricOK, "%.2f"),
		"request_fabric_added_p99_ms=" + num(float64(fabric99)/float64(time.Millisecond), fabricOK, "%.2f"),
		"throughput_underlay_mbit_s=" + mbit(r.ThroughputUnderlay),
		"throughput_offload_over_underlay=" + num(underlayRatio, underlayOK, "%.2f"),
	}
	fmt.Fprintf(w, "RESULT bench=real %s\n", strings.Join(fields, " "))
}
