package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/storage/move"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// realMoveSize is how much random data the pod writes before its volume
// is moved.
const realMoveSize = 256 << 20

// realMoveVolume: a StatefulSet pod (namespace LocalAndRemote, preferring
// the consumer's real node) writes 256 MiB of random data into its claim;
// `ferryctl move volume` is refused while the pod runs, naming it; scaled
// to 0, the claim is moved to the provider with the copy's first fetch pod
// killed mid-way (the copy starts again from an empty target; the claim
// keeps its volume until a fetch succeeds with a verified digest); scaled
// back up, the pod runs in the provider and reads the same SHA-256; the
// move confirmed, the source volume goes. Then the data is brought home
// the same way (source deleted at once) and read there again; moved out
// once more and reverted, it is back on its kept volume without a copy.
func realMoveVolume(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "real-move")
	twin := framework.OffloadNamespaceWith(ctx, consumer, ns, realProviderID, ferryv1alpha1.PodOffloadingLocalAndRemote)
	vnode := virtualNodeName(ctx, consumer, realProviderID)
	home := consumer.RealNodes[0].Name

	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					// First on the consumer's real node; once the data is
					// elsewhere, its volume's node affinity decides.
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
						Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{home}}}}}}}},
					Containers: []corev1.Container{{
						Name: "db", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
						Args:           []string{"netexec", "--http-port=8080"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
						Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
						VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: realUploadDir}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("512Mi")}},
				},
			}},
		},
	}
	Expect(consumer.Client.Create(ctx, sts)).To(Succeed())
	const pod, claim = "db-0", "data-db-0"
	realWaitPodOn(ctx, ns, pod, home)

	By("the pod writes 256 MiB of random data into its claim, held on the consumer's real node")
	file, sum := realUploadRandom(ctx, ns, pod, realMoveSize)
	GinkgoWriter.Printf("wrote %s (%d bytes, sha256 %s)\n", file, realMoveSize, sum)
	// And a small file naming it, which the pod reads back wherever it runs.
	marker := realUpload(ctx, ns, pod, "sha256 "+sum+" of "+file)
	var pvc corev1.PersistentVolumeClaim
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)).To(Succeed())
	Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, string(realConsumerID)))
	sourcePV := pvc.Spec.VolumeName

	By("ferryctl move volume while the pod runs: refused, naming the pod")
	out, err := ferryctl(ctx, "move", "volume", ns+"/"+claim, "--to", string(realProviderID), "--name", "busy", "--kubeconfig", consumer.KubeconfigPath, "--timeout", "1m")
	Expect(err).To(HaveOccurred(), out)
	Expect(err.Error()).To(And(ContainSubstring(ferryv1alpha1.MoveReasonWorkloadRunning), ContainSubstring(pod)))
	GinkgoWriter.Printf("refused: %v\n", err)

	By("scaled to 0, moved to the provider; the first fetch pod is killed mid-way")
	realScaleStatefulSet(ctx, ns, sts.Name, 0)
	realWaitPodGone(ctx, ns, pod)
	done := make(chan error, 1)
	var moveOut string
	start := time.Now()
	go func() {
		defer GinkgoRecover()
		o, err := ferryctl(ctx, "move", "volume", ns+"/"+claim, "--to", string(realProviderID), "--name", "out", "--kubeconfig", consumer.KubeconfigPath, "--timeout", "8m")
		moveOut = o
		done <- err
	}()
	mv := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "out"}}
	killed := ""
	Eventually(func(g Gomega) {
		g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(mv), mv)).To(Succeed())
		realExpectClaimOn(g, ctx, ns, claim, sourcePV, mv)
		g.Expect(mv.Status.Phase).To(Equal(ferryv1alpha1.MoveCopying))
		g.Expect(mv.Status.Progress.BytesCopied).To(BeNumerically(">", 0), "copy progress")
		name := strings.SplitN(mv.Status.CopyPod, "/", 2)[0]
		g.Expect(name).NotTo(BeEmpty())
		g.Expect(provider.Kube.CoreV1().Pods(twin).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})).To(Succeed())
		killed = fmt.Sprintf("%s after %d of %d bytes", name, mv.Status.Progress.BytesCopied, mv.Status.Progress.TotalBytes)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	GinkgoWriter.Printf("killed fetch pod %s\n", killed)
	// Until the move reports the claim moved, it is on its source volume.
	Eventually(func(g Gomega) {
		select {
		case err := <-done:
			done <- err
		default:
		}
		g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(mv), mv)).To(Succeed())
		realExpectClaimOn(g, ctx, ns, claim, sourcePV, mv)
		g.Expect(mv.Status.Phase).To(BeElementOf(ferryv1alpha1.MoveAwaitingConfirmation, ferryv1alpha1.MoveFailed))
	}).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()), "ferryctl move volume")
	took := time.Since(start)
	GinkgoWriter.Printf("ferryctl move volume output:\n%s\n", moveOut)
	Expect(mv.Status.Attempts).To(BeNumerically(">=", 2), "the killed copy started again")
	Expect(mv.Status.Digest).To(HaveLen(64))
	Expect(moveOut).To(MatchRegexp(`Copying \(attempt \d\): .* of 256\.0 MiB \(\d+%\), .*/s, ETA`))
	GinkgoWriter.Printf("moved %d bytes to the provider in %s with %d attempts (last rate %s/s)\n", mv.Status.Progress.BytesCopied, took.Round(100*time.Millisecond), mv.Status.Attempts, mibs(mv.Status.Progress.BytesPerSecond))
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)).To(Succeed())
	Expect(pvc.Spec.VolumeName).To(Equal(mv.Status.Target.Volume))
	Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, string(realProviderID)))
	var src corev1.PersistentVolume
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: sourcePV}, &src)).To(Succeed(), "the source volume is kept until confirmed")
	Expect(src.Spec.PersistentVolumeReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimRetain))

	By("scaled back to 1: the pod runs in the provider and reads the same 256 MiB")
	realScaleStatefulSet(ctx, ns, sts.Name, 1)
	realWaitPodOn(ctx, ns, pod, vnode)
	realExpectRead(ctx, ns, pod, marker, sum)
	remote, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, pod, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", claim)))
	remoteClaim, err := provider.Kube.CoreV1().PersistentVolumeClaims(twin).Get(ctx, claim, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(realVolumeFileSum(ctx, provider, remoteClaim.Spec.VolumeName, file)).To(Equal(sum), "the 256 MiB on the provider's volume the pod mounts")

	By("confirmed: the source volume and its real claim go")
	out, err = ferryctl(ctx, "move", "confirm", ns+"/out", "--kubeconfig", consumer.KubeconfigPath, "--wait", "--timeout", "2m")
	Expect(err).NotTo(HaveOccurred(), out)
	_, backing, _ := strings.Cut(mv.Status.Source.Claim, "/")
	Eventually(func(g Gomega) {
		err := consumer.Client.Get(ctx, client.ObjectKey{Name: sourcePV}, &corev1.PersistentVolume{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "source volume %s still there", sourcePV)
		err = consumer.Client.Get(ctx, client.ObjectKey{Namespace: storage.DefaultNamespace, Name: backing}, &corev1.PersistentVolumeClaim{})
		g.Expect(err).To(HaveOccurred(), "real claim %s still there", backing)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())

	By("brought home with --delete-source: the pod runs on the consumer's real node and reads the same data")
	realScaleStatefulSet(ctx, ns, sts.Name, 0)
	realWaitPodGone(ctx, ns, pod)
	start = time.Now()
	out, err = ferryctl(ctx, "move", "volume", ns+"/"+claim, "--to", string(realConsumerID), "--name", "home", "--delete-source", "--kubeconfig", consumer.KubeconfigPath, "--timeout", "8m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Printf("ferryctl move volume output:\n%s\n", out)
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "home"}, mv)).To(Succeed())
	GinkgoWriter.Printf("moved %d bytes home in %s, %d attempt(s), phase %s\n", mv.Status.Progress.BytesCopied, time.Since(start).Round(100*time.Millisecond), mv.Status.Attempts, mv.Status.Phase)
	realScaleStatefulSet(ctx, ns, sts.Name, 1)
	realWaitPodOn(ctx, ns, pod, home)
	realExpectRead(ctx, ns, pod, marker, sum)
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)).To(Succeed())
	Expect(pvc.Spec.VolumeName).To(Equal(mv.Status.Target.Volume))
	Expect(realVolumeFileSum(ctx, consumer, pvc.Spec.VolumeName, file)).To(Equal(sum), "the 256 MiB on the consumer's volume the pod mounts")
	Eventually(func(g Gomega) {
		g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(mv), mv)).To(Succeed())
		g.Expect(mv.Status.Phase).To(Equal(ferryv1alpha1.MoveSucceeded))
		_, err := provider.Kube.CoreV1().PersistentVolumeClaims(twin).Get(ctx, claim, metav1.GetOptions{})
		g.Expect(err).To(HaveOccurred(), "the provider's claim (the source) still there")
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(storage.DefaultNamespace), client.HasLabels{move.LabelVolumeMove})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())

	By("moved out again, then reverted: the claim is back on its kept volume at home, without a copy")
	realScaleStatefulSet(ctx, ns, sts.Name, 0)
	realWaitPodGone(ctx, ns, pod)
	homePV := pvc.Spec.VolumeName
	out, err = ferryctl(ctx, "move", "volume", ns+"/"+claim, "--to", string(realProviderID), "--name", "again", "--kubeconfig", consumer.KubeconfigPath, "--timeout", "8m")
	Expect(err).NotTo(HaveOccurred(), out)
	start = time.Now()
	out, err = ferryctl(ctx, "move", "revert", ns+"/again", "--kubeconfig", consumer.KubeconfigPath, "--wait", "--timeout", "2m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Printf("reverted in %s: %s\n", time.Since(start).Round(100*time.Millisecond), out)
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "again"}, mv)).To(Succeed())
	Expect(mv.Status.Phase).To(Equal(ferryv1alpha1.MoveReverted))
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)).To(Succeed())
	Expect(pvc.Spec.VolumeName).To(Equal(homePV), "the claim is back on its kept volume")
	Eventually(func(g Gomega) {
		_, err := provider.Kube.CoreV1().PersistentVolumeClaims(twin).Get(ctx, claim, metav1.GetOptions{})
		g.Expect(err).To(HaveOccurred(), "the copy's claim in the provider still there")
		err = consumer.Client.Get(ctx, client.ObjectKey{Name: mv.Status.Target.Volume}, &corev1.PersistentVolume{})
		g.Expect(err).To(HaveOccurred(), "the copy's volume still there")
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
	realScaleStatefulSet(ctx, ns, sts.Name, 1)
	realWaitPodOn(ctx, ns, pod, home)
	realExpectRead(ctx, ns, pod, marker, sum)
	Expect(realVolumeFileSum(ctx, consumer, homePV, file)).To(Equal(sum))
	realScaleStatefulSet(ctx, ns, sts.Name, 0)
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// realExpectClaimOn fails g unless the claim is bound to volume, as long
// as mv has not reported it re-pointed.
func realExpectClaimOn(g Gomega, ctx context.Context, ns, claim, volume string, mv *ferryv1alpha1.VolumeMove) {
	if mv.Status.Phase == ferryv1alpha1.MoveSwitching || mv.Status.Phase == ferryv1alpha1.MoveAwaitingConfirmation || mv.Status.Phase == ferryv1alpha1.MoveSucceeded {
		return
	}
	var pvc corev1.PersistentVolumeClaim
	if err := realConsumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc); err != nil {
		return
	}
	// Stop, do not retry: a claim on another volume before the copy is
	// verified is the one thing that must never happen.
	Expect(pvc.Spec.VolumeName).To(Equal(volume), "claim %s re-pointed while the move is %s", claim, mv.Status.Phase)
}

// realWaitPodOn waits for the StatefulSet pod to run Ready on node.
func realWaitPodOn(ctx context.Context, ns, name, node string) {
	GinkgoHelper()
	start := time.Now()
	Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(realConsumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil())
		g.Expect(p.Spec.NodeName).To(Equal(node), "pod %s", name)
		g.Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)), "pod %s", name)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	GinkgoWriter.Printf("pod %s Ready on %s after %s\n", name, node, time.Since(start).Round(100*time.Millisecond))
}

func realWaitPodGone(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		return realConsumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(MatchError(ContainSubstring("not found")))
}

// realUploadRandom streams size random bytes into a file of pod's
// /uploads (agnhost netexec's /upload, through port-forward) and returns
// the file's path and the data's SHA-256.
func realUploadRandom(ctx context.Context, ns, pod string, size int64) (string, string) {
	GinkgoHelper()
	local, stop := framework.PortForward(ctx, realConsumer, ns, pod, 8080)
	defer stop()
	h := sha256.New()
	body, w := io.Pipe()
	form := multipart.NewWriter(w)
	go func() {
		part, err := form.CreateFormFile("file", "random")
		if err == nil {
			rng := rand.NewChaCha8([32]byte{36, 1})
			_, err = io.CopyN(io.MultiWriter(part, h), rng, size)
		}
		if err == nil {
			err = form.Close()
		}
		_ = w.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/upload", local), body)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", form.FormDataContentType())
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusCreated), "upload to %s: %s", pod, raw)
	var result struct{ Output, Error string }
	Expect(json.Unmarshal(raw, &result)).To(Succeed(), string(raw))
	Expect(result.Error).To(BeEmpty())
	GinkgoWriter.Printf("uploaded %d bytes in %s\n", size, time.Since(start).Round(100*time.Millisecond))
	return result.Output, hex.EncodeToString(h.Sum(nil))
}

// realExpectRead has the pod read the small file naming the data's
// digest (agnhost mounttest, through exec): it sees the moved volume.
func realExpectRead(ctx context.Context, ns, pod, file, sum string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		out, err := realConsumer.Exec(ctx, ns, pod, "/agnhost", "mounttest", "--file_content="+file)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("sha256 " + sum))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "pod %s reads %s", pod, file)
}

// realVolumeFileSum is the SHA-256 of file (a path in the pod's volume) in
// the directory on the node's machine that volume pv of cluster c names.
func realVolumeFileSum(ctx context.Context, c *testbed.Cluster, pv, file string) string {
	GinkgoHelper()
	v, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(v.Spec.HostPath).NotTo(BeNil(), "volume %s in %s", pv, c.Name)
	f, err := os.Open(filepath.Join(v.Spec.HostPath.Path, path.Base(file)))
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	Expect(err).NotTo(HaveOccurred())
	Expect(n).To(Equal(int64(realMoveSize)))
	return hex.EncodeToString(h.Sum(nil))
}
