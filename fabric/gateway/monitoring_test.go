package gateway

import (
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMonitoringNamesGatewayMetricsThatExist checks that every gateway
// metric the shipped dashboard and alerts query is one the gateway
// exports, so a rename cannot leave a panel or an alert silently empty.
func TestMonitoringNamesGatewayMetricsThatExist(t *testing.T) {
	exported := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	descs := make(chan *prometheus.Desc, 64)
	newCollector(&Reconciler{}).Describe(descs)
	activeGauge.Describe(descs)
	close(descs)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		exported[m[1]] = true
	}
	used := regexp.MustCompile(`\bferry_gateway_[a-z_]+`)
	for _, file := range []string{"../../manifests/monitoring/dashboard.json", "../../manifests/monitoring/prometheusrule.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := used.FindAllString(string(b), -1)
		if len(names) == 0 {
			t.Errorf("%s queries no gateway metric", file)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s queries %s, which the gateway does not export (it exports %v)", file, n, exported)
			}
		}
	}
}
