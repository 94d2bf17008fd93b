package offloading

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// lostRemotePod tells whether the local pod's status came from a real pod
// (the provider held or ran it) that is gone while its ShadowPod stays, and
// the provider has no record of it yet: the provider's controller writes no
// ShadowPod status for a first pod, so if it was not running when the pod
// went, only this side knows there was one.
func lostRemotePod(local *corev1.Pod, shadow *ferryv1alpha1.ShadowPod) bool {
	if shadow == nil || shadow.DeletionTimestamp != nil || shadow.Status.PodName != "" || shadow.Annotations[ferryv1alpha1.AnnotationPodLost] != "" {
		return false
	}
	cond := offloadedCondition(local)
	return cond != nil && (cond.Reason == ReasonRunningRemotely || cond.Reason == ReasonPendingRemotely)
}

// recordLostPod marks the ShadowPod with AnnotationPodLost, so the
// provider counts the next pod as a recreation (the local pod's restart
// count). One patch, only when a real pod went from under its ShadowPod.
func (c *controller) recordLostPod(ctx context.Context, local *corev1.Pod, shadow *ferryv1alpha1.ShadowPod) error {
	patch := client.MergeFrom(shadow)
	updated := shadow.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[ferryv1alpha1.AnnotationPodLost] = "true"
	if err := c.remote.Patch(ctx, updated, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("annotate shadow pod %s/%s %s: %w", shadow.Namespace, shadow.Name, ferryv1alpha1.AnnotationPodLost, err)
	}
	klog.FromContext(ctx).V(1).Info("Recorded a real pod lost from under its shadow pod", "pod", klog.KObj(local), "shadowPod", klog.KObj(shadow))
	return nil
}
