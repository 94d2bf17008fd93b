package offload

import (
	"maps"
	"testing"
)

const metricsSample = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1000
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 998
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="ferry.io",resource="shadowpods",scope="resource",subresource="",verb="POST",version="v1alpha1"} 1e+03
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 7 1712345678000
apiserver_request_total_other{code="200",verb="GET"} 99
apiserver_request_duration_seconds_count{verb="GET"} 5
`

func TestParseRequestCountsSumsByVerbResourceAndFailureCode(t *testing.T) {
	got, err := parseRequestCounts(metricsSample)
	if err != nil {
		t.Fatal(err)
	}
	want := requestCounts{
		"POST pods":                  1000,
		"POST pods/binding":          1000,
		"PATCH pods/status":          998,
		"PATCH pods/status 409":      2,
		"POST shadowpods.ferry.io":   1000,
		"GET (non-resource)//readyz": 7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseRequestCounts =\n%v\nwant\n%v", got, want)
	}
	if got.total() != 4007 {
		t.Errorf("total = %d, want 4007", got.total())
	}
}

func TestParseRequestCountsReadsEscapedLabelValues(t *testing.T) {
	got, err := parseRequestCounts(`apiserver_request_total{code="200",resource="odd\"name\\x",verb="GET"} 3`)
	if err != nil {
		t.Fatal(err)
	}
	if got[`GET odd"name\x`] != 3 {
		t.Errorf("got %v", got)
	}
}

func TestParseRequestCountsRefusesMalformedText(t *testing.T) {
	for name, text := range map[string]string{
		"no series":           "# nothing here\nother_metric 1\n",
		"unterminated value":  `apiserver_request_total{verb="GET} 1`,
		"no value":            `apiserver_request_total{verb="GET"}`,
		"bad value":           `apiserver_request_total{verb="GET"} many`,
		"label without value": `apiserver_request_total{verb} 1`,
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := parseRequestCounts(text); err == nil {
				t.Errorf("no error, got %v", got)
			}
		})
	}
}

func TestRequestCountsMinusAndTop(t *testing.T) {
	before := requestCounts{"GET pods": 10, "POST pods": 5, "PUT leases.coordination.k8s.io": 3}
	after := requestCounts{"GET pods": 12, "POST pods": 105, "PUT leases.coordination.k8s.io": 3, "POST shadowpods.ferry.io": 100}
	d := after.minus(before)
	want := requestCounts{"GET pods": 2, "POST pods": 100, "POST shadowpods.ferry.io": 100}
	if !maps.Equal(d, want) {
		t.Errorf("minus = %v, want %v", d, want)
	}
	if got, want := d.top(2), "POST pods 100, POST shadowpods.ferry.io 100"; got != want {
		t.Errorf("top(2) = %q, want %q", got, want)
	}
}

func TestSumWatchesCountsOnlyOpenWatches(t *testing.T) {
	text := `# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_longrunning_requests{component="apiserver",group="ferry.io",resource="shadowpods",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 3
apiserver_request_total{code="200",verb="WATCH"} 100
`
	all, inNamespace, err := sumWatches(text)
	if err != nil || all != 9 || inNamespace != 7 {
		t.Errorf("sumWatches = %v, %v, %v; want 9 and 7 in a namespace", all, inNamespace, err)
	}
	if _, _, err := sumWatches(`apiserver_longrunning_requests{verb="WATCH"} many`); err == nil {
		t.Error("a malformed value was accepted")
	}
}
