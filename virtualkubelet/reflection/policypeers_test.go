package reflection

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestPolicyPeerPodsKeepOnlyPeerFields: the informer of the cluster's pods
// the NetworkPolicy reflection watches holds each pod without its
// containers, volumes, annotations, managed fields or conditions, and what
// it keeps makes the same peer as the whole pod.
func TestPolicyPeerPodsKeepOnlyPeerFields(t *testing.T) {
	full := peerPod("client", "worker-1", "10.0.1.5", map[string]string{"access": "true"})
	full.UID = "u-1"
	full.Annotations = map[string]string{"note": "big"}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	full.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx", Command: []string{"sleep", "3600"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	full.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	full.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}

	f := informers.NewSharedInformerFactory(fake.NewClientset(full.DeepCopy()), 0)
	inf := policyPeerPods(f)
	defer f.Shutdown() // after cancel, which stops the informer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	o, ok, err := inf.GetStore().GetByKey("shop/client")
	if err != nil || !ok {
		t.Fatalf("pod not in the informer: %v", err)
	}
	got := o.(*corev1.Pod)
	if len(got.Spec.Containers) != 0 || len(got.Spec.Volumes) != 0 || got.Annotations != nil ||
		got.ManagedFields != nil || got.Status.Conditions != nil {
		t.Errorf("informer keeps more than a peer needs: %+v", got)
	}
	if got.Labels["access"] != "true" || got.Spec.NodeName != "worker-1" || got.UID != "u-1" ||
		len(got.Status.PodIPs) != 1 || got.Status.Phase != corev1.PodRunning {
		t.Errorf("informer lost what a peer needs: %+v", got)
	}
	if !policyPeerPod(got) || podChangesPolicies(full, got) {
		t.Error("the trimmed pod is not the same policy peer as the whole one")
	}
}
