package peering

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// watchGrant watches, until ctx ends, the consumer's ResourceSlice on a
// provider, and wakes the ForeignCluster's reconcile on every change, so a
// new grant reaches the virtual node in about a second rather than at the
// next health check. One watch per provider; a broken watch (provider down)
// is re-opened with backoff, and the periodic reconcile covers the gap.
func watchGrant(ctx context.Context, cfg *rest.Config, tenant, consumer string, fc *ferryv1alpha1.ForeignCluster, wake chan<- event.GenericEvent) {
	logger := log.FromContext(ctx).WithValues("provider", fc.Spec.ClusterID)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		logger.Error(err, "Cannot watch the grant; following it at the health-check period")
		return
	}
	target := &ferryv1alpha1.ForeignCluster{}
	target.Name = fc.Name
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30}
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, &ferryv1alpha1.ResourceSliceList{}, client.InNamespace(tenant),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", consumer)})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff.Step()):
			}
			continue
		}
		backoff.Duration = time.Second
		for range w.ResultChan() {
			select {
			case wake <- event.GenericEvent{Object: target}:
			default: // the reconcile is already due
			}
		}
		w.Stop()
	}
}
