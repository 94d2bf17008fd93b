package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/install"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// allObjects lists every object of every listable kind c serves that
// matches the label selector ("" for all), as "group/kind namespace/name",
// except Events (which the cluster writes on its own, with names of their own),
// sorted: the snapshot the install and uninstall specs compare.
func allObjects(ctx context.Context, c *testbed.Cluster, selector string) []string {
	GinkgoHelper()
	config := rest.CopyConfig(c.Config)
	// Listing every kind meets deprecated ones (v1 Endpoints,
	// ComponentStatus): not these specs' concern.
	config.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(config)
	Expect(err).NotTo(HaveOccurred())
	lists, err := dc.ServerPreferredResources()
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Kind == "Event" {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: selector})
			Expect(err).NotTo(HaveOccurred(), "list %s", r.Name)
			for _, it := range items.Items {
				out = append(out, fmt.Sprintf("%s/%s %s/%s", gv.Group, r.Kind, it.GetNamespace(), it.GetName()))
			}
		}
	}
	slices.Sort(out)
	return out
}

var _ = Describe("ferryctl install and uninstall", Label("install"), Ordered, func() {
	var c *testbed.Cluster
	var before []string

	BeforeAll(func(ctx context.Context) {
		c = framework.StartClusters(ctx, testbed.Options{Name: "install", ControllerManager: true, Scheduler: true, Kwok: true,
			Nodes: []testbed.NodePool{{Name: "node", Count: 2}}})[0]
		before = allObjects(ctx, c, "")
	})

	It("prints the objects with --dry-run and applies nothing", func(ctx context.Context) {
		out, err := ferryctl(ctx, "install", "--kubeconfig", c.KubeconfigPath, "--cluster-id", "rome", "--dry-run")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("kind: CustomResourceDefinition"))
		Expect(out).To(ContainSubstring("name: ferry-controller-manager"))
		Expect(out).To(ContainSubstring("--cluster-id=rome"))
		Expect(allObjects(ctx, c, "")).To(Equal(before), "--dry-run changed the cluster")
	})

	It("refuses without a cluster ID, naming the flag", func(ctx context.Context) {
		out, err := ferryctl(ctx, "install", "--kubeconfig", c.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("--cluster-id")), out)
	})

	It("installs ferry by server-side apply and waits for it to be ready", func(ctx context.Context) {
		out, err := ferryctl(ctx, "install", "--kubeconfig", c.KubeconfigPath, "--cluster-id", "rome", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Println(out)
		for _, step := range []string{"CustomResourceDefinitions", "Namespaces", "RBAC", "workloads", "ready", "admission", "Service CIDR"} {
			Expect(out).To(ContainSubstring(step))
		}
		var deployments appsv1.DeploymentList
		Expect(c.Client.List(ctx, &deployments, client.InNamespace(ferryv1alpha1.SystemNamespace))).To(Succeed())
		Expect(deployments.Items).NotTo(BeEmpty())
		for _, d := range deployments.Items {
			Expect(d.Labels).To(HaveKeyWithValue(install.LabelManagedBy, install.ManagedBy), d.Name)
			Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas), "Deployment %s", d.Name)
			Expect(d.Spec.Template.Spec.Containers[0].Image).To(HavePrefix("ghcr.io/ferry-io/"), d.Name)
		}
	})

	It("changes nothing when run again with the same values", func(ctx context.Context) {
		out, err := ferryctl(ctx, "install", "--kubeconfig", c.KubeconfigPath, "--cluster-id", "rome", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`Installed in .*: \d+ objects, 0 created, 0 changed, \d+ unchanged, 0 pruned`))
	})

	It("removes what new values no longer render", func(ctx context.Context) {
		out, err := ferryctl(ctx, "install", "--kubeconfig", c.KubeconfigPath, "--cluster-id", "rome", "--set", "scheduler.enabled=false", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`[1-9]\d* pruned`))
		Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-scheduler"}, &appsv1.Deployment{})).NotTo(Succeed())
	})

	It("refuses to uninstall while a peering exists, unless --force", func(ctx context.Context) {
		fc := &unstructured.Unstructured{}
		fc.SetAPIVersion(ferryv1alpha1.GroupVersion.String())
		fc.SetKind("ForeignCluster")
		fc.SetName("milan")
		Expect(unstructured.SetNestedStringMap(fc.Object, map[string]string{"clusterID": "milan", "role": "Consumer"}, "spec")).To(Succeed())
		Expect(c.Client.Create(ctx, fc)).To(Succeed())
		out, err := ferryctl(ctx, "uninstall", "--kubeconfig", c.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("milan")), out)
		Expect(err).To(MatchError(ContainSubstring("--force")), out)
		Expect(c.Client.Delete(ctx, fc)).To(Succeed())
	})

	It("uninstalls and leaves nothing behind", func(ctx context.Context) {
		out, err := ferryctl(ctx, "uninstall", "--kubeconfig", c.KubeconfigPath, "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Println(out)
		after := allObjects(ctx, c, "")
		Expect(strings.Join(after, "\n")).To(Equal(strings.Join(before, "\n")), "objects listed before the install and after the uninstall differ")
		out, err = ferryctl(ctx, "uninstall", "--kubeconfig", c.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Nothing to uninstall"))
	})
})
