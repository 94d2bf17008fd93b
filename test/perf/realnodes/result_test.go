package realnodes

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func msec(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func resultLine(t *testing.T, out string) map[string]string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			kv := map[string]string{}
			for _, f := range strings.Fields(rest) {
				k, v, _ := strings.Cut(f, "=")
				kv[k] = v
			}
			return kv
		}
	}
	t.Fatalf("no RESULT line in %q", out)
	return nil
}

func TestPrintReportsRatiosAndAddedLatency(t *testing.T) {
	r := Result{Pods: 2, Requests: 2,
		StartDirect: Durations{Samples: []time.Duration{msec(1000), msec(2000)}}, StartOffload: Durations{Samples: []time.Duration{msec(1500), msec(3000)}},
		StartRemote:   Durations{Samples: []time.Duration{msec(1200), msec(2500)}},
		RequestDirect: Durations{Samples: []time.Duration{msec(1), msec(2)}}, RequestOffload: Durations{Samples: []time.Duration{msec(2), msec(4)}},
		ThroughputDirect: Throughput{Bytes: 1e9, Seconds: 1}, ThroughputOffload: Throughput{Bytes: 2e8, Seconds: 1},
		RequestUnderlay:    Durations{Samples: []time.Duration{msec(1), msec(3)}},
		ThroughputUnderlay: Throughput{Bytes: 4e8, Seconds: 1},
	}
	var out strings.Builder
	r.Print(&out)
	kv := resultLine(t, out.String())
	for k, want := range map[string]string{"request_fabric_added_p50_ms": "1.00", "request_fabric_added_p99_ms": "1.00",
		"throughput_offload_over_underlay": "0.50", "start_interval": "paced"} {
		if kv[k] != want {
			t.Errorf("%s=%q, want %q", k, kv[k], want)
		}
	}
	for k, want := range map[string]string{"start_p99_ratio": "1.50", "request_added_p50_ms": "1.00", "request_added_p99_ms": "2.00",
		"throughput_ratio": "0.20", "throughput_direct_mbit_s": "8000", "start_offload_remote_ready_p50_ms": "1200.00"} {
		if kv[k] != want {
			t.Errorf("%s=%q, want %q", k, kv[k], want)
		}
	}
	for _, want := range []string{"target start_p99_ratio <= 1.5: met (1.50)", "target request_added_p50_ms <= 0.5: MISSED (1.00)", "target throughput_ratio >= 0.5: MISSED (0.20)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "FAILED") {
		t.Errorf("a FAILED line with nothing failed:\n%s", out.String())
	}
}

func TestPrintShowsAFailedMeasurementAsFailedNotANumber(t *testing.T) {
	boom := errors.New("real-consumer: 5 of 5 requests to http://10.96.0.20:80/ failed, first: i/o timeout")
	r := Result{Pods: 1, Requests: 5,
		StartDirect: Durations{Samples: []time.Duration{msec(1000)}}, StartOffload: Durations{Samples: []time.Duration{msec(1200)}},
		StartRemote:   Durations{Samples: []time.Duration{msec(1100)}},
		RequestDirect: Durations{Samples: []time.Duration{msec(1)}}, RequestOffload: Durations{Err: boom},
		ThroughputDirect: Throughput{Bytes: 1e9, Seconds: 1}, ThroughputOffload: Throughput{Err: boom},
	}
	var out strings.Builder
	r.Print(&out)
	kv := resultLine(t, out.String())
	for _, k := range []string{"request_offload_p50_ms", "request_added_p50_ms", "request_added_p99_ms", "throughput_offload_mbit_s", "throughput_ratio"} {
		if kv[k] != "failed" {
			t.Errorf("%s=%q, want failed", k, kv[k])
		}
	}
	if kv["start_p99_ratio"] != "1.20" || kv["request_direct_p50_ms"] != "1.00" {
		t.Errorf("the measured figures are missing: %v", kv)
	}
	if !strings.Contains(out.String(), "FAILED requests from the consumer: "+boom.Error()) ||
		!strings.Contains(out.String(), "target throughput_ratio >= 0.5: NOT MEASURED") {
		t.Errorf("the failure is not spelled out:\n%s", out.String())
	}
	if n := len(r.Failures()); n != 2 {
		t.Errorf("%d failures, want 2", n)
	}
}
