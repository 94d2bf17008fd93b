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
		"RESULT scheduler workload=5000Nodes_10000Pods basic_default=200.0 pods/s basic_ferry=180.0 pods/s ratio=0.90 (target ≥0.95: MISSED)",
		"RESULT scheduler workload=5000Nodes_10000Pods placement_nodeaffinity=100.0 pods/s placement_ferry=150.0 pods/s ratio=1.50 (target ≥0.90: met)",
		"RESULT scheduler workload=5000Nodes_10000Pods plugin_p99 case=SchedulingBasicFerryProfile ClusterSelector/PreFilter=9.9us",
		"RESULT scheduler workload=5000Nodes_10000Pods plugin_p99 case=FerryPlacement ClusterSelector/Filter=20.0us DataGravity/Score=50.0us",
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
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
