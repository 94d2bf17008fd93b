package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	"github.com/prometheus/client_golang/prometheus"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/offloading"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The storage specs run the storage fabric on real clusters: a consumer
// with two real nodes and two providers in two regions, each with the test
// bed's hostpath provisioner (classes standard and fast), so the consumer's
// and providers' PV controllers, schedulers' volume binding, ferry's
// provisioner and ferry-scheduler's DataGravity all act for real. Claims are
// written as users write them (no class, or a real one); ferry-webhook moves
// them to the virtual class.
var _ = Describe("Storage fabric", Label("storage"), Ordered, func() {
	var consumer, eu, us *testbed.Cluster
	euNode, usNode := peering.VirtualNodeName("eu"), peering.VirtualNodeName("us")

	offload := func(ctx context.Context, prefix string, strategy ferryv1alpha1.PodOffloadingStrategy, providers ...ferryv1alpha1.ClusterID) (string, map[ferryv1alpha1.ClusterID]string) {
		GinkgoHelper()
		ns := framework.CreateNamespace(ctx, consumer, prefix)
		return ns, framework.OffloadNamespaceTo(ctx, consumer, ns, ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy, SchedulerName: ferrySchedulerName}, providers...)
	}
	providerOf := func(id ferryv1alpha1.ClusterID) *testbed.Cluster {
		return map[ferryv1alpha1.ClusterID]*testbed.Cluster{"eu": eu, "us": us}[id]
	}
	claim := func(ns, name, size string, annotations map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	podWith := func(ns, name string, nodeSelector, annotations map[string]string, claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "app", Image: "registry.example/db:v1"}}}}
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		return p
	}
	statefulSet := func(ns, name string, replicas int32) *appsv1.StatefulSet {
		labels := map[string]string{"app": name}
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:v1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim("", "data", "1Gi", nil)},
		}}
	}
	// expectRunningOn waits for the pod to run on a node matching node
	// (a name, or a matcher) and returns it.
	expectRunningOn := func(ctx context.Context, ns, name string, node any) *corev1.Pod {
		GinkgoHelper()
		m, ok := node.(gomegatypes.GomegaMatcher)
		if !ok {
			m = Equal(node)
		}
		var p corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(m, "pod %s", name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", name)
		}).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "pod %s/%s Running on %v", ns, name, node)
		return &p
	}
	// expectDataIn checks that a claim's data lives in cluster (the provider,
	// or "" for the consumer's real nodes) as the storage fabric says it
	// does, and returns the claim's volume.
	expectDataIn := func(ctx context.Context, ns, name string, cluster ferryv1alpha1.ClusterID, twin string) *corev1.PersistentVolume {
		GinkgoHelper()
		var pvc corev1.PersistentVolumeClaim
		var pv corev1.PersistentVolume
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pvc)).To(Succeed())
			g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(ferryv1alpha1.StorageClassVirtual)), "the webhook moved claim %s to the virtual class", name)
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s", name)
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)).To(Succeed())
			g.Expect(placement.VolumeCluster(&pv)).To(Equal(cluster), "volume %s of claim %s", pv.Name, name)
			if cluster == placement.LocalCluster {
				g.Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, "consumer"))
				g.Expect(pv.Annotations).To(HaveKey(storage.AnnotationBackingClaim))
				ref := strings.SplitN(pv.Annotations[storage.AnnotationBackingClaim], "/", 2)
				var real corev1.PersistentVolumeClaim
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ref[0], Name: ref[1]}, &real)).To(Succeed())
				g.Expect(real.Status.Phase).To(Equal(corev1.ClaimBound))
				g.Expect(real.Spec.StorageClassName).To(HaveValue(Equal(testbed.StorageClassStandard)))
				var backing corev1.PersistentVolume
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: real.Spec.VolumeName}, &backing)).To(Succeed())
				g.Expect(pv.Spec.HostPath).To(Equal(backing.Spec.HostPath), "the volume shares the real volume's source")
				return
			}
			g.Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, string(cluster)))
			g.Expect(pv.Spec.CSI).NotTo(BeNil())
			g.Expect(pv.Spec.CSI.Driver).To(Equal(storage.CSIDriver))
			var remote corev1.PersistentVolumeClaim
			g.Expect(providerOf(cluster).Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, &remote)).To(Succeed())
			g.Expect(remote.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginUID, string(pvc.UID)))
			g.Expect(remote.Status.Phase).To(Equal(corev1.ClaimBound), "the provider bound claim %s/%s", twin, name)
			g.Expect(pv.Annotations).To(HaveKeyWithValue(storage.AnnotationRemotePhase, "Bound"), "the local volume shows the remote phase")
			g.Expect(pv.Annotations).To(HaveKeyWithValue(storage.AnnotationRemoteVolume, remote.Spec.VolumeName))
			g.Expect(pv.Annotations).To(HaveKeyWithValue(storage.AnnotationRemoteClass, testbed.StorageClassStandard))
		}).WithContext(ctx).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "claim %s/%s bound with its data in %s", ns, name, cluster)
		return &pv
	}
	// expectNothingLeft checks that no claim, volume or real claim made for
	// the namespace's claims is left in any cluster.
	expectNothingLeft := func(ctx context.Context, ns string, twins map[ferryv1alpha1.ClusterID]string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var pvcs corev1.PersistentVolumeClaimList
			g.Expect(consumer.Client.List(ctx, &pvcs, client.InNamespace(ns))).To(Succeed())
			g.Expect(pvcs.Items).To(BeEmpty())
			var real corev1.PersistentVolumeClaimList
			g.Expect(consumer.Client.List(ctx, &real, client.InNamespace(storage.DefaultNamespace), client.MatchingLabels{ferryv1alpha1.LabelOriginNamespace: ns})).To(Succeed())
			g.Expect(real.Items).To(BeEmpty(), "real claims in %s", storage.DefaultNamespace)
			var pvs corev1.PersistentVolumeList
			g.Expect(consumer.Client.List(ctx, &pvs)).To(Succeed())
			for _, pv := range pvs.Items {
				g.Expect(pv.Spec.ClaimRef).NotTo(HaveField("Namespace", ns), "volume %s", pv.Name)
				g.Expect(pv.Spec.ClaimRef).NotTo(HaveField("Namespace", storage.DefaultNamespace), "volume %s", pv.Name)
			}
			for id, twin := range twins {
				p := providerOf(id)
				g.Expect(p.Client.List(ctx, &pvcs, client.InNamespace(twin))).To(Succeed())
				g.Expect(pvcs.Items).To(BeEmpty(), "claims in %s/%s", id, twin)
				g.Expect(p.Client.List(ctx, &pvs)).To(Succeed())
				for _, pv := range pvs.Items {
					g.Expect(pv.Spec.ClaimRef).NotTo(HaveField("Namespace", twin), "volume %s in %s", pv.Name, id)
				}
			}
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "nothing of %s's claims left", ns)
	}
	// expectPending checks that a pod stays unscheduled with a reason that
	// says each of want.
	expectPending := func(ctx context.Context, ns, name string, want ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			cond := podCondition(&p, corev1.PodScheduled)
			g.Expect(cond).NotTo(BeNil())
			for _, w := range want {
				g.Expect(cond.Message).To(ContainSubstring(w))
			}
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "pod %s/%s Pending", ns, name)
	}
	deleteClaims := func(ctx context.Context, ns string) {
		GinkgoHelper()
		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns))).To(Succeed())
	}

	BeforeAll(func(ctx context.Context) {
		region := func(r string) map[string]string { return map[string]string{corev1.LabelTopologyRegion: r} }
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 2}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "32", Memory: "128Gi", Pods: 110, Labels: region("eu-west")}}},
			testbed.Options{Name: "us", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "32", Memory: "128Gi", Pods: 110, Labels: region("us-east")}}},
		)
		consumer, eu, us = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.ApplyManifests(ctx, consumer, "storage")
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		for _, p := range []*testbed.Cluster{eu, us} {
			framework.StartFerry(ctx, p, ferryv1alpha1.ClusterID(p.Name), framework.FerryOptions{})
			out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", p.KubeconfigPath, "--timeout", "90s")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		By("publishing each provider's storage classes on its virtual node")
		Eventually(func(g Gomega) {
			for _, name := range []string{euNode, usNode} {
				var n corev1.Node
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: name}, &n)).To(Succeed())
				classes, ok, err := placement.NodeStorageClasses(&n)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue(), "node %s publishes no storage classes", name)
				g.Expect(classes).To(ContainElements(
					ferryv1alpha1.VirtualNodeStorageClass{Name: "", ProviderClass: testbed.StorageClassStandard},
					ferryv1alpha1.VirtualNodeStorageClass{Name: testbed.StorageClassFast, ProviderClass: testbed.StorageClassFast}))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	})

	It("binds a Remote StatefulSet's claims in the provider, keeps its pods there through deletes and scaling, and leaves nothing behind", func(ctx context.Context) {
		ns, twins := offload(ctx, "shop", ferryv1alpha1.PodOffloadingRemote, "eu")
		sts := statefulSet(ns, "db", 3)
		Expect(consumer.Client.Create(ctx, sts)).To(Succeed())
		claimUIDs := map[string]types.UID{}
		for i := range 3 {
			name := fmt.Sprintf("db-%d", i)
			expectRunningOn(ctx, ns, name, euNode)
			expectDataIn(ctx, ns, "data-"+name, "eu", twins["eu"])
			var pvc corev1.PersistentVolumeClaim
			Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, &pvc)).To(Succeed())
			claimUIDs[pvc.Name] = pvc.UID
		}
		By("telling where the data lives in the claim's events")
		Eventually(func(g Gomega) {
			var evs corev1.EventList
			g.Expect(consumer.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Name", "data-db-0"), HaveField("Reason", "DataLocation"),
				HaveField("Message", ContainSubstring("data lives in cluster eu")))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("bringing a deleted pod back to the same provider")
		var first corev1.Pod
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-1"}, &first)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, &first)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-1"}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(first.UID))
			g.Expect(p.Spec.NodeName).To(Equal(euNode))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		By("scaling to 0 and back: the same claims, the pods in the same provider")
		scale := func(n int32) {
			GinkgoHelper()
			Expect(consumer.Client.Patch(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}},
				client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)))).To(Succeed())
		}
		scale(0)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		scale(3)
		for i := range 3 {
			name := fmt.Sprintf("db-%d", i)
			expectRunningOn(ctx, ns, name, euNode)
			var pvc corev1.PersistentVolumeClaim
			Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, &pvc)).To(Succeed())
			Expect(pvc.UID).To(Equal(claimUIDs[pvc.Name]), "claim %s kept", pvc.Name)
		}

		By("forwarding an expansion of a claim to the provider's claim")
		Expect(consumer.Client.Patch(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-db-0"}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			var remote corev1.PersistentVolumeClaim
			g.Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: twins["eu"], Name: "data-db-0"}, &remote)).To(Succeed())
			g.Expect(remote.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse("2Gi")))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		By("refusing to drop the twin namespace, and its data, while claims are bound there")
		Expect(consumer.Client.Delete(ctx, sts)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}})).To(Succeed())
		Eventually(func(g Gomega) {
			var nso ferryv1alpha1.NamespaceOffloading
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
			g.Expect(nso.Status.Clusters).To(HaveLen(1))
			g.Expect(nso.Status.Clusters[0].Conditions).To(ContainElement(And(
				HaveField("Reason", offloading.ReasonVolumesHeld), HaveField("Message", ContainSubstring("claim data-db-0")))))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		var remote corev1.PersistentVolumeClaimList
		Expect(eu.Client.List(ctx, &remote, client.InNamespace(twins["eu"]))).To(Succeed())
		Expect(remote.Items).To(HaveLen(3), "the provider's claims are kept")

		By("deleting the claims: the provider's claims and volumes go, then the twin namespace")
		deleteClaims(ctx, ns)
		expectNothingLeft(ctx, ns, twins)
		Eventually(func(g Gomega) {
			err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &ferryv1alpha1.NamespaceOffloading{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the NamespaceOffloading is gone")
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	})

	It("binds a Local namespace's claims through the real class, left alone by ferry", func(ctx context.Context) {
		ns, _ := offload(ctx, "local", ferryv1alpha1.PodOffloadingLocal, "eu")
		Expect(consumer.Client.Create(ctx, statefulSet(ns, "db", 2))).To(Succeed())
		Eventually(func(g Gomega) {
			for i := range 2 {
				var pvc corev1.PersistentVolumeClaim
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("data-db-%d", i)}, &pvc)).To(Succeed())
				g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(testbed.StorageClassStandard)))
				g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
				var p corev1.Pod
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("db-%d", i)}, &p)).To(Succeed())
				g.Expect(p.Spec.NodeName).To(HavePrefix("local-"))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
		deleteClaims(ctx, ns)
	})

	It("in LocalAndRemote, binds each claim where its first pod lands and sends later pods to their data", func(ctx context.Context) {
		ns, twins := offload(ctx, "mixed", ferryv1alpha1.PodOffloadingLocalAndRemote, "eu", "us")
		for _, c := range []string{"data-eu", "data-us", "data-local"} {
			Expect(consumer.Client.Create(ctx, claim(ns, c, "1Gi", nil))).To(Succeed())
		}
		Expect(consumer.Client.Create(ctx, claim(ns, "data-big", "20Gi", map[string]string{placement.AnnotationDataGravity: "true"}))).To(Succeed())
		inRegion := func(r string) map[string]string { return map[string]string{corev1.LabelTopologyRegion: r} }
		local := map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingLocal)}

		By("binding each claim where its first pod lands")
		Expect(consumer.Client.Create(ctx, podWith(ns, "first-eu", inRegion("eu-west"), nil, "data-eu", "data-big"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "first-us", inRegion("us-east"), nil, "data-us"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "first-local", nil, local, "data-local"))).To(Succeed())
		expectRunningOn(ctx, ns, "first-eu", euNode)
		expectRunningOn(ctx, ns, "first-us", usNode)
		firstLocal := expectRunningOn(ctx, ns, "first-local", HavePrefix("local-"))
		expectDataIn(ctx, ns, "data-eu", "eu", twins["eu"])
		expectDataIn(ctx, ns, "data-big", "eu", twins["eu"])
		expectDataIn(ctx, ns, "data-us", "us", twins["us"])
		expectDataIn(ctx, ns, "data-local", placement.LocalCluster, "")

		By("sending later pods of a claim where its data is, whatever else they ask for")
		for _, p := range []string{"first-eu", "first-us", "first-local"} {
			Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p}}, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Expect(consumer.Client.Create(ctx, podWith(ns, "later-eu", nil, nil, "data-eu"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "later-us", nil, nil, "data-us"))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "later-local", nil, nil, "data-local"))).To(Succeed())
		expectRunningOn(ctx, ns, "later-eu", euNode)
		expectRunningOn(ctx, ns, "later-us", usNode)
		expectRunningOn(ctx, ns, "later-local", firstLocal.Spec.NodeName)

		By("pulling a new pod without claims toward the cluster holding most of the namespace's gravity data")
		Expect(consumer.Client.Create(ctx, podWith(ns, "drawn", nil, nil))).To(Succeed())
		expectRunningOn(ctx, ns, "drawn", euNode)

		By("keeping Pending, with the claims and clusters named, a pod whose claims live in two clusters")
		Expect(consumer.Client.Create(ctx, podWith(ns, "torn", nil, nil, "data-eu", "data-us"))).To(Succeed())
		expectPending(ctx, ns, "torn", "claim data-eu in cluster eu", "claim data-us in cluster us")

		By("keeping Pending, naming the class, a pod whose claim asks for a class no cluster offers")
		gold := claim(ns, "data-gold-remote", "1Gi", nil)
		gold.Spec.StorageClassName = new("gold")
		Expect(consumer.Client.Create(ctx, gold)).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "golden", inRegion("eu-west"), nil, "data-gold-remote"))).To(Succeed())
		expectPending(ctx, ns, "golden", `claim data-gold-remote asks for storage class "gold": cluster eu does not offer storage class "gold"`)
		Eventually(func(g Gomega) {
			var evs corev1.EventList
			g.Expect(consumer.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Name", "data-gold-remote"), HaveField("Reason", "StorageClassNotOffered"),
				HaveField("Message", ContainSubstring(`cluster eu does not offer storage class "gold"`)))))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the claim says why")
		var pvc corev1.PersistentVolumeClaim
		Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(gold), &pvc)).To(Succeed())
		Expect(pvc.Status.Phase).To(Equal(corev1.ClaimPending), "nothing was provisioned")

		By("deleting every claim: nothing is left in any cluster")
		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		deleteClaims(ctx, ns)
		expectNothingLeft(ctx, ns, twins)
	})
	It("leaves claims untouched while their provider is unreachable, and provisions what waited once it is back", func(ctx context.Context) {
		ns, twins := offload(ctx, "outage", ferryv1alpha1.PodOffloadingRemote, "us")
		Expect(consumer.Client.Create(ctx, claim(ns, "data-before", "1Gi", nil))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "before", nil, nil, "data-before"))).To(Succeed())
		expectRunningOn(ctx, ns, "before", usNode)
		before := expectDataIn(ctx, ns, "data-before", "us", twins["us"])

		failuresBefore := storageMetric("ferry_storage_provisioning_failures_total", map[string]string{"cluster": "us"})
		provisionedBefore := storageMetric("ferry_storage_provisioning_duration_seconds", map[string]string{"cluster": "us"})

		By("stopping the provider's API server")
		us.StopAPIServer()
		restarted := false
		DeferCleanup(func(ctx context.Context) {
			if !restarted {
				Expect(us.StartAPIServer(ctx)).To(Succeed())
			}
		})
		Expect(consumer.Client.Create(ctx, claim(ns, "data-during", "1Gi", nil))).To(Succeed())
		Expect(consumer.Client.Create(ctx, podWith(ns, "during", nil, nil, "data-during"))).To(Succeed())
		Consistently(func(g Gomega) {
			var pvc corev1.PersistentVolumeClaim
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-before"}, &pvc)).To(Succeed())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
			g.Expect(pvc.Spec.VolumeName).To(Equal(before.Name))
			var pv corev1.PersistentVolume
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: before.Name}, &pv)).To(Succeed())
			g.Expect(pv.DeletionTimestamp).To(BeNil())
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-during"}, &pvc)).To(Succeed())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimPending), "nothing can be provisioned in the provider meanwhile")
		}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(storageMetric("ferry_storage_provisioning_failures_total", map[string]string{"cluster": "us"})).To(BeNumerically(">", failuresBefore),
			"the failed attempts are counted")
		By("exporting the claim a pod waits for as Pending")
		reg := prometheus.NewPedanticRegistry()
		Expect(reg.Register(&storage.ClaimsCollector{Reader: consumer.Client})).To(Succeed())
		families, err := reg.Gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(families).To(ContainElement(And(
			HaveField("GetName()", "ferry_storage_claim_pending_since_timestamp_seconds"),
			HaveField("GetMetric()", ContainElement(HaveField("GetLabel()", ContainElements(
				And(HaveField("GetName()", "namespace"), HaveField("GetValue()", ns)),
				And(HaveField("GetName()", "claim"), HaveField("GetValue()", "data-during")))))))))

		By("starting it again: the waiting claim is provisioned there, the other is as it was")
		Expect(us.StartAPIServer(ctx)).To(Succeed())
		restarted = true
		expectRunningOn(ctx, ns, "during", usNode)
		expectDataIn(ctx, ns, "data-during", "us", twins["us"])
		Expect(expectDataIn(ctx, ns, "data-before", "us", twins["us"]).UID).To(Equal(before.UID))
		Expect(storageMetric("ferry_storage_provisioning_duration_seconds", map[string]string{"cluster": "us"})).To(BeNumerically(">", provisionedBefore),
			"the claim provisioned after the outage is observed")

		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		deleteClaims(ctx, ns)
		expectNothingLeft(ctx, ns, twins)
	})
})

// storageMetric sums, over the series of ferry's metrics registry (the test
// bed's controller managers run in this process) whose labels include
// labels, the counter's value or the histogram's count.
func storageMetric(name string, labels map[string]string) float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
