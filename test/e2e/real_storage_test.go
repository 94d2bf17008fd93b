package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// realUploadDir is where agnhost netexec's /upload writes (it has no
// shell; this is how a pod of it writes a file of our choosing).
const realUploadDir = "/uploads"

// realStatefulDataSurvives: a StatefulSet of two replicas in a namespace
// offloaded with strategy Remote, each with a claim of the default class
// from its volumeClaimTemplate. ferry's webhook moves the claims to the
// virtual class; each is provisioned in the provider by its own default
// class, a directory on the provider's real node that its kubelet mounts
// into the container. Each pod writes a file naming itself; deleting the
// pods, and scaling to 0 and back, brings each back to the provider with
// its claim, where it reads its own file.
func realStatefulDataSurvives(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "real-sto")
	twin := framework.OffloadNamespace(ctx, consumer, ns, realProviderID)
	vnode := virtualNodeName(ctx, consumer, realProviderID)

	labels := map[string]string{"app": "web"}
	Expect(consumer.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Port: 8080}}},
	})).To(Succeed())
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](2),
			ServiceName:         "web",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
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
				},
			},
			// No class: the cluster's default.
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
	start := time.Now()
	Expect(consumer.Client.Create(ctx, sts)).To(Succeed())
	names := []string{"web-0", "web-1"}
	first := expectStatefulPodsOffloaded(ctx, ns, twin, vnode, names, nil)
	GinkgoWriter.Printf("2 StatefulSet pods with claims Ready on the provider %s after create\n", time.Since(start).Round(100*time.Millisecond))

	By("each claim: moved to the virtual class, its data in the provider, on a volume of the provider's real node")
	claimUIDs := map[string]types.UID{}
	volumeDirs := map[string]string{}
	for _, pod := range names {
		claimName := "data-" + pod
		var pvc corev1.PersistentVolumeClaim
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, &pvc)).To(Succeed())
		Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(ferryv1alpha1.StorageClassVirtual)), "claim %s", claimName)
		// The consumer's default class, which the claim got before ferry's
		// webhook moved it.
		Expect(pvc.Annotations).To(HaveKeyWithValue(ferryv1alpha1.AnnotationRequestedStorageClass, testbed.StorageClassStandard), "claim %s", claimName)
		Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, string(realProviderID)), "claim %s", claimName)
		Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s", claimName)
		claimUIDs[claimName] = pvc.UID

		remote, err := provider.Kube.CoreV1().PersistentVolumeClaims(twin).Get(ctx, claimName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(remote.Spec.StorageClassName).To(HaveValue(Equal(testbed.StorageClassStandard)), "provider claim %s", claimName)
		Expect(remote.Status.Phase).To(Equal(corev1.ClaimBound), "provider claim %s", claimName)
		pv, err := provider.Kube.CoreV1().PersistentVolumes().Get(ctx, remote.Spec.VolumeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pv.Spec.NodeAffinity.Required.NodeSelectorTerms).To(ConsistOf(HaveField("MatchExpressions", ConsistOf(And(
			HaveField("Key", corev1.LabelHostname), HaveField("Values", ConsistOf(provider.RealNodes[0].Name)))))), "provider volume %s", pv.Name)
		Expect(pv.Spec.HostPath).NotTo(BeNil(), "provider volume %s", pv.Name)
		Expect(pv.Spec.HostPath.Path).To(Equal(filepath.Join(provider.Dir, testbed.VolumesDir, pv.Name)))
		volumeDirs[pod] = pv.Spec.HostPath.Path
	}

	By("each pod writes a file naming itself into its volume")
	files := map[string]string{}
	contents := map[string]string{}
	for _, pod := range names {
		contents[pod] = fmt.Sprintf("I am %s/%s, first run as pod %s", ns, pod, first[pod])
		files[pod] = realUpload(ctx, ns, pod, contents[pod])
		Expect(path.Dir(files[pod])).To(Equal(realUploadDir))
		// There, on the provider's node: in the directory its volume names.
		onDisk, err := os.ReadFile(filepath.Join(volumeDirs[pod], path.Base(files[pod])))
		Expect(err).NotTo(HaveOccurred(), "the file %s wrote is not in its volume's directory", pod)
		Expect(string(onDisk)).To(Equal(contents[pod]))
	}
	expectOwnFiles := func(uids map[string]types.UID) {
		GinkgoHelper()
		for _, pod := range names {
			Eventually(func(g Gomega) {
				out, err := consumer.Exec(ctx, ns, pod, "/agnhost", "mounttest", "--file_content="+files[pod])
				g.Expect(err).NotTo(HaveOccurred(), out)
				g.Expect(out).To(ContainSubstring(contents[pod]))
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "pod %s reads its own file", pod)
			for _, other := range names {
				if other != pod {
					out, err := consumer.Exec(ctx, ns, pod, "/agnhost", "mounttest", "--file_content="+files[other])
					Expect(err).To(HaveOccurred(), "pod %s sees %s's file: %s", pod, other, out)
				}
			}
			var pvc corev1.PersistentVolumeClaim
			Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + pod}, &pvc)).To(Succeed())
			Expect(pvc.UID).To(Equal(claimUIDs["data-"+pod]), "claim data-%s was made again", pod)
			Expect(uids[pod]).NotTo(Equal(first[pod]), "pod %s was not replaced", pod)
		}
	}

	By("deleting the pods: each comes back to the provider with its claim and reads its own file")
	start = time.Now()
	for _, pod := range names {
		Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}})).To(Succeed())
	}
	second := expectStatefulPodsOffloaded(ctx, ns, twin, vnode, names, first)
	GinkgoWriter.Printf("deleted StatefulSet pods Ready again on the provider in %s\n", time.Since(start).Round(100*time.Millisecond))
	expectOwnFiles(second)

	By("scaling to 0: no pod left on either side; the claims stay bound on both")
	start = time.Now()
	realScaleStatefulSet(ctx, ns, sts.Name, 0)
	Eventually(func(g Gomega) {
		for _, c := range []struct {
			cluster *testbed.Cluster
			ns      string
		}{{consumer, ns}, {provider, twin}} {
			pods, err := c.cluster.Kube.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(BeEmpty(), "%s: pods in %s", c.cluster.Name, c.ns)
		}
	}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
	for _, pod := range names {
		for _, c := range []struct {
			cluster *testbed.Cluster
			ns      string
		}{{consumer, ns}, {provider, twin}} {
			pvc, err := c.cluster.Kube.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, "data-"+pod, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "%s: claim %s/%s", c.cluster.Name, c.ns, pvc.Name)
		}
	}
	GinkgoWriter.Printf("scaled to 0 in %s\n", time.Since(start).Round(100*time.Millisecond))

	By("scaling back to 2: each pod back to the provider with its claim, reading its own file")
	start = time.Now()
	realScaleStatefulSet(ctx, ns, sts.Name, 2)
	third := expectStatefulPodsOffloaded(ctx, ns, twin, vnode, names, second)
	GinkgoWriter.Printf("scaled back to 2, Ready on the provider in %s\n", time.Since(start).Round(100*time.Millisecond))
	expectOwnFiles(third)
}

// expectStatefulPodsOffloaded waits until each named pod of ns is Ready on
// the virtual node, as a pod other than the one before had (nil: any), and
// its provider pod runs on the provider's real node with the same claim
// mounted; it returns the pods' UIDs in the consumer.
func expectStatefulPodsOffloaded(ctx context.Context, ns, twin, vnode string, names []string, before map[string]types.UID) map[string]types.UID {
	GinkgoHelper()
	uids := map[string]types.UID{}
	Eventually(func(g Gomega) {
		for _, name := range names {
			var pod corev1.Pod
			g.Expect(realConsumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod)).To(Succeed())
			g.Expect(pod.UID).NotTo(Equal(before[name]), "pod %s not replaced yet", name)
			g.Expect(pod.DeletionTimestamp).To(BeNil(), "pod %s", name)
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", name)
			g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)), "pod %s", name)
			g.Expect(pod.Spec.NodeName).To(Equal(vnode), "pod %s", name)
			remote, err := realProvider.Kube.CoreV1().Pods(twin).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(remote.Spec.NodeName).To(Equal(realProvider.RealNodes[0].Name), "provider pod %s", name)
			g.Expect(remote.Status.Phase).To(Equal(corev1.PodRunning), "provider pod %s", name)
			g.Expect(remote.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "data-"+name)), "provider pod %s", name)
			uids[name] = pod.UID
		}
	}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return uids
}

// realUpload writes content into a file of pod's /uploads, through agnhost
// netexec's /upload reached by port-forward from the consumer, and returns
// the file's path in the container.
func realUpload(ctx context.Context, ns, pod, content string) string {
	GinkgoHelper()
	local, stop := framework.PortForward(ctx, realConsumer, ns, pod, 8080)
	defer stop()
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	part, err := form.CreateFormFile("file", pod)
	Expect(err).NotTo(HaveOccurred())
	_, err = io.WriteString(part, content)
	Expect(err).NotTo(HaveOccurred())
	Expect(form.Close()).To(Succeed())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/upload", local), &body)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", form.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusCreated), "upload to %s: %s", pod, raw)
	var result struct{ Output, Error string }
	Expect(json.Unmarshal(raw, &result)).To(Succeed(), string(raw))
	Expect(result.Error).To(BeEmpty())
	return result.Output
}

func realScaleStatefulSet(ctx context.Context, ns, name string, replicas int32) {
	GinkgoHelper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	_, err := realConsumer.Kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}
