// Package stats holds the arithmetic ferry's benchmarks report with.
package stats

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
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

// Total sums the values of m.
func Total[V int64 | float64](m map[string]V) V {
	var sum V
	for _, v := range m {
		sum += v
	}
	return sum
}

// KeysByValue are the keys of m, the largest value first, ties by key.
func KeysByValue[V int64 | float64](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
}
