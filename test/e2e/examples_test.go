package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The examples specs apply each of examples/ as a user does: they run the
// kubectl commands its README marks as run by this test, exactly as
// written (paths relative to the repository's root), with the test bed's
// kubectl against the consumer, then check what the README says you should
// see. One bed for all: a consumer ("home", two kwok nodes of 2 CPUs, the
// storage fabric, ferry's webhook, ferry-scheduler beside kube-scheduler)
// and two providers (eu, us) with storage, every cluster with ferry's
// controller manager, peered with ferryctl. The examples other than
// placement-local-first request no CPU, so its count of what the consumer's
// nodes hold (eight pods of 500m) stays true whichever ran before it; it
// runs last all the same.
var _ = Describe("Examples", Label("examples"), Ordered, func() {
	const home = ferryv1alpha1.ClusterID("home")
	var consumer *testbed.Cluster
	providers := map[ferryv1alpha1.ClusterID]*testbed.Cluster{}
	var start time.Time

	// apply runs step i of the example's README (see framework.ShellSteps)
	// on the consumer, after checking the README has steps in all.
	apply := func(ctx context.Context, example string, step, steps int) {
		GinkgoHelper()
		root := framework.RepoRoot()
		f, err := os.Open(filepath.Join(root, "examples", example, "README.md"))
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		all, err := framework.ShellSteps(f)
		Expect(err).NotTo(HaveOccurred(), "examples/%s/README.md", example)
		Expect(all).To(HaveLen(steps), "examples/%s/README.md: blocks marked %s", example, framework.RunByMarker)
		for _, args := range all[step] {
			for i, a := range args {
				if strings.HasPrefix(a, "examples/") {
					args[i] = filepath.Join(root, a)
				}
			}
			began := time.Now()
			cmdCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			out, err := consumer.Kubectl(cmdCtx, args...)
			cancel()
			Expect(err).NotTo(HaveOccurred(), "examples/%s: kubectl %s", example, strings.Join(args, " "))
			GinkgoWriter.Printf("kubectl %s (%s)\n%s", strings.Join(args, " "), time.Since(began).Round(100*time.Millisecond), out)
		}
	}
	// twins are the twin namespaces of ns's NamespaceOffloading by provider.
	twins := func(ctx context.Context, ns string) map[ferryv1alpha1.ClusterID]string {
		GinkgoHelper()
		var nso ferryv1alpha1.NamespaceOffloading
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		out := map[ferryv1alpha1.ClusterID]string{}
		for _, c := range nso.Status.Clusters {
			Expect(c.Phase).To(Equal(ferryv1alpha1.OffloadingReady), "cluster %s", c.ClusterID)
			out[c.ClusterID] = c.TwinNamespace
		}
		Expect(out).To(HaveLen(len(providers)), "every peered provider selected")
		return out
	}
	// clusterOf is the cluster a node's pods run in: its
	// topology.ferry.io/cluster label ("home" for this cluster's nodes).
	clusterOf := func(ctx context.Context, g Gomega, node string) ferryv1alpha1.ClusterID {
		var n corev1.Node
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
		g.Expect(n.Labels).To(HaveKey(ferryv1alpha1.LabelTopologyCluster), "node %s", node)
		return ferryv1alpha1.ClusterID(n.Labels[ferryv1alpha1.LabelTopologyCluster])
	}
	// running lists the pods of ns matching sel, each bound, Running and not
	// terminating, with the cluster each runs in; a pod in a provider must
	// have its Running twin in the twin namespace there.
	running := func(ctx context.Context, g Gomega, ns string, tw map[ferryv1alpha1.ClusterID]string, sel map[string]string) map[string]ferryv1alpha1.ClusterID {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
		out := map[string]ferryv1alpha1.ClusterID{}
		for _, p := range pods.Items {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is terminating", p.Name)
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s is not scheduled: %v", p.Name, p.Status.Conditions)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s on %s", p.Name, p.Spec.NodeName)
			id := clusterOf(ctx, g, p.Spec.NodeName)
			out[p.Name] = id
			if id == home {
				continue
			}
			g.Expect(providers).To(HaveKey(id), "pod %s on node %s", p.Name, p.Spec.NodeName)
			var remote corev1.PodList
			g.Expect(providers[id].Client.List(ctx, &remote, client.InNamespace(tw[id]),
				client.MatchingLabels{ferryv1alpha1.LabelOriginName: p.Name})).To(Succeed())
			g.Expect(remote.Items).To(HaveLen(1), "pod %s's twin in %s/%s", p.Name, id, tw[id])
			g.Expect(remote.Items[0].Status.Phase).To(Equal(corev1.PodRunning), "pod %s's twin in %s/%s", p.Name, id, tw[id])
		}
		return out
	}
	// expectCleanedUp checks that namespace ns is gone from the consumer
	// and its twins from every provider, with no volume left bound to a
	// claim of either.
	expectCleanedUp := func(ctx context.Context, ns string, tw map[ferryv1alpha1.ClusterID]string) {
		GinkgoHelper()
		gone := func(g Gomega, c *testbed.Cluster, name string) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s in %s: %v", name, c.Name, err)
			var pvs corev1.PersistentVolumeList
			g.Expect(c.Client.List(ctx, &pvs)).To(Succeed())
			for _, pv := range pvs.Items {
				g.Expect(pv.Spec.ClaimRef).NotTo(HaveField("Namespace", name), "volume %s in %s", pv.Name, c.Name)
			}
		}
		// kubectl delete returned once the namespace was gone: its twins
		// went before (the NamespaceOffloading's finalizer waits for them).
		gone(Default, consumer, ns)
		Eventually(func(g Gomega) {
			for id, twin := range tw {
				gone(g, providers[id], twin)
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}
	perCluster := func(pods map[string]ferryv1alpha1.ClusterID) map[ferryv1alpha1.ClusterID]int {
		out := map[ferryv1alpha1.ClusterID]int{}
		for _, id := range pods {
			out[id]++
		}
		return out
	}

	BeforeAll(func(ctx context.Context) {
		start = time.Now()
		region := func(r string) map[string]string { return map[string]string{corev1.LabelTopologyRegion: r} }
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "home", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 2, CPU: "2", Memory: "8Gi"}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "16", Memory: "64Gi", Labels: region("eu-west")}}},
			testbed.Options{Name: "us", ControllerManager: true, Scheduler: true, Kwok: true, Storage: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "16", Memory: "64Gi", Labels: region("us-east")}}},
		)
		consumer, providers["eu"], providers["us"] = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.ApplyManifests(ctx, consumer, "storage")
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, home, framework.FerryOptions{})
		for id, p := range providers {
			framework.StartFerry(ctx, p, id, framework.FerryOptions{})
			out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", p.KubeconfigPath, "--timeout", "90s")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		AddReportEntry("examples: bed ready (3 clusters, ferry, 2 peerings)", time.Since(start).Round(100*time.Millisecond).String())
		DeferCleanup(func() {
			AddReportEntry("examples wall time (BeforeAll to the last spec)", time.Since(start).Round(100*time.Millisecond).String())
		})
	})

	It("covers every example", func() {
		entries, err := os.ReadDir(filepath.Join(framework.RepoRoot(), "examples"))
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		Expect(names).To(ConsistOf("offloaded-namespace", "stateful-app", "spread-across-clusters", "network-policy", "placement-local-first"),
			"each folder of examples/ has a spec below")
	})

	It("offloaded-namespace: the Deployment's pods run in providers, its ConfigMap and Service are reflected there", func(ctx context.Context) {
		const ns = "shop"
		apply(ctx, "offloaded-namespace", 0, 2)
		var nso ferryv1alpha1.NamespaceOffloading
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		Expect(nso.Spec.PodOffloadingStrategy).To(Equal(ferryv1alpha1.PodOffloadingRemote))
		tw := twins(ctx, ns)
		for _, twin := range tw {
			Expect(twin).To(Equal(ns + "-" + string(home)))
		}
		var pods map[string]ferryv1alpha1.ClusterID
		Eventually(func(g Gomega) {
			pods = running(ctx, g, ns, tw, map[string]string{"app": "web"})
			g.Expect(pods).To(HaveLen(2))
			g.Expect(pods).NotTo(ContainElement(home), "no pod on this cluster's nodes")
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("reflecting the ConfigMap and the Service into the twin namespace of each provider running a pod")
		var svc corev1.Service
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &svc)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, id := range pods {
				var cm corev1.ConfigMap
				g.Expect(providers[id].Client.Get(ctx, client.ObjectKey{Namespace: tw[id], Name: "web-config"}, &cm)).To(Succeed())
				g.Expect(cm.Data).To(Equal(map[string]string{"GREETING": "hello from the consumer"}))
				var copy corev1.Service
				g.Expect(providers[id].Client.Get(ctx, client.ObjectKey{Namespace: tw[id], Name: "web"}, &copy)).To(Succeed())
				g.Expect(copy.Spec.Selector).To(Equal(map[string]string{"app": "web"}))
				g.Expect(copy.Spec.Ports).To(ConsistOf(And(HaveField("Name", "http"), HaveField("Port", int32(80)),
					HaveField("TargetPort", intstr.FromString("http")))))
				g.Expect(copy.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginCluster, string(home)))
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("cleaning up: the namespace, its pods in the providers and its twin namespaces are gone")
		apply(ctx, "offloaded-namespace", 1, 2)
		expectCleanedUp(ctx, ns, tw)
	})

	It("stateful-app: each claim is bound in the provider its pod runs in, and a deleted pod comes back there on the same claim", func(ctx context.Context) {
		const ns = "inventory"
		apply(ctx, "stateful-app", 0, 3)
		tw := twins(ctx, ns)
		var pods map[string]ferryv1alpha1.ClusterID
		claimUIDs := map[string]types.UID{}
		Eventually(func(g Gomega) {
			pods = running(ctx, g, ns, tw, map[string]string{"app": "db"})
			g.Expect(pods).To(HaveKey("db-0"))
			g.Expect(pods).To(HaveKey("db-1"))
			for pod, id := range pods {
				g.Expect(id).NotTo(Equal(home), "pod %s", pod)
				var pvc corev1.PersistentVolumeClaim
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + pod}, &pvc)).To(Succeed())
				g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s", pvc.Name)
				g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(ferryv1alpha1.StorageClassVirtual)), "claim %s", pvc.Name)
				g.Expect(pvc.Annotations).To(HaveKey(ferryv1alpha1.AnnotationRequestedStorageClass), "claim %s", pvc.Name)
				g.Expect(pvc.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, string(id)), "claim %s: the data lives with its pod", pvc.Name)
				var remote corev1.PersistentVolumeClaim
				g.Expect(providers[id].Client.Get(ctx, client.ObjectKey{Namespace: tw[id], Name: pvc.Name}, &remote)).To(Succeed())
				g.Expect(remote.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s in %s/%s", pvc.Name, id, tw[id])
				claimUIDs[pvc.Name] = pvc.UID
			}
			var evs corev1.EventList
			g.Expect(consumer.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "data-db-0"), HaveField("Reason", "DataLocation"),
				HaveField("Message", ContainSubstring("data lives in cluster "+string(pods["db-0"]))))))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("deleting db-0: it comes back to the same provider, on the same claim")
		var before corev1.Pod
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &before)).To(Succeed())
		apply(ctx, "stateful-app", 1, 3)
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-0"}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(before.UID), "a new pod")
			g.Expect(running(ctx, g, ns, tw, map[string]string{"app": "db"})).To(HaveKeyWithValue("db-0", pods["db-0"]))
			var pvc corev1.PersistentVolumeClaim
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, &pvc)).To(Succeed())
			g.Expect(pvc.UID).To(Equal(claimUIDs["data-db-0"]))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("cleaning up: the claims go, and with them the providers' claims and volumes, then the twin namespaces")
		apply(ctx, "stateful-app", 2, 3)
		expectCleanedUp(ctx, ns, tw)
	})

	It("spread-across-clusters: six replicas split 2/2/2 over this cluster and both providers", func(ctx context.Context) {
		const ns = "web"
		apply(ctx, "spread-across-clusters", 0, 1)
		tw := twins(ctx, ns)
		Eventually(func(g Gomega) {
			pods := running(ctx, g, ns, tw, map[string]string{"app": "frontend"})
			g.Expect(perCluster(pods)).To(Equal(map[ferryv1alpha1.ClusterID]int{home: 2, "eu": 2, "us": 2}))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	})

	It("network-policy: both policies reach the server's provider, the allow rule translated to the labelled client's address there", func(ctx context.Context) {
		const ns = "payments"
		apply(ctx, "network-policy", 0, 2)
		tw := twins(ctx, ns)
		var server ferryv1alpha1.ClusterID
		clientPod := map[string]*corev1.Pod{}
		Eventually(func(g Gomega) {
			pods := running(ctx, g, ns, tw, nil)
			g.Expect(pods).To(HaveLen(3))
			var list corev1.PodList
			g.Expect(consumer.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			for _, pod := range list.Items {
				switch app, id := pod.Labels["app"], pods[pod.Name]; app {
				case "server":
					g.Expect(id).NotTo(Equal(home), "the server is offloaded")
					server = id
				case "client-allowed", "client-denied":
					g.Expect(id).To(Equal(home), "the clients run here")
					g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
					clientPod[app] = &pod
				default:
					g.Expect(app).To(BeEmpty(), "unexpected pod %s", pod.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		network := framework.WaitPeerNetwork(ctx, consumer, home, server)
		at := func(app string) string { return network.ConsumerPodIP(clientPod[app].Status.PodIP) + "/32" }

		p, twin := providers[server], tw[server]
		expectCopies := func(blocks ...string) {
			GinkgoHelper()
			port := intstr.FromInt32(8080)
			Eventually(func(g Gomega) {
				var deny networkingv1.NetworkPolicy
				g.Expect(p.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "deny-all"}, &deny)).To(Succeed())
				g.Expect(deny.Spec.PodSelector).To(Equal(metav1.LabelSelector{}))
				g.Expect(deny.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
				g.Expect(deny.Spec.Ingress).To(BeEmpty())
				var allow networkingv1.NetworkPolicy
				g.Expect(p.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "allow-access"}, &allow)).To(Succeed())
				g.Expect(allow.Spec.PodSelector).To(Equal(metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}))
				g.Expect(allow.Spec.Ingress).To(HaveLen(1))
				rule := allow.Spec.Ingress[0]
				g.Expect(rule.Ports).To(ConsistOf(HaveField("Port", &port)))
				var got []string
				for _, peer := range rule.From {
					if peer.IPBlock != nil {
						got = append(got, peer.IPBlock.CIDR)
					}
				}
				g.Expect(rule.From).To(ContainElement(HaveField("PodSelector", Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"access": "true"}}))))
				g.Expect(got).To(ConsistOf(blocks), "ipBlocks of allow-access's copy in %s/%s", server, twin)
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		}
		expectCopies(at("client-allowed"))

		By("labelling the other client: the copy lets its address in too")
		apply(ctx, "network-policy", 1, 2)
		expectCopies(at("client-allowed"), at("client-denied"))
	})

	It("placement-local-first: this cluster's nodes first, the overflow in providers; scaling down removes the offloaded pods", func(ctx context.Context) {
		const ns = "batch"
		apply(ctx, "placement-local-first", 0, 2)
		tw := twins(ctx, ns)
		sel := map[string]string{"app": "worker"}
		Eventually(func(g Gomega) {
			pods := running(ctx, g, ns, tw, sel)
			counts := perCluster(pods)
			g.Expect(counts[home]).To(Equal(8), "the consumer's two nodes hold eight pods of 500m: %v", counts)
			g.Expect(len(pods)-counts[home]).To(Equal(2), "the overflow in providers: %v", counts)
			var list corev1.PodList
			g.Expect(consumer.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
			for _, p := range list.Items {
				cost, ok := p.Annotations[placement.AnnotationPodDeletionCost]
				if pods[p.Name] == home {
					g.Expect(ok).To(BeFalse(), "local pod %s has cost %q", p.Name, cost)
				} else {
					g.Expect(cost).To(Equal("-100"), "offloaded pod %s", p.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("scaling down to 8: the offloaded pods go")
		apply(ctx, "placement-local-first", 1, 2)
		Eventually(func(g Gomega) {
			g.Expect(perCluster(running(ctx, g, ns, tw, sel))).To(Equal(map[ferryv1alpha1.ClusterID]int{home: 8}))
			for id, twin := range tw {
				var remote corev1.PodList
				g.Expect(providers[id].Client.List(ctx, &remote, client.InNamespace(twin), client.MatchingLabels(sel))).To(Succeed())
				g.Expect(remote.Items).To(BeEmpty(), "pods left in %s/%s", id, twin)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	})
})
