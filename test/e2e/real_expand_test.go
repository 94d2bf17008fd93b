package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// realExpandProviderClaim: a pod offloaded to the provider's real node,
// with a claim of the default class mounted; the claim grows from 64Mi to
// 128Mi while the pod runs. The provider's claim and volume, then the
// consumer's volume and claim, show 128Mi, no resize status or condition
// stays, and the same container (no restart, on either side) still writes
// to and reads from its mounted volume.
func realExpandProviderClaim(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "real-grow")
	twin := framework.OffloadNamespace(ctx, consumer, ns, realProviderID)
	vnode := virtualNodeName(ctx, consumer, realProviderID)
	// Named as a StatefulSet's would be (expectStatefulPodsOffloaded
	// looks for claim data-<pod> in the provider's pod).
	const podName, claimName = "grow", "data-grow"

	Expect(consumer.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}},
	})).To(Succeed())
	Expect(consumer.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "web", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args:           []string{"netexec", "--http-port=8080"},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: realUploadDir}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
		},
	})).To(Succeed())
	uids := expectStatefulPodsOffloaded(ctx, ns, twin, vnode, []string{podName}, nil)
	remotePod, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, podName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	before := realWrite(ctx, ns, podName, "written at 64Mi")

	By("growing the claim to 128Mi while its pod runs")
	start := time.Now()
	Expect(consumer.Client.Patch(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}`)))).To(Succeed())
	want := resource.MustParse("128Mi")
	Eventually(func(g Gomega) {
		for _, c := range []struct {
			cluster *testbed.Cluster
			ns      string
		}{{provider, twin}, {consumer, ns}} {
			pvc, err := c.cluster.Kube.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, claimName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Capacity).To(HaveKeyWithValue(corev1.ResourceStorage, want), "%s: claim %s/"+claimName, c.cluster.Name, c.ns)
			g.Expect(pvc.Status.Conditions).To(BeEmpty(), "%s: claim %s/"+claimName+" keeps a resize condition", c.cluster.Name, c.ns)
			g.Expect(pvc.Status.AllocatedResourceStatuses).To(BeEmpty(), "%s: claim %s/"+claimName, c.cluster.Name, c.ns)
			pv, err := c.cluster.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pv.Spec.Capacity).To(HaveKeyWithValue(corev1.ResourceStorage, want), "%s: volume %s", c.cluster.Name, pv.Name)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	GinkgoWriter.Printf("claim held in the provider grown 64Mi -> 128Mi on both sides in %s\n", time.Since(start).Round(100*time.Millisecond))

	By("the same container, never restarted, reads what it wrote before and writes after")
	var pod corev1.Pod
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, &pod)).To(Succeed())
	Expect(pod.UID).To(Equal(uids[podName]))
	Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	remote, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, podName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.UID).To(Equal(remotePod.UID), "the provider's pod was not replaced")
	Expect(remote.Status.ContainerStatuses).To(ConsistOf(And(HaveField("RestartCount", BeZero()), HaveField("Ready", true))))
	after := realWrite(ctx, ns, podName, "written at 128Mi")
	for file, content := range map[string]string{before: "written at 64Mi", after: "written at 128Mi"} {
		// An exec through the virtual kubelet has now and then come back
		// with no output and no error (not diagnosed yet): a few tries.
		Eventually(func(g Gomega) {
			out, err := consumer.Exec(ctx, ns, podName, "/agnhost", "mounttest", "--file_content="+file)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring(content))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	}
}

// realWrite writes content into a new file of the pod's mounted volume and
// returns its path in the container.
func realWrite(ctx context.Context, ns, pod, content string) string {
	GinkgoHelper()
	file := realUpload(ctx, ns, pod, content)
	Expect(file).To(HavePrefix(realUploadDir+"/"), fmt.Sprintf("upload to %s", pod))
	return file
}
