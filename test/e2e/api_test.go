package e2e

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// Valid objects of every kind; each table entry breaks one field.

func validForeignCluster() *ferryv1alpha1.ForeignCluster {
	return &ferryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "fc-"},
		Spec: ferryv1alpha1.ForeignClusterSpec{
			ClusterID:            "provider-1",
			Role:                 ferryv1alpha1.RoleProvider,
			APIServerURL:         "https://203.0.113.7:6443",
			CredentialsSecretRef: &ferryv1alpha1.SecretReference{Name: "provider-1-kubeconfig", Namespace: "ferry-system"},
		},
	}
}

func validResourceSlice(ns string) *ferryv1alpha1.ResourceSlice {
	return &ferryv1alpha1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "rs-", Namespace: ns},
		Spec: ferryv1alpha1.ResourceSliceSpec{
			ConsumerClusterID: "consumer-1",
			Resources:         corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		},
	}
}

func validVirtualNode(ns string) *ferryv1alpha1.VirtualNode {
	return &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "vn-", Namespace: ns},
		Spec: ferryv1alpha1.VirtualNodeSpec{
			ClusterID:           "provider-1",
			NodeName:            "ferry-provider-1",
			Resources:           corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("90")},
			NodeShapes:          []ferryv1alpha1.NodeShape{{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}, Count: 3}},
			KubeconfigSecretRef: corev1.LocalObjectReference{Name: "provider-1-kubeconfig"},
		},
	}
}

func validNamespaceOffloading(ns string) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{
			PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}},
			}}},
		},
	}
}

func validShadowPod(ns string) *ferryv1alpha1.ShadowPod {
	return &ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sp-", Namespace: ns},
		Spec: ferryv1alpha1.ShadowPodSpec{
			ConsumerClusterID: "consumer-1",
			Template: ferryv1alpha1.ShadowPodTemplate{
				Metadata: ferryv1alpha1.PodMetadata{Labels: map[string]string{"app": "web"}},
				Spec:     corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}

func validPeeringQuota(ns string) *ferryv1alpha1.PeeringQuota {
	return &ferryv1alpha1.PeeringQuota{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pq-", Namespace: ns},
		Spec: ferryv1alpha1.PeeringQuotaSpec{
			ConsumerClusterID: "consumer-1",
			Limits:            corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")},
		},
	}
}

func validNetworkConfig(ns string) *ferryv1alpha1.NetworkConfig {
	return &ferryv1alpha1.NetworkConfig{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nc-", Namespace: ns},
		Spec: ferryv1alpha1.NetworkConfigSpec{
			ClusterID: "provider-1",
			PodCIDR:   "10.244.0.0/16",
			Gateway:   &ferryv1alpha1.GatewayEndpoint{Address: "gw.example.com", Port: 51820, PublicKey: "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="},
		},
	}
}

var _ = Describe("ferry's API", Label("api"), Ordered, func() {
	var c *testbed.Cluster
	var ns string

	BeforeAll(func(ctx context.Context) {
		c = framework.StartClusters(ctx, testbed.Options{Name: "api"})[0]
		framework.ApplyManifests(ctx, c, "base")
		ns = framework.CreateNamespace(ctx, c, "api")
	})

	// build returns the valid object for a kind in the test namespace.
	build := map[string]func(string) client.Object{
		"ForeignCluster":      func(string) client.Object { return validForeignCluster() },
		"ResourceSlice":       func(ns string) client.Object { return validResourceSlice(ns) },
		"VirtualNode":         func(ns string) client.Object { return validVirtualNode(ns) },
		"NamespaceOffloading": func(ns string) client.Object { return validNamespaceOffloading(ns) },
		"ShadowPod":           func(ns string) client.Object { return validShadowPod(ns) },
		"PeeringQuota":        func(ns string) client.Object { return validPeeringQuota(ns) },
		"NetworkConfig":       func(ns string) client.Object { return validNetworkConfig(ns) },
	}

	DescribeTable("accepts a valid object of every kind",
		func(ctx context.Context, kind string) {
			obj := build[kind](ns)
			Expect(c.Client.Create(ctx, obj)).To(Succeed())
			Expect(c.Client.Delete(ctx, obj)).To(Succeed())
		},
		Entry(nil, "ForeignCluster"), Entry(nil, "ResourceSlice"), Entry(nil, "VirtualNode"),
		Entry(nil, "NamespaceOffloading"), Entry(nil, "ShadowPod"), Entry(nil, "PeeringQuota"), Entry(nil, "NetworkConfig"),
	)

	DescribeTable("rejects an invalid field with a message naming it",
		func(ctx context.Context, kind string, breakIt func(client.Object), wantField, wantMessage string) {
			obj := build[kind](ns)
			breakIt(obj)
			err := c.Client.Create(ctx, obj)
			if err == nil {
				_ = c.Client.Delete(ctx, obj)
			}
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantField))
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry("ForeignCluster: unknown role", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.Role = "Both" },
			"spec.role", `supported values: "Consumer", "Provider", "ConsumerAndProvider"`),
		Entry("ForeignCluster: cluster ID not a DNS label", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.ClusterID = "Provider_1" },
			"spec.clusterID", "should match"),
		Entry("ForeignCluster: provider without credentials", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.CredentialsSecretRef = nil },
			"spec.credentialsSecretRef", "credentialsSecretRef is required when role is Provider"),
		Entry("ForeignCluster: credentials outside ferry-system", "ForeignCluster",
			func(o client.Object) {
				o.(*ferryv1alpha1.ForeignCluster).Spec.CredentialsSecretRef.Namespace = "default"
			},
			"spec.credentialsSecretRef.namespace", "credentialsSecretRef.namespace must be ferry-system"),
		Entry("ForeignCluster: plain-HTTP API server", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.APIServerURL = "http://203.0.113.7:6443" },
			"spec.apiServerURL", "should match"),
		Entry("ForeignCluster: health-check timeout longer than its period", "ForeignCluster",
			func(o client.Object) {
				o.(*ferryv1alpha1.ForeignCluster).Spec.HealthCheck = ferryv1alpha1.HealthCheck{PeriodSeconds: 5, TimeoutSeconds: 10}
			},
			"spec.healthCheck.timeoutSeconds", "timeoutSeconds must not exceed periodSeconds"),
		Entry("ForeignCluster: fencing lease duration under 4 s", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.Fencing.LeaseDurationSeconds = 3 },
			"spec.fencing.leaseDurationSeconds", "greater than or equal to 4"),
		Entry("ForeignCluster: fencing margin over a day", "ForeignCluster",
			func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.Fencing.SafetyMarginSeconds = 86401 },
			"spec.fencing.safetyMarginSeconds", "less than or equal to 86400"),
		Entry("ResourceSlice: consumer cluster ID missing", "ResourceSlice",
			func(o client.Object) { o.(*ferryv1alpha1.ResourceSlice).Spec.ConsumerClusterID = "" },
			"spec.consumerClusterID", ""),
		Entry("VirtualNode: node name not a DNS subdomain", "VirtualNode",
			func(o client.Object) { o.(*ferryv1alpha1.VirtualNode).Spec.NodeName = "Virtual_Node" },
			"spec.nodeName", "should match"),
		Entry("VirtualNode: node shape counting no node", "VirtualNode",
			func(o client.Object) { o.(*ferryv1alpha1.VirtualNode).Spec.NodeShapes[0].Count = 0 },
			"spec.nodeShapes[0].count", "should be greater than or equal to 1"),
		Entry("VirtualNode: node shape without resources", "VirtualNode",
			func(o client.Object) {
				o.(*ferryv1alpha1.VirtualNode).Spec.NodeShapes[0].Resources = corev1.ResourceList{}
			},
			"spec.nodeShapes[0].resources", "resources must name at least one resource"),
		Entry("NamespaceOffloading: unknown pod offloading strategy", "NamespaceOffloading",
			func(o client.Object) {
				o.(*ferryv1alpha1.NamespaceOffloading).Spec.PodOffloadingStrategy = "Everywhere"
			},
			"spec.podOffloadingStrategy", `supported values: "Local", "Remote", "LocalAndRemote"`),
		Entry("NamespaceOffloading: SelectedName without a name", "NamespaceOffloading",
			func(o client.Object) {
				o.(*ferryv1alpha1.NamespaceOffloading).Spec.NamespaceMappingStrategy = ferryv1alpha1.NamespaceMappingSelectedName
			},
			"spec.remoteNamespaceName", "remoteNamespaceName is required when namespaceMappingStrategy is SelectedName"),
		Entry("NamespaceOffloading: a placement preference without LocalAndRemote", "NamespaceOffloading",
			func(o client.Object) {
				no := o.(*ferryv1alpha1.NamespaceOffloading)
				no.Spec.PodOffloadingStrategy = ferryv1alpha1.PodOffloadingRemote
				no.Spec.PlacementPreference = ferryv1alpha1.PlacementPreferenceLocalFirst
			},
			"spec.placementPreference", "placementPreference LocalFirst or RemoteFirst needs podOffloadingStrategy LocalAndRemote"),
		Entry("NamespaceOffloading: unknown placement preference", "NamespaceOffloading",
			func(o client.Object) {
				o.(*ferryv1alpha1.NamespaceOffloading).Spec.PlacementPreference = "Anywhere"
			},
			"spec.placementPreference", `supported values: "None", "LocalFirst", "RemoteFirst"`),
		Entry("NamespaceOffloading: remote name with another strategy", "NamespaceOffloading",
			func(o client.Object) { o.(*ferryv1alpha1.NamespaceOffloading).Spec.RemoteNamespaceName = "elsewhere" },
			"spec.remoteNamespaceName", "remoteNamespaceName may only be set when namespaceMappingStrategy is SelectedName"),
		Entry("NamespaceOffloading: remote name not a namespace name", "NamespaceOffloading",
			func(o client.Object) {
				no := o.(*ferryv1alpha1.NamespaceOffloading)
				no.Spec.NamespaceMappingStrategy = ferryv1alpha1.NamespaceMappingSelectedName
				no.Spec.RemoteNamespaceName = "Not.A.Namespace"
			},
			"spec.remoteNamespaceName", "should match"),
		Entry("NamespaceOffloading: a second one, under another name", "NamespaceOffloading",
			func(o client.Object) { o.SetName("more-offloading") },
			"metadata.name", "metadata.name must be 'offloading'"),
		Entry("ShadowPod: a pod without containers", "ShadowPod",
			func(o client.Object) { o.(*ferryv1alpha1.ShadowPod).Spec.Template.Spec.Containers = nil },
			"spec.template.spec.containers", "Required value"),
		Entry("ShadowPod: consumer cluster ID not a DNS label", "ShadowPod",
			func(o client.Object) { o.(*ferryv1alpha1.ShadowPod).Spec.ConsumerClusterID = "-consumer" },
			"spec.consumerClusterID", "should match"),
		Entry("PeeringQuota: no limits at all", "PeeringQuota",
			func(o client.Object) { o.(*ferryv1alpha1.PeeringQuota).Spec.Limits = corev1.ResourceList{} },
			"spec.limits", "limits must name at least one resource"),
		Entry("NetworkConfig: pod CIDR that is no CIDR", "NetworkConfig",
			func(o client.Object) { o.(*ferryv1alpha1.NetworkConfig).Spec.PodCIDR = "10.244.0.0" },
			"spec.podCIDR", "podCIDR must be a CIDR in canonical form"),
		Entry("NetworkConfig: pod CIDR with host bits set", "NetworkConfig",
			func(o client.Object) { o.(*ferryv1alpha1.NetworkConfig).Spec.PodCIDR = "10.244.1.7/16" },
			"spec.podCIDR", "podCIDR must be a CIDR in canonical form"),
		Entry("NetworkConfig: gateway port out of range", "NetworkConfig",
			func(o client.Object) { o.(*ferryv1alpha1.NetworkConfig).Spec.Gateway.Port = 70000 },
			"spec.gateway.port", "should be less than or equal to 65535"),
		Entry("NetworkConfig: public key that is no WireGuard key", "NetworkConfig",
			func(o client.Object) { o.(*ferryv1alpha1.NetworkConfig).Spec.Gateway.PublicKey = "not-a-key" },
			"spec.gateway.publicKey", "should match"),
	)

	DescribeTable("keeps identities immutable",
		func(ctx context.Context, kind string, change func(client.Object), wantMessage string) {
			obj := build[kind](ns)
			Expect(c.Client.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(c.Client.Delete(ctx, obj)).To(Succeed()) })
			change(obj)
			err := c.Client.Update(ctx, obj)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantMessage))
		},
		Entry(nil, "ForeignCluster", func(o client.Object) { o.(*ferryv1alpha1.ForeignCluster).Spec.ClusterID = "other" }, "clusterID is immutable"),
		Entry(nil, "ShadowPod", func(o client.Object) { o.(*ferryv1alpha1.ShadowPod).Spec.ConsumerClusterID = "other" }, "consumerClusterID is immutable"),
		Entry(nil, "VirtualNode", func(o client.Object) { o.(*ferryv1alpha1.VirtualNode).Spec.NodeName = "other" }, "nodeName is immutable"),
	)

	It("fills in defaults", func(ctx context.Context) {
		fc := validForeignCluster()
		Expect(c.Client.Create(ctx, fc)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(c.Client.Delete(ctx, fc)).To(Succeed()) })
		Expect(fc.Spec.HealthCheck).To(Equal(ferryv1alpha1.HealthCheck{PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}))
		Expect(fc.Spec.Fencing).To(Equal(ferryv1alpha1.Fencing{SelfFencing: ptr.To(true), LeaseDurationSeconds: 300, SafetyMarginSeconds: 30}))

		no := validNamespaceOffloading(ns)
		no.Spec = ferryv1alpha1.NamespaceOffloadingSpec{}
		Expect(c.Client.Create(ctx, no)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(c.Client.Delete(ctx, no)).To(Succeed()) })
		Expect(no.Spec.NamespaceMappingStrategy).To(Equal(ferryv1alpha1.NamespaceMappingDefaultName))
		Expect(no.Spec.PodOffloadingStrategy).To(Equal(ferryv1alpha1.PodOffloadingLocalAndRemote))
	})

	It("prints useful columns in kubectl get", func(ctx context.Context) {
		pq := validPeeringQuota(ns)
		Expect(c.Client.Create(ctx, pq)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(c.Client.Delete(ctx, pq)).To(Succeed()) })
		out, err := c.Kubectl(ctx, "get", "peeringquotas", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "CONSUMER", "CPU", "LIMIT", "CPU", "USED", "MEMORY", "LIMIT", "MEMORY", "USED", "AGE"}))
		Expect(out).To(ContainSubstring("consumer-1"))

		out, err = c.Kubectl(ctx, "get", "ferry", "-A")
		Expect(err).NotTo(HaveOccurred(), "the 'ferry' category lists every kind")
		Expect(out).To(ContainSubstring("peeringquota.ferry.io/" + pq.Name))
	})
})
