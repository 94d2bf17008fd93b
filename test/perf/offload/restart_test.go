package offload

import (
	"strings"
	"testing"
	"time"
)

func TestCompareUIDs(t *testing.T) {
	before := uidSet{"a/p1": "u1", "a/p2": "u2", "a/p3": "u3", "b/p4": "u4"}
	after := uidSet{"a/p1": "u1", "a/p2": "u2-new", "b/p4": "u4", "b/p5": "u5"} // p3 lost, p2 recreated, p5 new
	recreated, lost := compareUIDs(before, after)
	if recreated != 1 || lost != 1 {
		t.Errorf("compareUIDs = %d recreated, %d lost; want 1 and 1", recreated, lost)
	}
	if r, l := compareUIDs(before, before); r != 0 || l != 0 {
		t.Errorf("compareUIDs of a set with itself = %d, %d; want 0, 0", r, l)
	}
	if r, l := compareUIDs(before, uidSet{}); r != 0 || l != len(before) {
		t.Errorf("compareUIDs with nothing after = %d, %d; want 0, %d", r, l, len(before))
	}
}

func TestListAndWatch(t *testing.T) {
	counts := requestCounts{"LIST pods": 3, "LIST shadowpods.ferry.io": 2, "WATCH pods": 4, "GET pods": 100, "PATCH pods/status": 7, "LIST pods 500": 1}
	list, watch := listAndWatch(counts)
	if list != 6 || watch != 4 {
		t.Errorf("listAndWatch = %d LIST, %d WATCH; want 6 and 4", list, watch)
	}
}

func TestRestartResult(t *testing.T) {
	f := restartFigures{what: "controller-manager", pods: 1000, leaseWait: 15200 * time.Millisecond, converge: 7340 * time.Millisecond, probe: 2 * time.Second,
		list: 12, watch: 30, recreated: uidChanges{remote: 2}, lost: uidChanges{shadow: 1}, rssPeak: 40 << 20, cmRSSPeak: 80 << 20, cmExits: 1, load: "3.10"}
	got := f.result()
	for _, want := range []string{"RESULT restart what=controller-manager pods=1000 converge_s=7.3 probe_s=2.0 lease_wait_s=15.2 requests_list=12 requests_watch=30 recreated=2 lost=1 rss_peak_mib=40 ",
		" recreated_remote=2 ", " lost_shadowpods=1 ", " cm_rss_peak_mib=80 ", " cm_exits=1 ", " load=3.10"} {
		if !strings.Contains(got, want) {
			t.Errorf("result() = %q, want it to contain %q", got, want)
		}
	}
}
