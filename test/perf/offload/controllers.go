package offload

import (
	"fmt"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// controllerWork is what one of ferry's in-process controllers did during the
// benchmark: a queue wait much longer than a reconcile says the controller
// is the bottleneck.
type controllerWork struct {
	name                    string
	reconciles              uint64
	meanReconcile, meanWait float64 // seconds
}

// controllersWork reads controller-runtime's metrics of the in-process
// controller managers (both clusters' share one registry; controllers are
// told apart by name).
func controllersWork() ([]controllerWork, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("read controller metrics: %w", err)
	}
	work := map[string]*controllerWork{}
	get := func(m *dto.Metric) *controllerWork {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" {
				w := work[l.GetValue()]
				if w == nil {
					w = &controllerWork{name: l.GetValue()}
					work[l.GetValue()] = w
				}
				return w
			}
		}
		return nil
	}
	mean := func(h *dto.Histogram) float64 {
		if h.GetSampleCount() == 0 {
			return 0
		}
		return h.GetSampleSum() / float64(h.GetSampleCount())
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "controller_runtime_reconcile_time_seconds":
				if w := get(m); w != nil {
					w.reconciles, w.meanReconcile = m.GetHistogram().GetSampleCount(), mean(m.GetHistogram())
				}
			case "workqueue_queue_duration_seconds":
				if w := get(m); w != nil {
					w.meanWait = mean(m.GetHistogram())
				}
			}
		}
	}
	var out []controllerWork
	for _, w := range work {
		if w.reconciles > 0 {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b controllerWork) int { return int(b.reconciles) - int(a.reconciles) })
	return out, nil
}

// reconciles is how many times the named controller reconciled.
func reconciles(work []controllerWork, name string) uint64 {
	for _, w := range work {
		if w.name == name {
			return w.reconciles
		}
	}
	return 0
}
