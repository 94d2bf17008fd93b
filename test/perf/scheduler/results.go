// Package scheduler holds ferry's scheduler_perf benchmark (`make
// bench-scheduler`, see docs/development/benchmarks.md): kube-scheduler's own scheduler_perf
// harness runs performance-config.yaml with ferry's plugins registered, and
// this file turns the data items it writes into RESULT lines: throughput of
// each workload, the two ratios ferry is held to, and the p99 duration of
// each ferry plugin per extension point.
package scheduler

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Names of the test cases in performance-config.yaml that the RESULT lines
// pair up.
const (
	CaseBasicDefault = "SchedulingBasic"
	CaseBasicFerry   = "SchedulingBasicFerryProfile"
	CasePlacement    = "FerryPlacement"
	CaseNodeAffinity = "NodeAffinityPlacement"
	// CaseLocalFirst and CaseLocalFirstAffinity are the LocalFirst pair:
	// ferry's ClusterPreference vs. the preferred node affinity the pod
	// webhook writes for the default scheduler.
	CaseLocalFirst         = "LocalFirstPlacement"
	CaseLocalFirstAffinity = "NodeAffinityLocalFirst"
)

// Targets the ratios are held to.
const (
	TargetBasicRatio     = 0.95
	TargetPlacementRatio = 0.9
)

// Plugins are ferry's plugins, PluginExtensionPoints the extension points
// whose p99 the RESULT lines report, in print order.
var (
	Plugins               = []string{"ClusterSelector", "RemoteFit", "DataGravity", "ClusterPreference"}
	PluginExtensionPoints = []string{"PreFilter", "Filter", "PreScore", "Score"}
)

// Metric names in the data items.
const (
	metricThroughput = "SchedulingThroughput"
	metricDuration   = "SchedulingDuration"
	metricPlugin     = "scheduler_plugin_execution_duration_seconds"
)

// DataItems is the JSON file scheduler_perf writes
// (BenchmarkPerfScheduling_benchmark_<topic>_<time>.json).
type DataItems struct {
	Version   string     `json:"version"`
	DataItems []DataItem `json:"dataItems"`
}

// DataItem is one measurement: buckets (Average, Perc99, ...) of one metric
// of one workload.
type DataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels,omitempty"`
}

// ReadDataItems reads a data-items file.
func ReadDataItems(path string) (*DataItems, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var items DataItems
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &items, nil
}

// Workload is what one workload (test case × workload size) measured: the
// median over the runs of a `go test -count N` (scheduler_perf appends every
// run's items to one file).
type Workload struct {
	// Runs is the number of runs measured.
	Runs int
	// Throughput is the average of scheduler_perf's one-second samples of
	// pods scheduled per second; 0 when scheduling took too short to sample.
	Throughput float64
	// Duration is the seconds from the start of the measured pods'
	// creation until all were scheduled.
	Duration float64
	// PluginP99 is the p99 in milliseconds by "Plugin/ExtensionPoint", for
	// the extension points that ran at least once in a sampled cycle.
	PluginP99 map[string]float64
}

// Summary is every workload of a run by test case and workload name.
type Summary map[Key]*Workload

// Key names a workload: test case and workload name, as in
// BenchmarkPerfScheduling/<Case>/<Workload>.
type Key struct{ Case, Workload string }

// samples are one workload's values over its runs.
type samples struct {
	throughput, duration []float64
	pluginP99            map[string][]float64
}

// Summarize groups the data items by workload. An item's Name label is
// "BenchmarkPerfScheduling/<case>/<workload>/<collection>".
func Summarize(items *DataItems) Summary {
	all := map[Key]*samples{}
	for _, item := range items.DataItems {
		parts := strings.Split(item.Labels["Name"], "/")
		if len(parts) < 3 {
			continue
		}
		k := Key{Case: parts[1], Workload: parts[2]}
		w := all[k]
		if w == nil {
			w = &samples{pluginP99: map[string][]float64{}}
			all[k] = w
		}
		switch item.Labels["Metric"] {
		case metricThroughput:
			w.throughput = append(w.throughput, item.Data["Average"])
		case metricDuration:
			w.duration = append(w.duration, item.Data["Duration"])
		case metricPlugin:
			if slices.Contains(Plugins, item.Labels["plugin"]) {
				p := item.Labels["plugin"] + "/" + item.Labels["extension_point"]
				w.pluginP99[p] = append(w.pluginP99[p], item.Data["Perc99"])
			}
		}
	}
	s := Summary{}
	for k, w := range all {
		out := &Workload{Runs: len(w.duration), Throughput: median(w.throughput), Duration: median(w.duration), PluginP99: map[string]float64{}}
		for p, v := range w.pluginP99 {
			out.PluginP99[p] = median(v)
		}
		s[k] = out
	}
	return s
}

// median is the middle value (the mean of the middle two), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// WorkloadNames lists the workload names of the run (5000Nodes_10000Pods,
// or the short one), sorted.
func (s Summary) WorkloadNames() []string {
	var names []string
	for k := range s {
		if !slices.Contains(names, k.Workload) {
			names = append(names, k.Workload)
		}
	}
	slices.Sort(names)
	return names
}

// Print writes the RESULT lines of every workload size in the run: the
// SchedulingBasic pair, the placement pair and the p99 of each ferry plugin
// in each ferry workload, medians over the runs. A value that was not
// measured prints as n/a.
func (s Summary) Print(w io.Writer) {
	for _, name := range s.WorkloadNames() {
		basicDefault, basicFerry := s[Key{CaseBasicDefault, name}], s[Key{CaseBasicFerry, name}]
		fmt.Fprintf(w, "RESULT scheduler workload=%s runs=%d basic_default=%s pods/s basic_ferry=%s pods/s ratio=%s\n",
			name, s.runs(name), throughput(basicDefault), throughput(basicFerry), ratio(basicFerry, basicDefault, TargetBasicRatio))
		placement, affinity := s[Key{CasePlacement, name}], s[Key{CaseNodeAffinity, name}]
		fmt.Fprintf(w, "RESULT scheduler workload=%s runs=%d placement_nodeaffinity=%s pods/s placement_ferry=%s pods/s ratio=%s\n",
			name, s.runs(name), throughput(affinity), throughput(placement), ratio(placement, affinity, TargetPlacementRatio))
		localFirst, localFirstAffinity := s[Key{CaseLocalFirst, name}], s[Key{CaseLocalFirstAffinity, name}]
		fmt.Fprintf(w, "RESULT scheduler workload=%s runs=%d localfirst_nodeaffinity=%s pods/s localfirst_ferry=%s pods/s ratio=%s\n",
			name, s.runs(name), throughput(localFirstAffinity), throughput(localFirst), ratio(localFirst, localFirstAffinity, TargetPlacementRatio))
		for _, c := range []string{CaseBasicFerry, CasePlacement, CaseLocalFirst} {
			if wl := s[Key{c, name}]; wl != nil {
				fmt.Fprintf(w, "RESULT scheduler workload=%s plugin_p99 case=%s %s\n", name, c, wl.pluginP99())
			}
		}
	}
}

// runs is the fewest runs of any workload called name.
func (s Summary) runs(name string) int {
	least := 0
	for k, w := range s {
		if k.Workload == name && (least == 0 || w.Runs < least) {
			least = w.Runs
		}
	}
	return least
}

func throughput(w *Workload) string {
	if w == nil || w.Throughput == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", w.Throughput)
}

// ratio is num/den with its verdict against target.
func ratio(num, den *Workload, target float64) string {
	if num == nil || den == nil || num.Throughput == 0 || den.Throughput == 0 {
		return fmt.Sprintf("n/a (target ≥%.2f)", target)
	}
	r := num.Throughput / den.Throughput
	verdict := "met"
	if r < target {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%.2f (target ≥%.2f: %s)", r, target, verdict)
}

// pluginP99 lists the p99 of each ferry plugin's extension points in
// microseconds; extension points not run in any sampled cycle are left out.
func (w *Workload) pluginP99() string {
	var parts []string
	for _, p := range Plugins {
		for _, ep := range PluginExtensionPoints {
			if ms, ok := w.PluginP99[p+"/"+ep]; ok {
				parts = append(parts, fmt.Sprintf("%s/%s=%.1fus", p, ep, ms*1000))
			}
		}
	}
	if len(parts) == 0 {
		return "none-sampled"
	}
	return strings.Join(parts, " ")
}
