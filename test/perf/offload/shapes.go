package offload

import (
	"fmt"
	"strings"
	"time"
)

// Shape is how a run's pods arrive.
type Shape struct {
	// Name is burst, rate or paced.
	Name string
	// Pods created in each of the shape's two runs, direct and offloaded.
	Pods int
	// Concurrency is the create calls in flight at most.
	Concurrency int
	// Rate, when above zero, is pods created per second; zero creates them
	// as fast as Concurrency allows.
	Rate float64
}

// The load shapes of the default run: a burst (ferry's throughput), a
// steady rate (what a busy cluster sees) and a slow pace, one pod at a
// time (pure latency, no queue anywhere).
const (
	ShapeBurst = "burst"
	ShapeRate  = "rate"
	ShapePaced = "paced"
)

// DefaultShapes are the shapes of `make bench-offload`, in the order they
// run: the burst first, so the virtual kubelet's memory peak is the one at
// its pods and not at every shape's.
func DefaultShapes(burstPods, concurrency int) []Shape {
	return []Shape{
		{Name: ShapeBurst, Pods: burstPods, Concurrency: concurrency},
		{Name: ShapeRate, Pods: 1000, Concurrency: concurrency, Rate: 100},
		{Name: ShapePaced, Pods: 100, Concurrency: 1, Rate: 2},
	}
}

// SelectShapes keeps the shapes named in list (comma-separated), in their
// order in all.
func SelectShapes(all []Shape, list string) ([]Shape, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			want[name] = true
		}
	}
	var out []Shape
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
			delete(want, s.Name)
		}
	}
	for name := range want {
		return nil, fmt.Errorf("-shapes %q: unknown shape %q (known: %s, %s, %s)", list, name, ShapeBurst, ShapeRate, ShapePaced)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-shapes %q: names no shape", list)
	}
	return out, nil
}

func (s Shape) validate() error {
	switch {
	case s.Pods < 1:
		return fmt.Errorf("shape %s: %d pods: must be at least 1", s.Name, s.Pods)
	case s.Concurrency < 1:
		return fmt.Errorf("shape %s: concurrency %d: must be at least 1", s.Name, s.Concurrency)
	case s.Rate < 0:
		return fmt.Errorf("shape %s: rate %g: must not be negative", s.Name, s.Rate)
	}
	return nil
}

func (s Shape) String() string {
	if s.Rate > 0 {
		return fmt.Sprintf("%s: %d pods at %g pods/s, %d create calls at most in flight", s.Name, s.Pods, s.Rate, s.Concurrency)
	}
	return fmt.Sprintf("%s: %d pods, %d create calls in flight", s.Name, s.Pods, s.Concurrency)
}

// startOf is when the i-th pod of a run that began at begin is due: at once
// without a rate, else i/rate seconds in.
func (s Shape) startOf(begin time.Time, i int) time.Time {
	if s.Rate <= 0 {
		return begin
	}
	return begin.Add(time.Duration(float64(i) / s.Rate * float64(time.Second)))
}
