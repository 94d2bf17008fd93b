package reflection

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkReflection is `make bench-reflection`: the open watches with 1,
// 10 and 50 offloaded namespaces, then, in each remote scope, 1000
// ConfigMaps, 1000 Secrets and 200 Services reflected, 200 ConfigMap updates
// and an idle period with resyncs. It prints progress, target and RESULT
// lines, and fails only when something is not reflected or not measured.
//
//	go test -run '^$' -bench '^BenchmarkReflection$' -benchtime 1x -timeout 30m ./test/perf/reflection/
func BenchmarkReflection(b *testing.B) {
	start := time.Now()
	for b.Loop() {
		runBenchmark(b, benchParams(), func(line string) { fmt.Println(line) })
	}
	fmt.Printf("RESULT reflection wall_s=%.0f\n", time.Since(start).Seconds())
}

// TestReflectionShort keeps the benchmark from rotting under plain `go test
// ./...`: the same phases at a small size (44 objects in 2 namespaces,
// watches with 1 and 3 namespaces, a 2s resync), in well under a minute.
func TestReflectionShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two API servers (about half a minute)")
	}
	runBenchmark(t, shortParams(), func(line string) { t.Log(line) })
}

func runBenchmark(tb testing.TB, p params, out func(string)) {
	h := startHarness(tb, p, out)
	ctx := tb.Context()
	h.measureWatches(ctx)
	if tb.Failed() {
		return
	}
	for _, scope := range scopes {
		h.measureLoad(ctx, scope)
	}
}
