package offload

import (
	"strings"
	"testing"
)

func TestParseEtcdFigures(t *testing.T) {
	text := `# HELP etcd_debugging_mvcc_keys_total Total number of keys.
# TYPE etcd_debugging_mvcc_keys_total gauge
etcd_debugging_mvcc_keys_total 6709
etcd_debugging_mvcc_db_compaction_keys_total 0
etcd_mvcc_db_total_size_in_bytes 1.8857984e+07
etcd_mvcc_db_total_size_in_use_in_bytes 1.2e+07
`
	f, err := parseEtcdFigures(text)
	if err != nil {
		t.Fatal(err)
	}
	if f.keys != 6709 || f.bytesInUse != 1.2e7 {
		t.Errorf("got %+v, want 6709 keys, 1.2e7 bytes in use", f)
	}
	if _, err := parseEtcdFigures("etcd_debugging_mvcc_keys_total 1\n"); err == nil {
		t.Error("no size in use: no error")
	}
	if _, err := parseEtcdFigures("etcd_debugging_mvcc_keys_total x\netcd_mvcc_db_total_size_in_use_in_bytes 1\n"); err == nil {
		t.Error("malformed value: no error")
	}
}

func TestParseStorageObjects(t *testing.T) {
	text := `apiserver_storage_objects{resource="pods"} 10000
apiserver_storage_objects{resource="shadowpods.ferry.io"} 9000
apiserver_storage_objects{resource="events"} 3
apiserver_storage_size_bytes{storage_cluster_id="etcd-0"} 1e+07
`
	before := map[string]float64{"pods": 0, "shadowpods.ferry.io": 0, "events": 0}
	after, err := parseStorageObjects(text)
	if err != nil {
		t.Fatal(err)
	}
	if after["pods"] != 10000 || after["shadowpods.ferry.io"] != 9000 || len(after) != 3 {
		t.Errorf("got %v", after)
	}
	got := objectsAdded(before, after, 10000)
	if !strings.HasPrefix(got, "pods +10000 (1.00 per pod), shadowpods.ferry.io +9000 (0.90 per pod)") || strings.Contains(got, "events") {
		t.Errorf("objectsAdded: %q; want pods then shadowpods, events (3, below 1 per 20 pods) left out", got)
	}
	if got := objectsAdded(after, after, 10); got != "none" {
		t.Errorf("no change: %q", got)
	}
}
