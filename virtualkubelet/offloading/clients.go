package offloading

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// NewScheme holds the kinds the virtual kubelet reads and writes: the
// built-in ones and ferry's.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// RateLimited is a copy of cfg whose every client shares one token bucket
// of qps and burst: each client (and controller-runtime's client per kind)
// would otherwise get its own, and the limit would bound each kind rather
// than the cluster.
func RateLimited(cfg *rest.Config, qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return c
}
