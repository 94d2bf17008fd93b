package storage

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMonitoringNamesStorageMetricsThatExist checks that every storage
// fabric metric the shipped dashboard and alerts query is one ferry
// exports, so a rename cannot leave a panel or an alert silently empty.
func TestMonitoringNamesStorageMetricsThatExist(t *testing.T) {
	exported := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	descs := make(chan *prometheus.Desc, 64)
	(&ClaimsCollector{}).Describe(descs)
	provisioningDuration.Describe(descs)
	provisioningFailures.Describe(descs)
	close(descs)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		exported[m[1]] = true
	}
	used := regexp.MustCompile(`\bferry_storage_[a-z_]+`)
	for _, file := range []string{"../manifests/monitoring/dashboard.json", "../manifests/monitoring/prometheusrule.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := used.FindAllString(string(b), -1)
		if len(names) == 0 {
			t.Errorf("%s queries no storage metric", file)
		}
		for _, n := range names {
			if strings.HasPrefix(n, "ferry_storage_move_") {
				continue // storage/move's, checked there
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !exported[n] && !exported[base] {
				t.Errorf("%s queries %s, which the storage fabric does not export (it exports %v)", file, n, exported)
			}
		}
	}
}
