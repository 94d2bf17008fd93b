// Package framework holds what ferry's end-to-end suites share: starting
// test-bed clusters tied to the spec's lifetime, and installing ferry's
// manifests the way a user does.
package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/localscheduler"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/testbed"
)

// StartClusters starts test-bed clusters in parallel and registers their
// cleanup with the current node (spec, BeforeAll, ...): they stop when it
// ends, also on failure or interruption, and print their components' last
// log lines when the spec failed.
func StartClusters(ctx context.Context, opts ...testbed.Options) []*testbed.Cluster {
	GinkgoHelper()
	clusters, err := testbed.StartClusters(ctx, opts...)
	Expect(err).NotTo(HaveOccurred(), "start test clusters")
	StopWithNode(clusters...)
	return clusters
}

// StopWithNode registers the stopping of clusters with the current node, as
// StartClusters does for those it starts.
func StopWithNode(clusters ...*testbed.Cluster) {
	for _, c := range clusters {
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Println(c.Logs(40))
			}
			Expect(c.Stop()).To(Succeed())
		})
	}
}

// RepoRoot is the folder of ferry's go.mod.
func RepoRoot() string {
	GinkgoHelper()
	dir, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		Expect(parent).NotTo(Equal(dir), "no go.mod above the test's folder")
		dir = parent
	}
}

// ApplyManifests installs a kustomization of manifests/ (e.g. "base") with
// `kubectl apply --server-side -k`, as the README tells users to, and waits
// until every CRD in the cluster is Established and served by discovery
// (clients map kinds to resources through discovery, which lags a little).
func ApplyManifests(ctx context.Context, c *testbed.Cluster, kustomization string) {
	GinkgoHelper()
	dir := filepath.Join(RepoRoot(), "manifests", kustomization)
	out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-e2e", "-k", dir)
	Expect(err).NotTo(HaveOccurred(), "apply %s to %s:\n%s", dir, c.Name, out)
	Eventually(func(g Gomega) {
		var crds apiextensionsv1.CustomResourceDefinitionList
		g.Expect(c.Client.List(ctx, &crds)).To(Succeed())
		for _, crd := range crds.Items {
			g.Expect(established(&crd)).To(BeTrue(), "CRD %s is not Established", crd.Name)
			for _, v := range crd.Spec.Versions {
				resources, err := c.Kube.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
				g.Expect(err).NotTo(HaveOccurred(), "discovery of %s/%s", crd.Spec.Group, v.Name)
				g.Expect(resources.APIResources).To(ContainElement(HaveField("Name", crd.Spec.Names.Plural)))
			}
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// CreateNamespace creates a namespace with a unique name from prefix and
// deletes it when the current node ends.
func CreateNamespace(ctx context.Context, c *testbed.Cluster, prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{}
	ns.GenerateName = prefix + "-"
	Expect(c.Client.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(c.Client.Delete(ctx, ns))).To(Succeed(), fmt.Sprintf("delete namespace %s", ns.Name))
	})
	return ns.Name
}

// OffloadNamespace offloads namespace of c to the provider alone, with
// pod offloading strategy Remote, and returns its twin namespace there once
// it is Ready.
func OffloadNamespace(ctx context.Context, c *testbed.Cluster, namespace string, provider ferryv1alpha1.ClusterID) string {
	GinkgoHelper()
	return OffloadNamespaceWith(ctx, c, namespace, provider, ferryv1alpha1.PodOffloadingRemote)
}

// OffloadNamespaceTo offloads namespace with spec to the providers given
// (spec.clusterSelector is set to select exactly them) and returns its twin
// namespace in each once every one is Ready and the namespace carries the
// offloading label.
func OffloadNamespaceTo(ctx context.Context, c *testbed.Cluster, namespace string, spec ferryv1alpha1.NamespaceOffloadingSpec, providers ...ferryv1alpha1.ClusterID) map[ferryv1alpha1.ClusterID]string {
	GinkgoHelper()
	ids := make([]string, len(providers))
	for i, p := range providers {
		ids[i] = string(p)
	}
	spec.ClusterSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: ids}}}}}
	Expect(c.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, Spec: spec,
	})).To(Succeed())
	twins := map[ferryv1alpha1.ClusterID]string{}
	Eventually(func(g Gomega) {
		var nso ferryv1alpha1.NamespaceOffloading
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		g.Expect(nso.Status.Clusters).To(HaveLen(len(providers)))
		for _, cl := range nso.Status.Clusters {
			g.Expect(cl.Phase).To(Equal(ferryv1alpha1.OffloadingReady), "cluster %s", cl.ClusterID)
			twins[cl.ClusterID] = cl.TwinNamespace
		}
		var ns corev1.Namespace
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: namespace}, &ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOffloadingEnabled, "true"))
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	return twins
}

// OffloadNamespaceWith offloads namespace to provider alone with the pod
// offloading strategy given and returns its twin namespace there once Ready.
func OffloadNamespaceWith(ctx context.Context, c *testbed.Cluster, namespace string, provider ferryv1alpha1.ClusterID, strategy ferryv1alpha1.PodOffloadingStrategy) string {
	GinkgoHelper()
	Expect(c.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy,
			// This provider only, however many are peered.
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{string(provider)}}}}}}},
	})).To(Succeed())
	var twin string
	Eventually(func(g Gomega) {
		var nso ferryv1alpha1.NamespaceOffloading
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		g.Expect(nso.Status.Clusters).To(ConsistOf(And(HaveField("ClusterID", provider), HaveField("Phase", ferryv1alpha1.OffloadingReady))))
		twin = nso.Status.Clusters[0].TwinNamespace
	}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
	return twin
}

// StartWebhookInProcess runs ferry-webhook in this process against c (its
// configurations registered) until the spec or container ends.
func StartWebhookInProcess(ctx context.Context, c *testbed.Cluster) {
	GinkgoHelper()
	stop, err := localwebhook.Run(ctx, c.Config, c.Client, RepoRoot())
	Expect(err).NotTo(HaveOccurred(), "start ferry-webhook for %s", c.Name)
	DeferCleanup(stop)
}

// StartFerryScheduler runs ferry-scheduler in this process with
// manifests/scheduler/config.yaml against c until the spec or container
// ends; it outlives the context of the BeforeAll that starts it.
func StartFerryScheduler(c *testbed.Cluster) {
	GinkgoHelper()
	s, err := localscheduler.Start(context.Background(), filepath.Join(RepoRoot(), "manifests", "scheduler", "config.yaml"), c.KubeconfigPath, GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred(), "start ferry-scheduler")
	DeferCleanup(s.Stop)
}
