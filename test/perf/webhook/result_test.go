package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/test/localwebhook"
)

func TestAddedCPUIsTheAPIServerAndWebhookCPUOverTheUnplacedOnes(t *testing.T) {
	r := Result{
		Pods: 10, Concurrency: 2, Main: localwebhook.PlacementPolicy,
		Plain: RunStats{P99: 10 * time.Millisecond, Throughput: 100, APIServerCPU: 1200 * time.Microsecond, HarnessCPU: 300 * time.Microsecond},
		Placed: map[localwebhook.Placement]RunStats{
			localwebhook.PlacementWebhook: {P99: 30 * time.Millisecond, Throughput: 60, APIServerCPU: 1600 * time.Microsecond, HarnessCPU: 560 * time.Microsecond},
			localwebhook.PlacementPolicy:  {P99: 12 * time.Millisecond, Throughput: 90, APIServerCPU: 1350 * time.Microsecond, HarnessCPU: 300 * time.Microsecond},
		},
	}
	if got, want := r.AddedCPU(localwebhook.PlacementWebhook), 660*time.Microsecond; got != want {
		t.Errorf("webhook AddedCPU = %v, want %v", got, want)
	}
	if got, want := r.AddedCPU(localwebhook.PlacementPolicy), 150*time.Microsecond; got != want {
		t.Errorf("policy AddedCPU = %v, want %v", got, want)
	}
	var out strings.Builder
	r.Print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "target added_cpu_ms_per_pod <= 0.3: met (0.150, policy)") {
		t.Fatalf("Print wrote:\n%s", out.String())
	}
	for _, kv := range []string{
		"placement=policy", "added_cpu_ms_per_pod=0.150", "throughput_ratio=0.90", "added_p99_ms=2.00",
		"webhook_added_cpu_ms_per_pod=0.660", "webhook_pods_per_s=60", "webhook_throughput_ratio=0.60", "webhook_p99_ms=30.00",
		"policy_added_cpu_ms_per_pod=0.150", "policy_over_webhook_added_cpu=0.23", "policy_over_webhook_throughput=1.50",
	} {
		if !strings.Contains(" "+lines[3]+" ", " "+kv+" ") {
			t.Errorf("RESULT line lacks %s: %s", kv, lines[3])
		}
	}
}
