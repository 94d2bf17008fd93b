package scheduler

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "k8s.io/component-base/logs/json/register" // -logging-format=json, as upstream's suites
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

const (
	// configFile is the test cases, relative to this folder (go test's
	// working directory).
	configFile = "performance-config.yaml"
	// topic names the data-items file:
	// BenchmarkPerfScheduling_benchmark_<topic>_<time>.json.
	topic = "ferry"
	// shortLabel selects the small workloads of configFile.
	shortLabel = "short"
	// shortWorkload is their name.
	shortWorkload = "50Nodes_200Pods"
)

// etcdErr is why etcd is not on PATH, nil when it is.
var etcdErr error

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	etcdErr = putEtcdOnPath()
	os.Exit(m.Run())
}

// putEtcdOnPath puts the test bed's etcd (`make testbed`) first on PATH:
// scheduler_perf starts one per workload and looks it up there.
func putEtcdOnPath() error {
	etcd, err := binaries.Path(binaries.Etcd)
	if err != nil {
		if _, lookErr := exec.LookPath("etcd"); lookErr == nil {
			return nil // someone else's etcd
		}
		return err
	}
	return os.Setenv("PATH", filepath.Dir(etcd)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// requireEtcd skips without etcd, as the test bed's tests do without their
// binaries, and fails under CI, where `make test` builds them first.
func requireEtcd(tb testing.TB) {
	tb.Helper()
	if etcdErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatal(etcdErr)
	}
	tb.Skip(etcdErr)
}

// BenchmarkPerfScheduling runs the workloads of performance-config.yaml
// that -perf-scheduling-label-filter selects (default: performance, the
// full size) with ferry's plugins registered, checks after each workload
// that every pod sits where ferry's policy puts it, and prints the RESULT
// lines from the data-items file (kept in -data-items-dir when given).
//
//	go test -run '^$' -bench BenchmarkPerfScheduling -benchtime 1x -timeout 90m ./test/perf/scheduler/
func BenchmarkPerfScheduling(b *testing.B) {
	requireEtcd(b)
	dir := dataItemsDir(b)
	start := time.Now()
	perf.RunBenchmarkPerfScheduling(b, configFile, topic, pluginRegistry(),
		perf.WithPreRunFn(resetPlugins), perf.WithPrepareFn(prepareWorkload))
	file, err := newestDataItems(dir, start)
	if err != nil {
		b.Fatal(err)
	}
	items, err := ReadDataItems(file)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range takePlacements() {
		fmt.Println(line)
	}
	Summarize(items).Print(os.Stdout)
	fmt.Printf("RESULT scheduler data_items=%s wall_s=%.0f\n", file, time.Since(start).Seconds())
}

// dataItemsDir is scheduler_perf's -data-items-dir, set to a temporary
// folder when not given so that no run leaves files in the source tree.
func dataItemsDir(b *testing.B) string {
	f := flag.Lookup("data-items-dir")
	if f == nil {
		b.Fatal("scheduler_perf has no -data-items-dir flag")
	}
	if f.Value.String() == "" {
		if err := f.Value.Set(b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	return f.Value.String()
}

// newestDataItems finds the data-items file the run wrote.
func newestDataItems(dir string, since time.Time) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_"+topic+"_*.json"))
	if err != nil {
		return "", err
	}
	var newest string
	var newestTime time.Time
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		if mt := st.ModTime(); !mt.Before(since.Add(-time.Second)) && mt.After(newestTime) {
			newest, newestTime = f, mt
		}
	}
	if newest == "" {
		return "", fmt.Errorf("no data-items file of this run in %s", dir)
	}
	return newest, nil
}

// TestSchedulerPerfShort keeps the benchmark from rotting under plain `go
// test ./...`: it runs the short workloads of every test case (50 nodes,
// 200 measured pods) through BenchmarkPerfScheduling in a child process,
// which fails when a pod is not scheduled or sits where ferry's policy
// forbids, and checks that every workload was measured and that ferry's
// plugins ran where they should. It takes about a minute.
//
// The child runs the benchmark rather than scheduler_perf's
// RunIntegrationPerfScheduling, which takes no out-of-tree plugins and runs
// no prepare hook.
func TestSchedulerPerfShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and a scheduler per workload (about a minute)")
	}
	requireEtcd(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run=^$", "-test.bench=^BenchmarkPerfScheduling$", "-test.benchtime=1x", "-test.timeout=9m",
		"-perf-scheduling-label-filter="+shortLabel, "-data-items-dir="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("short benchmark ran in %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("short benchmark: %v\n%s%s", err, raceReport(out.String()), tail(out.String(), 150))
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "RESULT ") || strings.HasPrefix(line, "placement ") {
			t.Log(line)
		}
	}

	file, err := newestDataItems(dir, start)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out.String(), 150))
	}
	items, err := ReadDataItems(file)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(items)
	for _, c := range []string{CaseBasicDefault, CaseBasicFerry, CasePlacement, CaseNodeAffinity, CaseLocalFirst, CaseLocalFirstAffinity} {
		w := s[Key{c, shortWorkload}]
		if w == nil || w.Duration <= 0 {
			t.Errorf("%s/%s: no measurement in %s", c, shortWorkload, file)
		}
	}
	// Extension points every measured pod of the workload goes through
	// (plugin durations are sampled in 10% of the cycles).
	for c, want := range map[string][]string{
		CaseBasicFerry: {"ClusterSelector/PreFilter", "RemoteFit/PreFilter", "DataGravity/PreFilter"},
		CasePlacement:  {"ClusterSelector/Filter", "RemoteFit/Filter", "DataGravity/PreFilter", "DataGravity/Score"},
		CaseLocalFirst: {"ClusterPreference/PreScore", "ClusterPreference/Score"},
	} {
		w := s[Key{c, shortWorkload}]
		if w == nil {
			continue // reported above
		}
		for _, p := range want {
			if _, ok := w.PluginP99[p]; !ok {
				t.Errorf("%s/%s: no duration of %s: did the ferry profile run? got %v", c, shortWorkload, p, w.PluginP99)
			}
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func TestNewestDataItemsIgnoresOlderRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mtime time.Time) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(`{"version":"v1","dataItems":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	write("BenchmarkPerfScheduling_benchmark_ferry_old.json", now.Add(-time.Hour))
	if _, err := newestDataItems(dir, now); err == nil {
		t.Fatal("an older run's file was taken for this run's")
	}
	write("BenchmarkPerfScheduling_benchmark_other_new.json", now)
	write("BenchmarkPerfScheduling_benchmark_ferry_new.json", now)
	got, err := newestDataItems(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_ferry_new.json"); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// raceReport is the first data race the race detector reported in out, if
// any, with its accesses and goroutines: the tail of a failed run shows
// only the end of the report.
func raceReport(out string) string {
	const mark = "WARNING: DATA RACE"
	i := strings.Index(out, mark)
	if i < 0 {
		return ""
	}
	report := out[i:]
	if end := strings.Index(report[len(mark):], "=================="); end >= 0 {
		report = report[:len(mark)+end]
	}
	return report + "\n[... the run's last lines:]\n"
}
