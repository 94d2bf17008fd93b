package kubeletapi

import (
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestRequestAttributes(t *testing.T) {
	tests := []struct{ method, path, verb, sub string }{
		{"GET", "/containerLogs/shop/web-1/app", "get", "proxy"},
		{"POST", "/exec/shop/web-1/app", "create", "proxy"},
		{"GET", "/exec/shop/web-1/app", "get", "proxy"},
		{"POST", "/portForward/shop/web-1", "create", "proxy"},
		{"GET", "/stats/summary", "get", "stats"},
		{"GET", "/metrics/resource", "get", "metrics"},
		{"GET", "/logs/", "get", "log"},
		{"GET", "/pods", "get", "proxy"},
		{"GET", "/statsx", "get", "proxy"},
	}
	for _, tt := range tests {
		a := requestAttributes(httptest.NewRequest(tt.method, tt.path, nil), "ferry-eu")
		if a.Verb != tt.verb || a.Subresource != tt.sub || a.Resource != "nodes" || a.Name != "ferry-eu" || !a.ResourceRequest {
			t.Errorf("%s %s: got %s nodes/%s %s, want %s nodes/%s ferry-eu", tt.method, tt.path, a.Verb, a.Subresource, a.Name, tt.verb, tt.sub)
		}
	}
}

func TestCPUCountersIntegrateRates(t *testing.T) {
	var c cpuCounters
	t0 := time.Unix(1000, 0)
	if got := c.add("u1", "app", 500_000_000, t0); got != 0 {
		t.Fatalf("first sample = %d, want 0 (a counter starts at zero)", got)
	}
	// Half a core for 10 s: 5 core-seconds.
	if got := c.add("u1", "app", 500_000_000, t0.Add(10*time.Second)); got != 5_000_000_000 {
		t.Fatalf("after 10s at 0.5 cores = %d, want 5e9", got)
	}
	// The same sample again (the provider's metrics did not move) adds nothing.
	if got := c.add("u1", "app", 500_000_000, t0.Add(10*time.Second)); got != 5_000_000_000 {
		t.Fatalf("repeated sample = %d, want 5e9", got)
	}
	c.add("u2", "app", 1_000_000_000, t0)
	if got := c.add("u2", "app", 1_000_000_000, t0.Add(time.Second)); got != 1_000_000_000 {
		t.Errorf("u2 after 1s at 1 core = %d, want 1e9 (counters are per container)", got)
	}
	c.forgetExcept([]*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}})
	if got := c.add("u1", "app", 0, t0.Add(20*time.Second)); got != 0 {
		t.Errorf("u1 after it left the node = %d, want a new counter from 0", got)
	}
}

func TestResourceMetricFamilies(t *testing.T) {
	at := metav1.NewTime(time.Unix(2000, 0))
	cpu, total, mem := uint64(250_000_000), uint64(3_000_000_000), uint64(64<<20)
	sum := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "ferry-eu",
			CPU:    &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &cpu, UsageCoreNanoSeconds: &total},
			Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &mem}},
		Pods: []statsv1alpha1.PodStats{{
			PodRef: statsv1alpha1.PodReference{Name: "web-1", Namespace: "shop"},
			CPU:    &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &cpu, UsageCoreNanoSeconds: &total},
			Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &mem},
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: at,
				CPU:    &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &cpu, UsageCoreNanoSeconds: &total},
				Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &mem}}},
		}, {
			// Not measured: only its start time is reported.
			PodRef:     statsv1alpha1.PodReference{Name: "web-2", Namespace: "shop"},
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: at}},
		}},
	}
	got := map[string]float64{}
	counts := map[string]int{}
	for _, f := range resourceMetricFamilies(sum) {
		for _, m := range f.Metric {
			counts[f.GetName()]++
			if m.Counter != nil {
				got[f.GetName()] = m.Counter.GetValue()
			} else {
				got[f.GetName()] = m.Gauge.GetValue()
			}
		}
	}
	if got["container_cpu_usage_seconds_total"] != 3 || got["pod_memory_working_set_bytes"] != float64(64<<20) || got["node_cpu_usage_seconds_total"] != 3 {
		t.Errorf("values = %v", got)
	}
	if counts["container_start_time_seconds"] != 2 || counts["container_cpu_usage_seconds_total"] != 1 {
		t.Errorf("samples per family = %v, want 2 start times and 1 measured container", counts)
	}
}
