package move

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Metrics of moves.
var (
	moved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ferry_storage_move_bytes_total", Help: "Bytes of volume data moved between clusters and verified (counted when the claim is re-pointed).",
	})
	duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ferry_storage_move_duration_seconds", Help: "Time from a VolumeMove's start to its claim re-pointed at the verified copy.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	})
	failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_storage_move_failures_total", Help: "VolumeMoves refused or failed, by reason (the Ready condition's).",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(moved, duration, failures)
}

// Setup adds the VolumeMove controller to mgr.
func Setup(mgr ctrl.Manager, clusters Clusters, opts Options) error {
	if opts.Image == "" {
		return fmt.Errorf("--volume-mover-image: must not be empty")
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("volume moves: build clientset: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Kube: kube, Clusters: clusters, Recorder: mgr.GetEventRecorder("ferry-volume-move"), Options: opts}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ferry-volume-moves").
		For(&ferryv1alpha1.VolumeMove{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}
