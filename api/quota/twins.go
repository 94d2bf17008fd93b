package quota

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ConsumerIndex indexes PeeringQuotas by spec.consumerClusterID.
const ConsumerIndex = "spec.consumerClusterID"

// IsTwinNamespaceOf says whether ns is a twin namespace made for consumer:
// it carries the consumer's ClusterID and the consumer namespace it stands
// for as origin labels (a tenant namespace carries only the first).
func IsTwinNamespaceOf(ns client.Object, consumer ferryv1alpha1.ClusterID) bool {
	l := ns.GetLabels()
	_, twin := l[ferryv1alpha1.LabelOriginNamespace]
	return twin && consumer != "" && l[ferryv1alpha1.LabelOriginCluster] == string(consumer)
}

// ConsumerOfTwin is the consumer a twin namespace was made for, or "".
func ConsumerOfTwin(ns client.Object) ferryv1alpha1.ClusterID {
	id := ferryv1alpha1.ClusterID(ns.GetLabels()[ferryv1alpha1.LabelOriginCluster])
	if !IsTwinNamespaceOf(ns, id) {
		return ""
	}
	return id
}

// IndexConsumer registers ConsumerIndex with the manager's cache.
func IndexConsumer(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &ferryv1alpha1.PeeringQuota{}, ConsumerIndex, func(o client.Object) []string {
		return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
	})
}
