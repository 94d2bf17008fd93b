package quota

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ferry-io/ferry/api/grant"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ShadowPodRequests is what the pod a ShadowPod stands for requests, as the
// scheduler and ResourceQuota count it (grant.PodRequests, one "pods" slot
// included). Quantities are added exactly (resource.Quantity), never
// through floats or Value().
func ShadowPodRequests(sp *ferryv1alpha1.ShadowPod) corev1.ResourceList {
	return grant.PodRequests(&corev1.Pod{Spec: sp.Spec.Template.Spec})
}

// Counts says whether a ShadowPod's requests count against its consumer's
// quota: terminal ones (Succeeded, Failed) and ones being deleted do not.
func Counts(sp *ferryv1alpha1.ShadowPod) bool {
	return sp.DeletionTimestamp == nil && sp.Status.Phase != corev1.PodSucceeded && sp.Status.Phase != corev1.PodFailed
}

// Usage sums the requests of the ShadowPods that count, for the resources
// limits names.
func Usage(shadowPods []ferryv1alpha1.ShadowPod, limits corev1.ResourceList) corev1.ResourceList {
	used := corev1.ResourceList{}
	for name := range limits {
		used[name] = resource.Quantity{Format: limits[name].Format}
	}
	for i := range shadowPods {
		if !Counts(&shadowPods[i]) {
			continue
		}
		for name, q := range ShadowPodRequests(&shadowPods[i]) {
			if u, limited := used[name]; limited {
				u.Add(q)
				used[name] = u
			}
		}
	}
	return used
}

// Exceeded lists, one message per resource and in name order, where adding
// requests to used goes over limits; empty when it fits. A resource limits
// does not name is not limited.
func Exceeded(limits, used, requests corev1.ResourceList) []string {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		name := corev1.ResourceName(n)
		req, asked := requests[name]
		if !asked || req.IsZero() {
			continue
		}
		total := used[name].DeepCopy()
		total.Add(req)
		if limit := limits[name]; total.Cmp(limit) > 0 {
			u := used[name]
			out = append(out, fmt.Sprintf("%s: requested %s, used %s, limited to %s", name, req.String(), u.String(), limit.String()))
		}
	}
	return out
}

// QuotaDenial is the message denying a ShadowPod that does not fit.
func QuotaDenial(consumer ferryv1alpha1.ClusterID, exceeded []string) string {
	return fmt.Sprintf("PeeringQuota of consumer %s exceeded: %s", consumer, strings.Join(exceeded, "; "))
}
