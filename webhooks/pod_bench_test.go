package webhooks

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// cachedReader returns a copy of one NamespaceOffloading, as the manager's
// cache does, without the fake client's serialisation.
type cachedReader struct {
	client.Reader
	nso *ferryv1alpha1.NamespaceOffloading
}

func (r cachedReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.nso.DeepCopyInto(obj.(*ferryv1alpha1.NamespaceOffloading))
	return nil
}

// BenchmarkPodMutatorHandle is the pod webhook's handler on a pod as the API
// server sends it (defaulted: a token volume, default tolerations).
func BenchmarkPodMutatorHandle(b *testing.B) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-0", Namespace: "shop", Labels: map[string]string{"app": "bench"},
			Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1", ImagePullPolicy: corev1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
			ServiceAccountName: "default", TerminationGracePeriodSeconds: ptr.To[int64](30), EnableServiceLinks: ptr.To(true),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}}}}}}},
		},
	}
	m := &PodMutator{Reader: cachedReader{nso: nsoIn("shop", ferryv1alpha1.PodOffloadingRemote)}}
	req := admissionRequest(admissionv1.Create, "shop", pod, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := m.Handle(ctx, req); !resp.Allowed || len(resp.Patches) == 0 {
			b.Fatalf("Handle = %+v", resp.Result)
		}
	}
}
