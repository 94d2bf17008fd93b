package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/storage/move"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// Moving volumes, the refusals that need no real pods: a consumer with one
// real (kwok) node and a provider, both with the test bed's hostpath
// provisioner. kwok runs no container, so no copy ends here: a move started
// stays copying (the real-node bed moves data, real_move_test.go).
var _ = Describe("Moving volumes: refusals", Label("storage", "move"), Ordered, func() {
	var consumer, eu *testbed.Cluster
	euNode := peering.VirtualNodeName("eu")
	var localNode string

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
		)
		consumer, eu = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.ApplyManifests(ctx, consumer, "storage")
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		framework.StartFerry(ctx, eu, "eu", framework.FerryOptions{})
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", eu.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			var n corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: euNode}, &n)).To(Succeed())
			_, ok, err := placement.NodeStorageClasses(&n)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes)).To(Succeed())
		for _, n := range nodes.Items {
			if !placement.IsVirtualNode(&n) {
				localNode = n.Name
			}
		}
		Expect(localNode).NotTo(BeEmpty())
	})

	claimOf := func(ns, name, class, size string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
		if class != "" {
			c.Spec.StorageClassName = &class
		}
		return c
	}
	// boundOn makes a claim and a pod using it on node, waits until the claim
	// is bound, and returns the claim.
	boundOn := func(ctx context.Context, ns, claim, class, size, pod, node string) *corev1.PersistentVolumeClaim {
		GinkgoHelper()
		pvc := claimOf(ns, claim, class, size)
		Expect(consumer.Client.Create(ctx, pvc)).To(Succeed())
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: node}, Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:v1"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
		if node == euNode {
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: euNode}
			p.Spec.Tolerations = []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}}
		}
		Expect(consumer.Client.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "claim %s/%s bound, pod %s running on %s", ns, claim, pod, node)
		return pvc
	}
	deletePod := func(ctx context.Context, ns, name string) {
		GinkgoHelper()
		Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() bool {
			err := consumer.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
			return client.IgnoreNotFound(err) == nil && err != nil
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeTrue())
	}
	newMove := func(ctx context.Context, ns, name, claim string, to ferryv1alpha1.ClusterID) *ferryv1alpha1.VolumeMove {
		GinkgoHelper()
		mv := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: ferryv1alpha1.VolumeMoveSpec{ClaimName: claim, TargetCluster: to}}
		Expect(consumer.Client.Create(ctx, mv)).To(Succeed())
		return mv
	}
	expectEnded := func(ctx context.Context, mv *ferryv1alpha1.VolumeMove, phase ferryv1alpha1.VolumeMovePhase, reason string, says ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(mv), mv)).To(Succeed())
			g.Expect(mv.Status.Phase).To(Equal(phase))
			g.Expect(mv.Status.Conditions).To(ContainElement(And(HaveField("Type", ferryv1alpha1.VolumeMoveReady), HaveField("Reason", reason))))
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "VolumeMove %s %s with %s", mv.Name, phase, reason)
		for _, s := range says {
			Expect(mv.Status.Conditions[0].Message).To(ContainSubstring(s))
		}
		GinkgoWriter.Printf("VolumeMove %s: %s %s: %s\n", mv.Name, phase, reason, mv.Status.Conditions[0].Message)
	}
	// expectUnchanged checks the claim is the one it was, on the same
	// volume, and nothing a move stages is left in either cluster.
	expectUnchanged := func(ctx context.Context, was *corev1.PersistentVolumeClaim, twin string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var now corev1.PersistentVolumeClaim
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(was), &now)).To(Succeed())
			g.Expect(now.UID).To(Equal(was.UID), "claim %s made again", was.Name)
			g.Expect(now.Spec.VolumeName).To(Equal(was.Spec.VolumeName))
			g.Expect(now.Status.Phase).To(Equal(corev1.ClaimBound))
			var pv corev1.PersistentVolume
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: now.Spec.VolumeName}, &pv)).To(Succeed())
			g.Expect(pv.Annotations).NotTo(HaveKey(move.AnnotationReclaimPolicy))
			for _, c := range []struct {
				cluster *testbed.Cluster
				ns      string
			}{{consumer, storage.DefaultNamespace}, {eu, twin}} {
				var pods corev1.PodList
				g.Expect(c.cluster.Client.List(ctx, &pods, client.InNamespace(c.ns), client.HasLabels{move.LabelVolumeMove})).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty(), "%s: mover pods left in %s", c.cluster.Name, c.ns)
				var claims corev1.PersistentVolumeClaimList
				g.Expect(c.cluster.Client.List(ctx, &claims, client.InNamespace(c.ns), client.HasLabels{move.LabelVolumeMove})).To(Succeed())
				g.Expect(claims.Items).To(BeEmpty(), "%s: staged claims left in %s", c.cluster.Name, c.ns)
			}
			var sps ferryv1alpha1.ShadowPodList
			g.Expect(eu.Client.List(ctx, &sps, client.InNamespace(twin))).To(Succeed())
			g.Expect(sps.Items).To(BeEmpty(), "ShadowPods left in %s", twin)
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "claim %s unchanged, nothing staged left", was.Name)
	}

	It("refuses a move while a pod uses the claim (naming it) and a second move while one runs (naming the first); a cancelled move leaves the claim as it was", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "move")
		twin := framework.OffloadNamespaceWith(ctx, consumer, ns, "eu", ferryv1alpha1.PodOffloadingLocalAndRemote)
		pvc := boundOn(ctx, ns, "data", "", "1Gi", "db-0", localNode)

		By("a pod uses the claim: refused, naming it")
		busy := newMove(ctx, ns, "busy", "data", "eu")
		expectEnded(ctx, busy, ferryv1alpha1.MoveRefused, ferryv1alpha1.MoveReasonWorkloadRunning, "db-0")
		expectUnchanged(ctx, pvc, twin)

		By("the pod gone, a move starts; a second one is refused, naming the first")
		deletePod(ctx, ns, "db-0")
		first := newMove(ctx, ns, "first", "data", "eu")
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.Status.Phase).To(Equal(ferryv1alpha1.MoveCopying))
			g.Expect(first.Status.Source).To(Equal(ferryv1alpha1.VolumeMoveEndpoint{Cluster: "consumer", Claim: "ferry-storage/" + pvc.Spec.VolumeName, Volume: pvc.Spec.VolumeName}))
			g.Expect(first.Status.Target.Claim).To(Equal(twin + "/data"))
			var sps ferryv1alpha1.ShadowPodList
			g.Expect(eu.Client.List(ctx, &sps, client.InNamespace(twin), client.HasLabels{move.LabelVolumeMove})).To(Succeed())
			g.Expect(sps.Items).NotTo(BeEmpty(), "the fetch pod's ShadowPod")
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		second := newMove(ctx, ns, "second", "data", "eu")
		expectEnded(ctx, second, ferryv1alpha1.MoveRefused, ferryv1alpha1.MoveReasonMoveInProgress, "VolumeMove first")

		By("spec.revert cancels the running move: everything staged is removed, the claim is as it was")
		Expect(consumer.Client.Patch(ctx, first, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"revert":true}}`)))).To(Succeed())
		expectEnded(ctx, first, ferryv1alpha1.MoveFailed, ferryv1alpha1.MoveReasonCancelled)
		expectUnchanged(ctx, pvc, twin)

		By("the API refuses changing the claim or the target of a move")
		Expect(consumer.Client.Patch(ctx, first, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"targetCluster":"consumer"}}`)))).
			To(MatchError(ContainSubstring("targetCluster is immutable")))
	})

	It("refuses a move home that finds no room there, and one whose class home does not have: the claim and its data stay where they were", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "move-room")
		twin := framework.OffloadNamespaceWith(ctx, consumer, ns, "eu", ferryv1alpha1.PodOffloadingLocalAndRemote)
		// The local node's fast class holds 10Gi: a 6Gi claim fills it.
		boundOn(ctx, ns, "filler", testbed.StorageClassFast, "6Gi", "filler", localNode)
		big := boundOn(ctx, ns, "big", testbed.StorageClassFast, "6Gi", "big", euNode)
		deletePod(ctx, ns, "big")

		By("no room for 6Gi more of class fast here: InsufficientCapacity, with the provisioner's word")
		start := time.Now()
		full := newMove(ctx, ns, "full", "big", "consumer")
		expectEnded(ctx, full, ferryv1alpha1.MoveFailed, ferryv1alpha1.MoveReasonInsufficientCapacity, "fast")
		GinkgoWriter.Printf("no-room move failed %s after create\n", time.Since(start).Round(100*time.Millisecond))
		expectUnchanged(ctx, big, twin)

		By("class fast gone here: ClassNotOffered, nothing made")
		var fast storagev1.StorageClass
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: testbed.StorageClassFast}, &fast)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, &fast)).To(Succeed())
		nothere := newMove(ctx, ns, "nothere", "big", "consumer")
		expectEnded(ctx, nothere, ferryv1alpha1.MoveRefused, ferryv1alpha1.MoveReasonClassNotOffered, `"fast"`)
		expectUnchanged(ctx, big, twin)
	})
})
