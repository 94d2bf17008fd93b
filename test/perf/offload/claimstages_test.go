package offload

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSharesSplitTheMeanTimeToRunningByStep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tl := newTimeline()
	at := func(pod string, s stage, ms int) { tl.mark(pod, s, t0.Add(time.Duration(ms)*time.Millisecond)) }
	// a: 1000 ms to running, b: 3000 ms; c never ran: left out.
	for pod, scale := range map[string]int{"a": 1, "b": 3} {
		at(pod, created, 0)
		at(pod, claimSelected, 100*scale)
		at(pod, claimHanded, 150*scale)
		at(pod, claimVolume, 200*scale)
		at(pod, claimBound, 300*scale)
		at(pod, bound, 900*scale)
		at(pod, running, 1000*scale)
	}
	at("c", created, 0)
	at("c", claimSelected, 99999)
	res := &runResult{name: "direct-burst", pods: 3, stages: claimStages(false), timeline: tl}
	got := res.shares()
	want := "2000ms total over 2 pods; claim-selected 10% (200ms), claim-handed 5% (100ms), volume 5% (100ms), claim-bound 10% (200ms), bound 60% (1200ms), running 10% (200ms)"
	if got != want {
		t.Errorf("shares() =\n%s\nwant\n%s", got, want)
	}
	if got := (&runResult{stages: []stage{created, bound, running}, timeline: tl}).shares(); got != "" {
		t.Errorf("a run without claims has no shares, got %q", got)
	}
}

func TestClaimPodNamesTheClaimsPodOfTheRun(t *testing.T) {
	for _, tc := range []struct {
		claim, pod string
		ok         bool
	}{
		{"data-offload-burst-003-7", "offload-burst-003-7", true},
		{"data-direct-burst-000-0", "", false}, // another run's
		{"offload-burst-003-7", "", false},     // not a template's claim
	} {
		pod, ok := claimPod(tc.claim, "offload-burst-")
		if ok != tc.ok || (ok && pod != tc.pod) {
			t.Errorf("claimPod(%q) = %q, %v; want %q, %v", tc.claim, pod, ok, tc.pod, tc.ok)
		}
	}
}

func TestClaimsResultNamesRequestsPerPodOfEachCluster(t *testing.T) {
	r := Result{
		Shape: Shape{Name: ShapeBurst, Pods: 200, Concurrency: 32}, Claims: true,
		Direct:  RunStats{P50: 7 * time.Second, P99: 10 * time.Second, RequestsPerPod: 21.4},
		Offload: RunStats{P50: 9 * time.Second, P99: 14 * time.Second, RequestsPerPod: 50, RequestsPerPodBy: map[string]float64{"provider": 22.25, "consumer": 27.75}},
	}
	var out bytes.Buffer
	r.Print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != "target burst p99_ratio <= 1.5: met (1.40)" {
		t.Errorf("claims target line = %q, want the p99 ratio judged against 1.5", lines[0])
	}
	last := lines[len(lines)-1]
	for _, kv := range []string{"RESULT workload=statefulset-pods-with-claims ", " p99_ratio=1.40 ", " requests_per_pod_direct=21.4 ",
		" requests_per_pod_offload_provider=22.2 requests_per_pod_offload_consumer=27.8"} {
		if !strings.Contains(last, kv) {
			t.Errorf("RESULT line lacks %q:\n%s", kv, last)
		}
	}
	if !strings.HasSuffix(last, "requests_per_pod_offload_consumer=27.8") {
		t.Errorf("RESULT line does not end with the consumer's requests per pod:\n%s", last)
	}
}
