package move

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMonitoringNamesMoveMetricsThatExist checks that every volume move
// metric the shipped dashboard and alerts query is one ferry exports.
func TestMonitoringNamesMoveMetricsThatExist(t *testing.T) {
	exported := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	descs := make(chan *prometheus.Desc, 16)
	moved.Describe(descs)
	duration.Describe(descs)
	failures.Describe(descs)
	close(descs)
	for d := range descs {
		exported[fqName.FindStringSubmatch(d.String())[1]] = true
	}
	used := regexp.MustCompile(`\bferry_storage_move_[a-z_]+`)
	found := 0
	for _, file := range []string{"../../manifests/monitoring/dashboard.json", "../../manifests/monitoring/prometheusrule.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range used.FindAllString(string(b), -1) {
			found++
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !exported[n] && !exported[base] {
				t.Errorf("%s queries %s, which volume moves do not export (they export %v)", file, n, exported)
			}
		}
	}
	if found == 0 {
		t.Error("the dashboard queries no volume move metric")
	}
}
