package scheduler

import (
	"bytes"
	"strings"
	"testing"
)

func item(name, metric string, data map[string]float64, labels ...string) DataItem {
	l := map[string]string{"Name": "BenchmarkPerfScheduling/" + name, "Metric": metric}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return DataItem{Data: data, Labels: l}
}

func TestPrintPairsWorkloadsAndReportsPluginP99(t *testing.T) {
	const w = "5000Nodes_10000Pods"
	items := &DataItems{DataItems: []DataItem{
		item(CaseBasicDefault+"/"+w+"/namespace-2", metricThroughput, map[string]float64{"Average": 200}),
		item(CaseBasicFerry+"/"+w+"/namespace-2", metricThroughput, map[string]float64{"Average": 180}),
		item(CaseBasicFerry+"/"+w+"/namespace-2", metricPlugin, map[string]float64{"Perc99": 0.0099},
			"plugin", "ClusterSelector", "extension_point", "PreFilter"),
		item(CasePlacement+"/"+w+"/placement", metricThroughput, map[string]float64{"Average": 150}),
		item(CasePlacement+"/"+w+"/placement", metricDuration, map[string]float64{"Duration": 66}),
		item(CasePlacement+"/"+w+"/placement", metricPlugin, map[string]float64{"Perc99": 0.05},
			"plugin", "DataGravity", "extension_point", "Score"),
		item(CasePlacement+"/"+w+"/placement", metricPlugin, map[string]float64{"Perc99": 0.02},
			"plugin", "ClusterSelector", "extension_point", "Filter"),
		// In-tree plugins are not ferry's: left out.
		item(CasePlacement+"/"+w+"/placement", metricPlugin, map[string]float64{"Perc99": 1},
			"plugin", "NodeAffinity", "extension_point", "Filter"),
		item(CaseNodeAffinity+"/"+w+"/placement", metricThroughput, map[string]float64{"Average": 100}),
		item(CaseLocalFirst+"/"+w+"/namespace-2", metricThroughput, map[string]float64{"Average": 120}),
		item(CaseLocalFirst+"/"+w+"/namespace-2", metricPlugin, map[string]float64{"Perc99": 0.003},
			"plugin", "ClusterPreference", "extension_point", "Score"),
		item(CaseLocalFirstAffinity+"/"+w+"/namespace-2", metricThroughput, map[string]float64{"Average": 125}),
		item(CaseLocalFirst+"/"+w+"/namespace-2", metricDuration, map[string]float64{"Duration": 80}),
		item(CaseLocalFirstAffinity+"/"+w+"/namespace-2", metricDuration, map[string]float64{"Duration": 77}),
		item(CaseBasicDefault+"/"+w+"/namespace-2", metricDuration, map[string]float64{"Duration": 50}),
		item(CaseBasicFerry+"/"+w+"/namespace-2", metricDuration, map[string]float64{"Duration": 55}),
		item(CaseNodeAffinity+"/"+w+"/placement", metricDuration, map[string]float64{"Duration": 99}),
		// Not a workload's item.
		{Labels: map[string]string{"Metric": metricThroughput}, Data: map[string]float64{"Average": 1}},
	}}
	s := Summarize(items)
	if got := s[Key{CasePlacement, w}].Duration; got != 66 {
		t.Errorf("duration %v, want 66", got)
	}
	var out bytes.Buffer
	s.Print(&out)
	want := strings.Join([]string{
		"RESULT scheduler workload=5000Nodes_10000Pods runs=1 basic_default=200.0 pods/s basic_ferry=180.0 pods/s ratio=0.90 (target ≥0.95: MISSED)",
		"RESULT scheduler workload=5000Nodes_10000Pods runs=1 placement_nodeaffinity=100.0 pods/s placement_ferry=150.0 pods/s ratio=1.50 (target ≥0.90: met)",
		"RESULT scheduler workload=5000Nodes_10000Pods runs=1 localfirst_nodeaffinity=125.0 pods/s localfirst_ferry=120.0 pods/s ratio=0.96 (target ≥0.90: met)",
		"RESULT scheduler workload=5000Nodes_10000Pods plugin_p99 case=SchedulingBasicFerryProfile ClusterSelector/PreFilter=9.9us",
		"RESULT scheduler workload=5000Nodes_10000Pods plugin_p99 case=FerryPlacement ClusterSelector/Filter=20.0us DataGravity/Score=50.0us",
		"RESULT scheduler workload=5000Nodes_10000Pods plugin_p99 case=LocalFirstPlacement ClusterPreference/Score=3.0us",
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestPrintSaysWhatWasNotMeasured(t *testing.T) {
	s := Summarize(&DataItems{DataItems: []DataItem{
		// Too short to sample: a throughput item without data.
		item(CaseBasicDefault+"/"+shortWorkload+"/namespace-2", "", nil),
		item(CaseBasicFerry+"/"+shortWorkload+"/namespace-2", metricThroughput, map[string]float64{"Average": 90}),
	}})
	var out bytes.Buffer
	s.Print(&out)
	for _, want := range []string{
		"basic_default=n/a pods/s basic_ferry=90.0 pods/s ratio=n/a (target ≥0.95)",
		"placement_nodeaffinity=n/a pods/s placement_ferry=n/a pods/s ratio=n/a (target ≥0.90)",
		"plugin_p99 case=SchedulingBasicFerryProfile none-sampled",
		"localfirst_nodeaffinity=n/a pods/s localfirst_ferry=n/a pods/s ratio=n/a (target ≥0.90)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// `go test -count 3` appends three runs' items to one file: each value is
// the median of its runs.
func TestSummarizeTakesTheMedianOfRepeatedRuns(t *testing.T) {
	var items DataItems
	for _, v := range []float64{150, 90, 200} {
		items.DataItems = append(items.DataItems,
			item(CaseBasicDefault+"/"+shortWorkload+"/namespace-2", metricThroughput, map[string]float64{"Average": v}),
			item(CaseBasicDefault+"/"+shortWorkload+"/namespace-2", metricDuration, map[string]float64{"Duration": 10000 / v}),
			item(CaseBasicDefault+"/"+shortWorkload+"/namespace-2", metricPlugin, map[string]float64{"Perc99": v / 1000},
				"plugin", "RemoteFit", "extension_point", "Filter"))
	}
	w := Summarize(&items)[Key{CaseBasicDefault, shortWorkload}]
	if w.Runs != 3 || w.Throughput != 150 || w.PluginP99["RemoteFit/Filter"] != 0.15 {
		t.Errorf("got %+v, want 3 runs, median throughput 150, median p99 0.15", w)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count: got %v, want 2.5", got)
	}
}
