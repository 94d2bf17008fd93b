package offload

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseScaleResults(t *testing.T) {
	out := `[  1.0s] starting clusters
RESULT shape=burst pods=1000 p99_ratio=1.5
RESULT scale pods=10000 providers=10 namespaces=100 cluster_read=true time_ratio=1.42 vk_rss_mib=88
RESULT scale pods=1000 providers=1 namespaces=10 vk_rss_mib=61.5
`
	points, err := parseScaleResults(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 {
		t.Fatalf("got %d points, want 2: %v", len(points), points)
	}
	p := points[0]
	if p["pods"] != 10000 || p["providers"] != 10 || p["time_ratio"] != 1.42 || p["pods_per_provider"] != 1000 {
		t.Errorf("first point %v", p)
	}
	if _, ok := p["cluster_read"]; ok {
		t.Errorf("cluster_read=true is no number, yet it was read: %v", p)
	}
	if points[1]["vk_rss_mib"] != 61.5 {
		t.Errorf("second point %v", points[1])
	}
	for _, bad := range []string{"RESULT scale pods=1 providers=1", "RESULT scale pods=1 providers=1 namespaces=1 junk"} {
		if _, err := parseScaleResults(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestFitScale(t *testing.T) {
	// rss = 30 + 0.02/pod + 0.5/namespace, at the curve's sizes.
	var points []scalePoint
	for _, s := range [][3]int{{1, 1000, 10}, {1, 3000, 30}, {1, 10000, 50}, {3, 3000, 100}, {10, 10000, 100}} {
		p := newScalePoint(s[0], s[1], s[2])
		p["rss"] = 30 + 0.02*p["pods"] + 0.5*p["namespaces"]
		points = append(points, p)
	}
	f, err := fitScale(points, "rss", []string{"pods", "providers", "namespaces"})
	if err != nil {
		t.Fatal(err)
	}
	if !near(f.Intercept, 30) || !near(f.Slopes["pods"], 0.02) || !near(f.Slopes["namespaces"], 0.5) || math.Abs(f.Slopes["providers"]) > 1e-6 {
		t.Errorf("fit %v, want 30 + 0.02/pod + 0.5/namespace", f)
	}
	if !near(f.R2, 1) || f.Points != 5 || len(f.LeftOut) != 0 {
		t.Errorf("fit %v: r² %g, %d points, left out %v", f, f.R2, f.Points, f.LeftOut)
	}
	if got := f.At(newScalePoint(100, 100000, 1000)); !near(got, 30+2000+500) {
		t.Errorf("at 100×100000/1000: %g, want 2530", got)
	}
}

func TestFitScaleLeavesOut(t *testing.T) {
	// namespaces = pods/100 and providers constant: only pods can be told.
	var points []scalePoint
	for _, pods := range []int{1000, 3000, 10000} {
		p := newScalePoint(1, pods, pods/100)
		p["w"] = 100 + 0.001*p["pods"]
		points = append(points, p)
	}
	f, err := fitScale(points, "w", []string{"pods", "providers", "namespaces"})
	if err != nil {
		t.Fatal(err)
	}
	if f.LeftOut["providers"] != "constant" || !strings.Contains(f.LeftOut["namespaces"], "not independent") {
		t.Errorf("left out %v, want providers constant and namespaces dependent", f.LeftOut)
	}
	if !near(f.Intercept, 100) || !near(f.Slopes["pods"], 0.001) {
		t.Errorf("fit %v, want 100 + 0.001/pod", f)
	}
	// Two points, two dimensions varying: one is left out for want of points.
	f, err = fitScale(points[:2], "w", []string{"namespaces", "pods"})
	if err != nil {
		t.Fatal(err)
	}
	if f.LeftOut["pods"] != "too few points" || len(f.Kept) != 1 || f.Kept[0] != "namespaces" {
		t.Errorf("kept %v, left out %v; want namespaces kept, pods for want of points", f.Kept, f.LeftOut)
	}
	if _, err := fitScale(points, "missing", []string{"pods"}); !errors.Is(err, errTooFewPoints) {
		t.Errorf("figure no point has: %v, want errTooFewPoints", err)
	}
	// One point: the mean only.
	f, err = fitScale(points[:1], "w", []string{"pods"})
	if err != nil || !near(f.Intercept, points[0]["w"]) || len(f.Kept) != 0 {
		t.Errorf("one point: %v, %v", f, err)
	}
}

func TestParseScaleSize(t *testing.T) {
	for in, want := range map[string][3]int{"10x10000/100": {10, 10000, 100}, "1x1000": {1, 1000, 7}, " 3x3000/30 ": {3, 3000, 30}} {
		p, pods, ns, err := parseScaleSize(in, 7)
		if err != nil || [3]int{p, pods, ns} != want {
			t.Errorf("%q: %d %d %d %v, want %v", in, p, pods, ns, err, want)
		}
	}
	for _, bad := range []string{"10", "0x100", "2x0", "2x10/0", "ax1", "1xb"} {
		if _, _, _, err := parseScaleSize(bad, 1); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPrintScaleFits(t *testing.T) {
	var points []scalePoint
	for _, s := range [][3]int{{1, 1000, 10}, {1, 3000, 30}, {1, 3000, 100}, {3, 3000, 30}} {
		p := newScalePoint(s[0], s[1], s[2])
		p["vk_rss_mib"] = 20 + 0.04*p["pods_per_provider"]
		points = append(points, p)
	}
	var out strings.Builder
	printScaleFits(&out, points, newScalePoint(100, 100000, 1000))
	got := out.String()
	want := "fit vk_rss_mib = 20 +0.04 per pod of its provider"
	if !strings.Contains(got, want) || !strings.Contains(got, "at 100 providers × 100000 pods over 1000 namespaces: 60") {
		t.Errorf("output:\n%s\nwant a line with %q and the value 60 at 100×100000/1000", got, want)
	}
	t.Log(got)
	if strings.Contains(got, "time_ratio") {
		t.Errorf("a figure no point has was fitted:\n%s", got)
	}
}
