package webhooks

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// +kubebuilder:rbac:groups=ferry.io,resources=resourceslices,verbs=get;list;watch

// checkNodeConstraints holds a consumer's pod to the nodes it was granted:
// this cluster's scheduler places it (no spec.nodeName, no node affinity),
// and its only node constraint is the nodeSelector <key>=<value> of a pool
// of nodes granted to the consumer (a ResourceSlice with spec.nodePools, in
// one of the consumer's tenant namespaces, whose status.pools has the
// value). It returns the errors, each naming its field.
func checkNodeConstraints(ctx context.Context, r client.Reader, consumer ferryv1alpha1.ClusterID, spec *corev1.PodSpec) (field.ErrorList, error) {
	path := field.NewPath("spec", "template", "spec")
	var errs field.ErrorList
	if spec.NodeName != "" {
		errs = append(errs, field.Forbidden(path.Child("nodeName"), "a consumer's pod is placed by this cluster's scheduler"))
	}
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
		errs = append(errs, field.Forbidden(path.Child("affinity", "nodeAffinity"), "a consumer's pod may select a granted node pool with spec.nodeSelector only"))
	}
	if len(spec.NodeSelector) == 0 {
		return errs, nil
	}
	pools, err := grantedPools(ctx, r, consumer)
	if err != nil {
		return nil, err
	}
	selPath := path.Child("nodeSelector")
	if len(spec.NodeSelector) > 1 {
		return append(errs, field.Invalid(selPath, spec.NodeSelector, "a consumer's pod may select one granted node pool, <labelKey>=<value>, and nothing else")), nil
	}
	for key, value := range spec.NodeSelector {
		if !slices.Contains(pools[key], value) {
			errs = append(errs, field.Invalid(selPath.Key(key), value, fmt.Sprintf("consumer %s was granted no node pool %s=%s here", consumer, key, value)))
		}
	}
	return errs, nil
}

// grantedPools are the pools granted to consumer, as values by label key,
// from the ResourceSlices in its tenant namespaces (namespaces labelled with
// it as origin, not twin namespaces).
func grantedPools(ctx context.Context, r client.Reader, consumer ferryv1alpha1.ClusterID) (map[string][]string, error) {
	var slices ferryv1alpha1.ResourceSliceList
	if err := r.List(ctx, &slices); err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	pools := map[string][]string{}
	for i := range slices.Items {
		s := &slices.Items[i]
		if s.Spec.ConsumerClusterID != consumer || s.Spec.NodePools == nil {
			continue
		}
		var ns corev1.Namespace
		if err := r.Get(ctx, client.ObjectKey{Name: s.Namespace}, &ns); err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", s.Namespace, err)
		}
		if _, twin := ns.Labels[ferryv1alpha1.LabelOriginNamespace]; twin || ns.Labels[ferryv1alpha1.LabelOriginCluster] != string(consumer) {
			continue // not the consumer's tenant namespace
		}
		for _, p := range s.Status.Pools {
			pools[s.Spec.NodePools.LabelKey] = append(pools[s.Spec.NodePools.LabelKey], p.Value)
		}
	}
	return pools, nil
}
