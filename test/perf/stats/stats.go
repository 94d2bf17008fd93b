// Package stats holds the arithmetic ferry's benchmarks report with.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p <= 100): the
// smallest value at least p% of the values are no greater than. It is 0 for
// no values.
func Percentile(values []time.Duration, p float64) time.Duration {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
