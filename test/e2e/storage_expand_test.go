package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// Expansion end to end and DataGravity's reason when a namespace excludes
// the cluster holding a pod's data, on a consumer with two kwok nodes and
// one provider, each with the test bed's hostpath provisioner, which
// expands volumes as a CSI external-resizer does.
var _ = Describe("Storage fabric: expansion and data held out of reach", Label("storage"), Ordered, func() {
	var consumer, eu *testbed.Cluster
	euNode := peering.VirtualNodeName("eu")
	// rigid is a class of the consumer that does not expand.
	const rigid = "rigid"

	claim := func(ns, name, size string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	pod := func(ns, name string, annotations map[string]string, claimName string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/db:v1"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}}}
	}
	local := map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingLocal)}
	runningOn := func(ctx context.Context, ns, name string, node gomegatypes.GomegaMatcher) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(node)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "pod %s/%s Running", ns, name)
	}
	grow := func(ctx context.Context, c *testbed.Cluster, ns, name, size string) {
		GinkgoHelper()
		Expect(c.Client.Patch(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"`+size+`"}}}}`)))).To(Succeed())
	}
	// grown checks, in c, that a claim and its volume show size and that
	// no resize status or condition stays on the claim.
	grown := func(g Gomega, ctx context.Context, c *testbed.Cluster, ns, name, size string) {
		var pvc corev1.PersistentVolumeClaim
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pvc)).To(Succeed())
		g.Expect(pvc.Status.Capacity).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse(size)), "claim %s/%s in %s", ns, name, c.Name)
		g.Expect(pvc.Status.Conditions).To(BeEmpty(), "claim %s/%s in %s: no resize condition stays", ns, name, c.Name)
		g.Expect(pvc.Status.AllocatedResourceStatuses).To(BeEmpty(), "claim %s/%s in %s", ns, name, c.Name)
		var pv corev1.PersistentVolume
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)).To(Succeed())
		g.Expect(pv.Spec.Capacity).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse(size)), "volume %s in %s", pv.Name, c.Name)
	}
	// backingClaim is the real claim in ferry-storage holding a claim's data.
	backingClaim := func(ctx context.Context, ns, name string) client.ObjectKey {
		GinkgoHelper()
		var key client.ObjectKey
		Eventually(func(g Gomega) {
			var pvc corev1.PersistentVolumeClaim
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pvc)).To(Succeed())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
			var pv corev1.PersistentVolume
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)).To(Succeed())
			ref, ok := pv.Annotations[storage.AnnotationBackingClaim]
			g.Expect(ok).To(BeTrue(), "volume %s of claim %s is held by a real claim", pv.Name, name)
			parts := strings.SplitN(ref, "/", 2)
			key = client.ObjectKey{Namespace: parts[0], Name: parts[1]}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		return key
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 2}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
		)
		consumer, eu = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.ApplyManifests(ctx, consumer, "storage")
		Expect(consumer.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: rigid},
			Provisioner: testbed.StorageProvisioner, VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr.To(false)})).To(Succeed())
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		framework.StartFerry(ctx, eu, "eu", framework.FerryOptions{})
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", eu.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("grows a claim held in a provider and one held by a real claim in this cluster, and refuses a class that does not expand with an event", Label("expand"), func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "grow")
		twins := framework.OffloadNamespaceTo(ctx, consumer, ns, ferryv1alpha1.NamespaceOffloadingSpec{
			PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote, SchedulerName: ferrySchedulerName}, "eu")
		Expect(consumer.Client.Create(ctx, claim(ns, "data-remote", "1Gi", nil))).To(Succeed())
		Expect(consumer.Client.Create(ctx, claim(ns, "data-local", "1Gi", nil))).To(Succeed())
		Expect(consumer.Client.Create(ctx, claim(ns, "data-rigid", "1Gi", ptr.To(rigid)))).To(Succeed())
		Expect(consumer.Client.Create(ctx, pod(ns, "remote", map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingRemote)}, "data-remote"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, pod(ns, "local", local, "data-local"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, pod(ns, "rigid", local, "data-rigid"))).To(Succeed())
		runningOn(ctx, ns, "remote", Equal(euNode))
		runningOn(ctx, ns, "local", HavePrefix("local-"))
		runningOn(ctx, ns, "rigid", HavePrefix("local-"))
		real := backingClaim(ctx, ns, "data-local")
		rigidReal := backingClaim(ctx, ns, "data-rigid")
		Eventually(func(g Gomega) {
			grown(g, ctx, consumer, ns, "data-remote", "1Gi")
			grown(g, ctx, eu, twins["eu"], "data-remote", "1Gi")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		By("growing all three claims while their pods run")
		start := time.Now()
		grow(ctx, consumer, ns, "data-remote", "2Gi")
		grow(ctx, consumer, ns, "data-local", "3Gi")
		grow(ctx, consumer, ns, "data-rigid", "2Gi")
		Eventually(func(g Gomega) {
			grown(g, ctx, consumer, real.Namespace, real.Name, "3Gi")
			grown(g, ctx, consumer, ns, "data-local", "3Gi")
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "the claim held in this cluster grew")
		GinkgoWriter.Printf("claim held by a real claim grown in %s\n", time.Since(start).Round(time.Millisecond))
		Eventually(func(g Gomega) {
			grown(g, ctx, eu, twins["eu"], "data-remote", "2Gi")
			grown(g, ctx, consumer, ns, "data-remote", "2Gi")
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "the claim held in the provider grew")
		GinkgoWriter.Printf("claim held in a provider grown in %s\n", time.Since(start).Round(time.Millisecond))
		for _, name := range []string{"data-remote", "data-local"} {
			Eventually(func(g Gomega) {
				var evs corev1.EventList
				g.Expect(consumer.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
				g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", name), HaveField("Reason", storage.EventExpansionDone))))
			}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "claim %s says it grew", name)
		}

		By("refusing, with an event and nothing else, a claim whose real class does not expand")
		Eventually(func(g Gomega) {
			var evs corev1.EventList
			g.Expect(consumer.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "data-rigid"), HaveField("Reason", storage.EventExpansionRefused),
				HaveField("Message", ContainSubstring("this cluster refused to expand claim "+rigidReal.String()+" to 2Gi")))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		grown(Default, ctx, consumer, ns, "data-rigid", "1Gi")
		grown(Default, ctx, consumer, rigidReal.Namespace, rigidReal.Name, "1Gi")

		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns))).To(Succeed())
	})

	It("keeps Pending, naming the claim and the cluster, a pod whose data lives in a cluster the namespace's clusterSelector excludes", Label("gravity"), func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "held")
		framework.OffloadNamespaceTo(ctx, consumer, ns, ferryv1alpha1.NamespaceOffloadingSpec{
			PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote, SchedulerName: ferrySchedulerName}, "eu")
		Expect(consumer.Client.Create(ctx, claim(ns, "data-eu", "1Gi", nil))).To(Succeed())
		Expect(consumer.Client.Create(ctx, pod(ns, "first", map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingRemote)}, "data-eu"))).To(Succeed())
		runningOn(ctx, ns, "first", Equal(euNode))
		Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}, client.GracePeriodSeconds(0))).To(Succeed())

		selectCluster := func(id string) {
			GinkgoHelper()
			patch := `{"spec":{"clusterSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"` + ferryv1alpha1.LabelClusterID + `","operator":"In","values":["` + id + `"]}]}]}}}`
			Expect(consumer.Client.Patch(ctx, &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}},
				client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}
		By("selecting another cluster: the next pod of the claim says where its data is and why it cannot go there")
		selectCluster("elsewhere")
		Expect(consumer.Client.Create(ctx, pod(ns, "later", nil, "data-eu"))).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "later"}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			cond := podCondition(&p, corev1.PodScheduled)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Message).To(ContainSubstring("the data of claim data-eu lives in cluster eu, which the namespace's NamespaceOffloading excludes: provider not selected by the namespace's clusterSelector"))
			g.Expect(cond.Message).NotTo(ContainSubstring("simultaneously"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		By("selecting the cluster again: a new pod of the claim is placed there")
		selectCluster("eu")
		// The webhook gave "later" node affinity to the clusters selected
		// when it was created; a pod created now may go to eu.
		Expect(consumer.Client.Create(ctx, pod(ns, "again", nil, "data-eu"))).To(Succeed())
		runningOn(ctx, ns, "again", Equal(euNode))

		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns))).To(Succeed())
	})
})
