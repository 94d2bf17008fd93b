package offload

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/test/testbed"
)

// claimWorkload makes a run's pods StatefulSets' pods, each with a claim of
// its own from the set's template.
type claimWorkload struct {
	replicas int
	// class and annotations of the claim template: the provider's default
	// class for the direct run; for the offloaded run, ferry's class and the
	// requested-class annotation, as ferry's PVC webhook writes them.
	class       *string
	annotations map[string]string
}

func directClaims(opts Options) *claimWorkload {
	if !opts.Claims {
		return nil
	}
	return &claimWorkload{replicas: opts.Replicas}
}

func offloadedClaims(opts Options) *claimWorkload {
	if !opts.Claims {
		return nil
	}
	class := ferryv1alpha1.StorageClassVirtual
	return &claimWorkload{replicas: opts.Replicas, class: &class,
		annotations: map[string]string{ferryv1alpha1.AnnotationRequestedStorageClass: ""}}
}

// statefulSet is one set of the workload: its pods run spec with the
// claim mounted, created all at once (Parallel).
func (w *claimWorkload) statefulSet(namespace, name string, spec corev1.PodSpec) *appsv1.StatefulSet {
	labels := map[string]string{"app": "bench", "set": name}
	replicas := int32(w.replicas)
	spec = *spec.DeepCopy()
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Annotations: w.annotations},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: w.class,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// createSets creates the run's StatefulSets, marking each of a set's pods
// created just before the set's create call.
func (r podRun) createSets(ctx context.Context, kube kubernetes.Interface, tl *timeline) error {
	return r.createEach(ctx, r.shape.Pods/r.claims.replicas, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s-%03d", r.name, i)
		now := time.Now()
		for p := range r.claims.replicas {
			tl.mark(fmt.Sprintf("%s-%d", name, p), created, now)
		}
		if _, err := kube.AppsV1().StatefulSets(r.namespace).Create(ctx, r.claims.statefulSet(r.namespace, name, r.spec), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create StatefulSet %s/%s in %s: %w", r.namespace, name, r.cluster.Name, err)
		}
		return nil
	})
}

// checkClaimsInProvider checks that every claim of the consumer's namespace
// is bound to a volume of the storage fabric in the provider, and that every
// provider claim standing for one is Bound there; it returns their number.
func checkClaimsInProvider(ctx context.Context, consumer, provider *testbed.Cluster, namespace, twin string) (int, error) {
	var pvcs corev1.PersistentVolumeClaimList
	if err := consumer.Client.List(ctx, &pvcs, client.InNamespace(namespace)); err != nil {
		return 0, fmt.Errorf("list claims of %s: %w", namespace, err)
	}
	for _, pvc := range pvcs.Items {
		if pvc.Status.Phase != corev1.ClaimBound {
			return 0, fmt.Errorf("claim %s/%s is %s, not Bound", namespace, pvc.Name, pvc.Status.Phase)
		}
		var pv corev1.PersistentVolume
		if err := consumer.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
			return 0, fmt.Errorf("volume of claim %s/%s: %w", namespace, pvc.Name, err)
		}
		if c := placement.VolumeCluster(&pv); c != providerID || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != storage.CSIDriver {
			return 0, fmt.Errorf("claim %s/%s: volume %s lives in %q, not in provider %s", namespace, pvc.Name, pv.Name, c, providerID)
		}
		var remote corev1.PersistentVolumeClaim
		if err := provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: pvc.Name}, &remote); err != nil {
			return 0, fmt.Errorf("provider claim %s/%s: %w", twin, pvc.Name, err)
		}
		if remote.Status.Phase != corev1.ClaimBound || remote.Labels[ferryv1alpha1.LabelOriginUID] != string(pvc.UID) {
			return 0, fmt.Errorf("provider claim %s/%s is %s (origin %q), want Bound for claim %s", twin, pvc.Name, remote.Status.Phase, remote.Labels[ferryv1alpha1.LabelOriginUID], pvc.UID)
		}
	}
	return len(pvcs.Items), nil
}
