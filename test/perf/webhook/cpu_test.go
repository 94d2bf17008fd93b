package webhook

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50 ticks.
	stat := "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Errorf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "4242 kube", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 ab 50 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) accepted", bad)
		}
	}
}

func TestCPUMeterOfThisProcess(t *testing.T) {
	m, err := newCPUMeter(map[string]int{"self": os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	lap, err := m.lap()
	if err != nil {
		t.Fatal(err)
	}
	if lap["self"] <= 0 {
		t.Errorf("a busy loop of 300ms used %v of CPU", lap["self"])
	}
}
