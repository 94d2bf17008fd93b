// Package registry lists ferry's scheduler plugins for kube-scheduler's
// out-of-tree registry: the ferry-scheduler binary and the scheduler-perf
// benchmarks build the same set from it.
package registry

import (
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/ferry-io/ferry/plugins/clusterpreference"
	"github.com/ferry-io/ferry/plugins/clusterselector"
	"github.com/ferry-io/ferry/plugins/datagravity"
	"github.com/ferry-io/ferry/plugins/remotefit"
)

// Registry returns ferry's plugins by name.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		clusterselector.Name:   clusterselector.New,
		remotefit.Name:         remotefit.New,
		datagravity.Name:       datagravity.New,
		clusterpreference.Name: clusterpreference.New,
	}
}
