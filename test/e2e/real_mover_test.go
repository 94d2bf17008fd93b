package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/storage/mover"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/realbed"
)

// realMoverImage is ferry-volume-mover's image as the real nodes hold it.
var realMoverImage = realbed.ImageRegistry + "/" + mover.Name + ":" + realbed.ImageTag

// realMoverCopiesAClaim runs ferry-volume-mover from its image on the
// consumer's real node, as the volume move's pods do: a serve pod on one
// claim of the default class (files written into its volume's directory
// on the node), a fetch pod on another, run as root; the fetch pod
// Succeeds with the result in its termination message, the digest equal to
// the source's, and the target volume holds the same tree, owners and
// modes included.
func realMoverCopiesAClaim(ctx context.Context) {
	c := realConsumer
	ns := framework.CreateNamespace(ctx, c, "real-mover")
	claim := func(name string) {
		GinkgoHelper()
		_, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	pod := func(name, claimName string, args []string, probe *corev1.Probe) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name: "mover", Image: realMoverImage, ImagePullPolicy: corev1.PullNever,
					Args:            args,
					Env:             []corev1.EnvVar{{Name: mover.TokenEnv, Value: "e2e-token"}},
					SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0), ReadOnlyRootFilesystem: ptr.To(true)},
					ReadinessProbe:  probe,
					VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
			},
		}
	}
	volumeDir := func(claimName string) string {
		GinkgoHelper()
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pv.Spec.HostPath).NotTo(BeNil(), "volume %s", pv.Name)
		return pv.Spec.HostPath.Path
	}

	By("a serve pod on the source claim, Ready by GET /healthz")
	claim("source")
	claim("target")
	start := time.Now()
	serve, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod("serve", "source", []string{"serve", "--dir=/data", "--listen=:7070"},
		&corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: mover.HealthPath, Port: intstr.FromInt32(mover.DefaultPort)}}, PeriodSeconds: 1}), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		serve, err = c.Kube.CoreV1().Pods(ns).Get(ctx, "serve", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(serve.Status.PodIP).NotTo(BeEmpty())
		g.Expect(serve.Status.ContainerStatuses).To(ContainElement(HaveField("Ready", BeTrue())))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("serve pod Ready after %s\n", time.Since(start).Round(100*time.Millisecond))

	By("files written into the source volume's directory on the node: 32 MiB of random data, small files, an empty directory, a symlink, modes and owners")
	src := volumeDir("source")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 36))
	write := func(rel string, size int64, mode os.FileMode) {
		GinkgoHelper()
		p := filepath.Join(src, rel)
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		f, err := os.Create(p)
		Expect(err).NotTo(HaveOccurred())
		_, err = io.CopyN(f, realRandom{rng}, size)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Close()).To(Succeed())
		Expect(os.Chmod(p, mode)).To(Succeed())
	}
	write("db/big", 32<<20, 0o600)
	for i := range 10 {
		write(fmt.Sprintf("db/wal/%03d", i), rng.Int64N(64<<10), 0o640)
	}
	write("conf/ro", 100, 0o444)
	Expect(os.MkdirAll(filepath.Join(src, "empty"), 0o700)).To(Succeed())
	Expect(os.Symlink("db/big", filepath.Join(src, "current"))).To(Succeed())
	Expect(os.Lchown(filepath.Join(src, "db", "big"), 999, 999)).To(Succeed())
	want, err := mover.TreeDigest(src)
	Expect(err).NotTo(HaveOccurred())

	By("a fetch pod on the target claim copies from the serve pod's IP and Succeeds")
	start = time.Now()
	_, err = c.Kube.CoreV1().Pods(ns).Create(ctx, pod("fetch", "target", []string{"fetch", "--dir=/data", "--from=" + serve.Status.PodIP + ":7070"}, nil), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	var fetch *corev1.Pod
	Eventually(func(g Gomega) {
		fetch, err = c.Kube.CoreV1().Pods(ns).Get(ctx, "fetch", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fetch.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(fetch.Status.ContainerStatuses).To(HaveLen(1))
	terminated := fetch.Status.ContainerStatuses[0].State.Terminated
	Expect(terminated).NotTo(BeNil())
	Expect(fetch.Status.Phase).To(Equal(corev1.PodSucceeded), "fetch: %s", terminated.Message)
	GinkgoWriter.Printf("fetch pod Succeeded %s after create: %s\n", time.Since(start).Round(100*time.Millisecond), terminated.Message)

	res, err := mover.ParseTerminationMessage(terminated.Message)
	Expect(err).NotTo(HaveOccurred())
	Expect(res).To(Equal(mover.Result{Bytes: want.Bytes, Files: want.Files, SHA256: want.SHA256}))
	got, err := mover.TreeDigest(volumeDir("target"))
	Expect(err).NotTo(HaveOccurred())
	Expect(got).To(Equal(want), "the target volume's tree")
	info, err := os.Lstat(filepath.Join(volumeDir("target"), "db", "big"))
	Expect(err).NotTo(HaveOccurred())
	Expect(info.Sys()).To(HaveField("Uid", BeEquivalentTo(999)), "owner kept by a fetch run as root")

	logs, err := c.Kube.CoreV1().Pods(ns).GetLogs("fetch", &corev1.PodLogOptions{}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	var last *mover.Progress
	for line := range strings.Lines(string(logs)) {
		if p, err := mover.ParseProgress([]byte(line)); err == nil {
			last = &p
		}
	}
	Expect(last).NotTo(BeNil(), "no progress line in the fetch pod's output:\n%s", logs)
	Expect(last.Bytes).To(Equal(want.Bytes))

	Expect(c.Kube.CoreV1().Pods(ns).Delete(ctx, "serve", metav1.DeleteOptions{})).To(Succeed())
	Eventually(func(g Gomega) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "serve", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Status.ContainerStatuses).To(ContainElement(HaveField("State.Terminated.ExitCode", BeZero())), "serve exits 0 on SIGTERM")
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

type realRandom struct{ r *rand.Rand }

func (r realRandom) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}
