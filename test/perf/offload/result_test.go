package offload

import (
	"bytes"
	"github.com/ferry-io/ferry/test/perf/stats"
	"strings"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var hundred []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		name   string
		values []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values", nil, 99, 0},
		{"one value is every percentile", []time.Duration{7}, 1, 7},
		{"median of 100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Millisecond},
		{"p99 of 3 is the maximum", []time.Duration{3, 1, 2}, 99, 3},
		{"p50 of 4 is the second", []time.Duration{4, 3, 2, 1}, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stats.Percentile(tc.values, tc.p); got != tc.want {
				t.Errorf("stats.Percentile(%v, %v) = %v, want %v", tc.values, tc.p, got, tc.want)
			}
		})
	}
}

func TestPercentileLeavesItsInputUnsorted(t *testing.T) {
	values := []time.Duration{3, 1, 2}
	stats.Percentile(values, 50)
	if values[0] != 3 || values[1] != 1 || values[2] != 2 {
		t.Errorf("input reordered: %v", values)
	}
}

func TestPrintEndsWithResultLineAndJudgesEachTarget(t *testing.T) {
	r := Result{
		Shape:  Shape{Name: ShapeBurst, Pods: 1000, Concurrency: 32},
		Direct: RunStats{P50: 80 * time.Millisecond, P99: 700 * time.Millisecond, Throughput: 50, RequestsPerPod: 5, NetRequestsPerPod: 4.5, CPUSecondsPerPod: 0.004},
		Offload: RunStats{P50: 120 * time.Millisecond, P99: 1400 * time.Millisecond, Throughput: 45, RequestsPerPod: 10.5, NetRequestsPerPod: 9.5, CPUSecondsPerPod: 0.011,
			FerryAddedP50: 30 * time.Millisecond, FerryAddedP99: 90 * time.Millisecond, ShadowPodReconcilesPerPod: 2},
		VirtualKubeletPeakRSS: 60 << 20,
	}
	var out bytes.Buffer
	r.Print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"target burst p99_ratio <= 1.3: MISSED (2.00)",
		"target burst throughput_ratio >= 0.8: met (0.90)",
		"target burst vk_peak_rss_mib <= 64: met (60.00)",
		"target burst cpu_ratio <= 2.5: MISSED (2.75)",
		"target burst net_requests_per_pod_offload <= 10: met (9.50)",
		"target burst shadowpod_reconciles_per_pod <= 1.5: MISSED (2.00)",
		"RESULT shape=burst pods=1000 direct_p50_ms=80 direct_p99_ms=700 offload_p50_ms=120 offload_p99_ms=1400 p99_ratio=2.00" +
			" ferry_added_p50_ms=30 ferry_added_p99_ms=90" +
			" direct_throughput_pods_per_s=50.0 offload_throughput_pods_per_s=45.0 throughput_ratio=0.90 vk_peak_rss_mib=60" +
			" requests_per_pod_direct=5.0 requests_per_pod_offload=10.5 net_requests_per_pod_direct=4.5 net_requests_per_pod_offload=9.5 cpu_ms_per_pod_direct=4.00 cpu_ms_per_pod_offload=11.00 cpu_ratio=2.75" +
			" shadowpod_reconciles_per_pod=2.00",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Print wrote\n%s\nwant\n%s", out.String(), strings.Join(want, "\n"))
	}

	r.Shape = Shape{Name: ShapePaced, Pods: 100, Concurrency: 1, Rate: 2}
	out.Reset()
	r.Print(&out)
	if got := out.String(); !strings.HasPrefix(got, "target paced p99_ratio <= 2: met (2.00)\ntarget paced cpu_ratio") {
		t.Errorf("the paced shape is judged on its own p99 target, without throughput or memory:\n%s", got)
	}
}

func TestSumBetweenAddsFerrysStepsOfPodsThatTookThemAll(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tl := newTimeline()
	at := func(pod string, s stage, ms int) { tl.mark(pod, s, t0.Add(time.Duration(ms)*time.Millisecond)) }
	at("a", bound, 0)
	at("a", shadowed, 10)
	at("a", remoteCreated, 30)
	at("a", remoteRunning, 500)
	at("a", running, 507)
	at("b", bound, 0) // never Running: left out
	at("b", shadowed, 10)
	got := tl.sumBetween(ferryStages...)
	if len(got) != 1 || got[0] != 37*time.Millisecond {
		t.Errorf("sumBetween(ferryStages) = %v, want [37ms]", got)
	}
}

func TestSelectShapes(t *testing.T) {
	all := DefaultShapes(1000, 32)
	got, err := SelectShapes(all, "paced, burst")
	if err != nil || len(got) != 2 || got[0].Name != ShapeBurst || got[1].Name != ShapePaced {
		t.Errorf("SelectShapes(paced, burst) = %v, %v; want burst then paced", got, err)
	}
	for _, bad := range []string{"", "steady", "burst,steady"} {
		if _, err := SelectShapes(all, bad); err == nil || !strings.Contains(err.Error(), "-shapes") {
			t.Errorf("SelectShapes(%q) error %v, want one naming -shapes", bad, err)
		}
	}
	paced := all[2]
	begin := time.Unix(0, 0)
	if d := paced.startOf(begin, 3).Sub(begin); d != 1500*time.Millisecond {
		t.Errorf("the 4th paced pod is due after %s, want 1.5s", d)
	}
	if d := all[0].startOf(begin, 999).Sub(begin); d != 0 {
		t.Errorf("a burst pod is due after %s, want at once", d)
	}
}

func TestTimelineKeepsTheFirstTimeOfEachStage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tl := newTimeline()
	tl.mark("a", created, t0)
	tl.mark("a", running, t0.Add(300*time.Millisecond))
	tl.mark("a", running, t0.Add(900*time.Millisecond)) // a later update: ignored
	tl.mark("b", created, t0.Add(100*time.Millisecond))
	tl.mark("b", running, t0.Add(200*time.Millisecond))
	tl.mark("c", created, t0.Add(150*time.Millisecond)) // never Running

	if got := tl.count(running); got != 2 {
		t.Errorf("count(running) = %d, want 2", got)
	}
	d := tl.between(created, running)
	if len(d) != 2 || stats.Percentile(d, 100) != 300*time.Millisecond || stats.Percentile(d, 1) != 100*time.Millisecond {
		t.Errorf("between(created, running) = %v, want 300ms and 100ms", d)
	}
	first, last := tl.window(created)
	if !first.Equal(t0) || !last.Equal(t0.Add(150*time.Millisecond)) {
		t.Errorf("window(created) = %v..%v", first, last)
	}
}
