package stats

import (
	"slices"
	"testing"
)

func TestTotalAndKeysByValue(t *testing.T) {
	m := map[string]int64{"b": 3, "a": 3, "c": 7, "d": 1}
	if got := Total(m); got != 14 {
		t.Errorf("Total = %d, want 14", got)
	}
	if got, want := KeysByValue(m), []string{"c", "a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("KeysByValue = %v, want %v (largest first, ties by key)", got, want)
	}
	if got := Total(map[string]float64{}); got != 0 {
		t.Errorf("Total of nothing = %v", got)
	}
}
