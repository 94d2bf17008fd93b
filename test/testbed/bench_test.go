package testbed

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkClusterStart measures, in one run, the start-up time and memory of
// a bare cluster (etcd + kube-apiserver, the baseline) and of two full
// clusters (plus controller-manager, scheduler and kwok with 3 nodes each)
// started together, and prints a RESULT line (`make bench-testbed`).
func BenchmarkClusterStart(b *testing.B) {
	RequireBinaries(b)
	full := Options{ControllerManager: true, Scheduler: true, Nodes: []NodePool{{Name: "n", Count: 3}}}
	var bare, two []time.Duration
	var bareRSS, fullRSS []int64
	for b.Loop() {
		start := time.Now()
		c, err := Start(b.Context(), Options{Name: "bench-bare"})
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(start))
		bareRSS = append(bareRSS, totalRSS(b, c))
		_ = c.Stop()

		a, z := full, full
		a.Name, z.Name = "bench-a", "bench-b"
		start = time.Now()
		cs, err := StartClusters(b.Context(), a, z)
		if err != nil {
			b.Fatal(err)
		}
		two = append(two, time.Since(start))
		for _, c := range cs {
			fullRSS = append(fullRSS, totalRSS(b, c))
			_ = c.Stop()
		}
	}
	bareMed, twoMed := median(bare), median(two)
	b.ReportMetric(bareMed.Seconds(), "s/bare-cluster")
	b.ReportMetric(twoMed.Seconds(), "s/two-full-clusters")
	fmt.Printf("RESULT runs=%d bare_cluster_start_s=%.2f two_full_clusters_start_s=%.2f two_full_vs_bare_ratio=%.2f bare_cluster_rss_mib=%d full_cluster_rss_mib=%d\n",
		len(bare), bareMed.Seconds(), twoMed.Seconds(), twoMed.Seconds()/bareMed.Seconds(), median(bareRSS)>>20, median(fullRSS)>>20)
}

func totalRSS(b *testing.B, c *Cluster) int64 {
	rss, err := c.MemoryRSS()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, v := range rss {
		total += v
	}
	return total
}

func median[T time.Duration | int64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
