package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// ferrySchedulerName is the profile of manifests/scheduler/config.yaml.
const ferrySchedulerName = "ferry-scheduler"

// The scheduler specs run ferry-scheduler in-process (kube-scheduler's own
// setup, manifests/scheduler/config.yaml) on one cluster whose kwok nodes
// are two real nodes and virtual nodes of three providers, labelled,
// tainted and annotated as ferry's virtual kubelet does it. No webhook
// runs: pods are written as if the webhook had been bypassed, so every
// placement below is the scheduler's doing.
var _ = Describe("ferry-scheduler", Label("scheduler"), Ordered, func() {
	var c *testbed.Cluster
	virtual := func(cluster, region string) testbed.NodePool {
		return testbed.NodePool{Name: "virtual-" + cluster, CPU: "90", Memory: "360Gi", Pods: 1000,
			Labels: map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: cluster, "region": region},
			Taints: []corev1.Taint{{Key: ferryv1alpha1.TaintVirtualNode, Effect: corev1.TaintEffectNoExecute}}}
	}
	setShapes := func(ctx context.Context, node string, cpu string) {
		GinkgoHelper()
		shapes, err := json.Marshal([]ferryv1alpha1.NodeShape{{Count: 10, Resources: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("100")}}})
		Expect(err).NotTo(HaveOccurred())
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ferryv1alpha1.AnnotationNodeShapes: string(shapes)}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	offloaded := func(ctx context.Context, prefix string, strategy ferryv1alpha1.PodOffloadingStrategy, regions ...string) string {
		GinkgoHelper()
		ns := framework.CreateNamespace(ctx, c, prefix)
		spec := ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy}
		if len(regions) > 0 {
			spec.ClusterSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: regions}}}}}
		}
		Expect(c.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, Spec: spec})).To(Succeed())
		return ns
	}
	// pod is what the webhook would have let through: ferry-scheduler, the
	// virtual-node toleration, and a small request.
	pod := func(ns, name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
			SchedulerName: ferrySchedulerName,
			Tolerations:   []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	requesting := func(cpu string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
	}
	annotated := func(kv ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				p.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	create := func(ctx context.Context, pods ...*corev1.Pod) {
		GinkgoHelper()
		for _, p := range pods {
			Expect(c.Client.Create(ctx, p)).To(Succeed())
		}
	}
	nodeOf := func(ctx context.Context, p *corev1.Pod) string {
		GinkgoHelper()
		var node string
		Eventually(func(g Gomega) {
			var got corev1.Pod
			g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			g.Expect(got.Spec.NodeName).NotTo(BeEmpty(), "pod %s/%s not scheduled: %v", p.Namespace, p.Name, got.Status.Conditions)
			node = got.Spec.NodeName
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		return node
	}
	// unschedulable waits for the scheduler's verdict and returns its message.
	unschedulable := func(ctx context.Context, p *corev1.Pod) string {
		GinkgoHelper()
		var msg string
		Eventually(func(g Gomega) {
			var got corev1.Pod
			g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			g.Expect(got.Spec.NodeName).To(BeEmpty(), "pod %s/%s was placed", p.Namespace, p.Name)
			var cond *corev1.PodCondition
			for i := range got.Status.Conditions {
				if got.Status.Conditions[i].Type == corev1.PodScheduled {
					cond = &got.Status.Conditions[i]
				}
			}
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(corev1.PodReasonUnschedulable))
			msg = cond.Message
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		return msg
	}

	BeforeAll(func(ctx context.Context) {
		c = framework.StartClusters(ctx, testbed.Options{Name: "scheduling", ControllerManager: true, Kwok: true, Nodes: []testbed.NodePool{
			{Name: "local", Count: 2, CPU: "8", Memory: "32Gi"},
			virtual("eu-1", "eu"), virtual("us-1", "us"), virtual("ap-1", "ap"),
		}})[0]
		framework.ApplyManifests(ctx, c, "base")
		for _, n := range []string{"virtual-eu-1-0", "virtual-us-1-0", "virtual-ap-1-0"} {
			setShapes(ctx, n, "8")
		}
		// The scheduler outlives BeforeAll (whose context ends with it).
		framework.StartFerryScheduler(c)
	})

	It("ships manifests the API server accepts", func(ctx context.Context) {
		out, err := c.Kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--field-manager=ferry-e2e", "-k", filepath.Join(framework.RepoRoot(), "manifests", "scheduler"))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("deployment.apps/ferry-scheduler serverside-applied"))
	})

	It("ClusterSelector: places pods only where their namespace's policy allows", func(ctx context.Context) {
		remoteEU := offloaded(ctx, "remote-eu", ferryv1alpha1.PodOffloadingRemote, "eu")
		both := offloaded(ctx, "both-eu-us", ferryv1alpha1.PodOffloadingLocalAndRemote, "eu", "us")
		mars := offloaded(ctx, "remote-mars", ferryv1alpha1.PodOffloadingRemote, "mars")
		plain := framework.CreateNamespace(ctx, c, "plain")

		remote := []*corev1.Pod{pod(remoteEU, "a"), pod(remoteEU, "b"), pod(remoteEU, "c")}
		narrowedLocal := pod(both, "local", annotated(placement.AnnotationPodOffloadingStrategy, "Local"))
		narrowedRemote := pod(both, "remote", annotated(placement.AnnotationPodOffloadingStrategy, "Remote"))
		notOffloaded := pod(plain, "tolerating")
		noCluster := pod(mars, "lost")
		create(ctx, append(remote, narrowedLocal, narrowedRemote, notOffloaded, noCluster)...)

		for _, p := range remote {
			Expect(nodeOf(ctx, p)).To(Equal("virtual-eu-1-0"), "Remote, clusterSelector region in (eu)")
		}
		Expect(nodeOf(ctx, narrowedLocal)).To(HavePrefix("local-"), "pod annotation narrows LocalAndRemote to Local")
		Expect(nodeOf(ctx, narrowedRemote)).To(BeElementOf("virtual-eu-1-0", "virtual-us-1-0"), "pod annotation narrows to Remote; ap is not selected")
		Expect(nodeOf(ctx, notOffloaded)).To(HavePrefix("local-"), "a namespace without NamespaceOffloading stays local, toleration or not")
		Expect(unschedulable(ctx, noCluster)).To(ContainSubstring("no virtual node matches the namespace's clusterSelector"))

		By("selecting a cluster that appears: the waiting pod is placed there")
		var nso ferryv1alpha1.NamespaceOffloading
		Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: mars, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		nso.Spec.ClusterSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"ap"}
		Expect(c.Client.Update(ctx, &nso)).To(Succeed())
		Expect(nodeOf(ctx, noCluster)).To(Equal("virtual-ap-1-0"))
	})

	It("RemoteFit: refuses a virtual node no remote node of which fits the pod, and says why", func(ctx context.Context) {
		ns := offloaded(ctx, "fit", ferryv1alpha1.PodOffloadingRemote, "eu")
		big := pod(ns, "twelve-cpus", requesting("12"))
		small := pod(ns, "two-cpus", requesting("2"))
		create(ctx, big, small)
		Expect(nodeOf(ctx, small)).To(Equal("virtual-eu-1-0"))
		msg := unschedulable(ctx, big)
		Expect(msg).To(ContainSubstring("cluster eu-1: no real node fits the pod: cpu 12 requested, at most 8 free on a node"))
		Expect(msg).To(ContainSubstring("4 node(s) didn't satisfy plugin(s) [ClusterSelector]"), "the node set PreFilter gave")

		By("the provider's nodes growing: the pod is placed")
		setShapes(ctx, "virtual-eu-1-0", "16")
		Expect(nodeOf(ctx, big)).To(Equal("virtual-eu-1-0"))
		By("restoring the shapes")
		setShapes(ctx, "virtual-eu-1-0", "8")
	})

	It("DataGravity: pods follow their bound volumes (hard) and their namespace's data (soft)", func(ctx context.Context) {
		ns := offloaded(ctx, "data", ferryv1alpha1.PodOffloadingLocalAndRemote)
		bound := func(name string, cluster ferryv1alpha1.ClusterID, size string, gravity bool) {
			GinkgoHelper()
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              "",
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "example.csi.ferry.io", VolumeHandle: name}},
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name}}}
			if cluster != placement.LocalCluster {
				pv.Labels = map[string]string{ferryv1alpha1.LabelClusterID: string(cluster)}
			}
			empty := ""
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &empty, VolumeName: pv.Name,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
			if gravity {
				pvc.Annotations = map[string]string{placement.AnnotationDataGravity: "true"}
			}
			Expect(c.Client.Create(ctx, pv)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(c.Client.Delete(ctx, pv))).To(Succeed()) })
			Expect(c.Client.Create(ctx, pvc)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
				g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		mounting := func(claims ...string) func(*corev1.Pod) {
			return func(p *corev1.Pod) {
				for _, cl := range claims {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: cl, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cl}}})
				}
			}
		}
		bound("dataset-us", "us-1", "50Gi", true)
		bound("scratch-local", placement.LocalCluster, "1Gi", false)
		bound("cache-ap", "ap-1", "1Gi", false)

		usPod := pod(ns, "reads-us", mounting("dataset-us"))
		localPod := pod(ns, "reads-local", mounting("scratch-local"))
		split := pod(ns, "split", mounting("scratch-local", "cache-ap"))
		var pulled []*corev1.Pod
		for i := range 4 {
			pulled = append(pulled, pod(ns, fmt.Sprintf("compute-%d", i)))
		}
		create(ctx, append([]*corev1.Pod{usPod, localPod, split}, pulled...)...)
		Expect(nodeOf(ctx, usPod)).To(Equal("virtual-us-1-0"), "a bound volume in us-1 holds the pod there")
		Expect(nodeOf(ctx, localPod)).To(HavePrefix("local-"), "a bound local volume keeps the pod local")
		Expect(unschedulable(ctx, split)).To(ContainSubstring("the pod's volumes live in different clusters: claim scratch-local in this cluster, claim cache-ap in cluster ap-1"))
		for _, p := range pulled {
			Expect(nodeOf(ctx, p)).To(Equal("virtual-us-1-0"), "50Gi of ferry.io/data-gravity data in us-1 pulls the namespace's pods")
		}
	})

	It("combines with the default plugins: taints, node affinity and resources", func(ctx context.Context) {
		ns := offloaded(ctx, "combined", ferryv1alpha1.PodOffloadingLocalAndRemote, "eu", "us")

		By("node affinity: the user's requirement and the policy both hold")
		notEU := pod(ns, "not-eu", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: ferryv1alpha1.LabelNodeType, Operator: corev1.NodeSelectorOpIn, Values: []string{ferryv1alpha1.NodeTypeVirtual}},
					{Key: "region", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"eu"}}}}}}}}
		})
		By("resources: too big for the real nodes, fits a provider's node")
		tenCPUs := pod(ns, "ten-cpus", requesting("10"), annotated(placement.AnnotationPodOffloadingStrategy, "LocalAndRemote"))
		setShapes(ctx, "virtual-us-1-0", "16")
		DeferCleanup(func(ctx context.Context) { setShapes(ctx, "virtual-us-1-0", "8") })

		By("taints: a provider in maintenance is avoided")
		var eu corev1.Node
		Expect(c.Client.Get(ctx, client.ObjectKey{Name: "virtual-eu-1-0"}, &eu)).To(Succeed())
		eu.Spec.Taints = append(eu.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule})
		Expect(c.Client.Update(ctx, &eu)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			var n corev1.Node
			Expect(c.Client.Get(ctx, client.ObjectKey{Name: "virtual-eu-1-0"}, &n)).To(Succeed())
			n.Spec.Taints = []corev1.Taint{{Key: ferryv1alpha1.TaintVirtualNode, Effect: corev1.TaintEffectNoExecute}}
			Expect(c.Client.Update(ctx, &n)).To(Succeed())
		})
		var remote []*corev1.Pod
		for i := range 3 {
			remote = append(remote, pod(ns, fmt.Sprintf("remote-%d", i), annotated(placement.AnnotationPodOffloadingStrategy, "Remote")))
		}
		create(ctx, append([]*corev1.Pod{notEU, tenCPUs}, remote...)...)
		Expect(nodeOf(ctx, notEU)).To(Equal("virtual-us-1-0"))
		Expect(nodeOf(ctx, tenCPUs)).To(Equal("virtual-us-1-0"), "8-CPU real nodes are too small, eu is tainted, us has 16-CPU nodes")
		for _, p := range remote {
			Expect(nodeOf(ctx, p)).To(Equal("virtual-us-1-0"), "eu is tainted NoSchedule")
		}
	})
})
