package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
)

var _ = Describe("Reflection", Label("reflection"), Ordered, func() {
	const (
		timeout = 30 * time.Second
		polling = 200 * time.Millisecond
		// resync is short, so the quiet checks below (3s) span a resync:
		// an object compared again and found equal must not be written.
		resync = 2 * time.Second
		quiet  = 3 * time.Second
		// endpointSliceManager is the managed-by label of ferry's slices.
		endpointSliceManager = "virtual-kubelet.ferry.io"
	)
	var consumer, provider *testbed.Cluster
	var ns, twin string
	virtualNode := peering.VirtualNodeName("provider")

	eventually := func(ctx context.Context, f func(g Gomega)) AsyncAssertion {
		return Eventually(f).WithContext(ctx).WithTimeout(timeout).WithPolling(polling)
	}
	// getRemote reads the copy named name in the twin namespace into obj.
	getRemote := func(ctx context.Context, g Gomega, name string, obj client.Object) {
		g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, obj)).To(Succeed(), "%T %s/%s on the provider", obj, twin, name)
	}
	expectNoRemote := func(ctx context.Context, g Gomega, name string, obj client.Object) {
		err := provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s/%s is on the provider (err: %v)", obj, twin, name, err)
	}
	expectOrigin := func(g Gomega, obj client.Object) {
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginCluster, "consumer"))
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginNamespace, ns))
	}
	// expectRemoteQuiet checks that the copy named name is not written
	// for a while (no write loop between ferry and the provider).
	expectRemoteQuiet := func(ctx context.Context, name string, obj client.Object) {
		GinkgoHelper()
		Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, obj)).To(Succeed())
		rv := obj.GetResourceVersion()
		Consistently(func(g Gomega) string {
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, obj)).To(Succeed())
			return obj.GetResourceVersion()
		}).WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Equal(rv), "%T %s/%s is written over and over", obj, twin, name)
	}
	patchLocal := func(ctx context.Context, obj client.Object, patch string) {
		GinkgoHelper()
		Expect(consumer.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	}
	patchRemote := func(ctx context.Context, obj client.Object, patch string) {
		GinkgoHelper()
		Expect(provider.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	}
	localPod := func(ctx context.Context, g Gomega, app string) *corev1.Pod {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		return &pods.Items[0]
	}

	// scrape reads the virtual kubelet's metrics from its kubelet API, as
	// the API server would (see expectKubeletAPI), by series.
	scrape := func(ctx context.Context) map[string]float64 {
		GinkgoHelper()
		var node corev1.Node
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
		url := fmt.Sprintf("https://%s:%d/metrics", node.Status.Addresses[0].Address, node.Status.DaemonEndpoints.KubeletEndpoint.Port)
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(consumer.Config.CAData)).To(BeTrue())
		cert, err := tls.LoadX509KeyPair(filepath.Join(consumer.Dir, "apiserver-kubelet-client.crt"), filepath.Join(consumer.Dir, "apiserver-kubelet-client.key"))
		Expect(err).NotTo(HaveOccurred())
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
		series := map[string]float64{}
		// The serving certificate may still be on its way.
		Eventually(func(g Gomega) {
			resp, err := hc.Get(url)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
			for line := range strings.SplitSeq(string(body), "\n") {
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				i := strings.LastIndexByte(line, ' ')
				v, err := strconv.ParseFloat(line[i+1:], 64)
				g.Expect(err).NotTo(HaveOccurred(), line)
				series[line[:i]] = v
			}
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(polling).Should(Succeed())
		return series
	}
	// writes is the reflection's write counters, events aside (they are
	// the provider's events coming back, written to the consumer).
	writes := func(series map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range series {
			if strings.HasPrefix(k, "ferry_reflection_writes_total{") && !strings.Contains(k, `kind="events"`) {
				out[k] = v
			}
		}
		return out
	}

	// A failed spec shows what the reflection reported: its warnings on
	// the local objects and its error counters.
	AfterEach(func(ctx context.Context) {
		if !CurrentSpecReport().Failed() || consumer == nil || ns == "" {
			return
		}
		var events corev1.EventList
		if err := consumer.Client.List(ctx, &events, client.InNamespace(ns)); err == nil {
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning {
					GinkgoWriter.Printf("event %s %s/%s: %s: %s (x%d)\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
				}
			}
		}
		for k, v := range scrape(ctx) {
			if strings.HasPrefix(k, "ferry_reflection_") && !strings.Contains(k, "_bucket{") {
				GinkgoWriter.Printf("metric %s %g\n", k, v)
			}
		}
	})

	BeforeAll(func(ctx context.Context) {
		consumer, provider = startPeeredForReflection(ctx, 2, reflection.Options{
			ResyncPeriod: resync,
			// Ingresses are opt-in: exposing a consumer's Ingress on the
			// provider is the provider's business.
			Policies:       map[reflection.Kind]reflection.Policy{reflection.Ingresses: reflection.AllowList},
			IngressClasses: map[string]string{"nginx": "provider-nginx"},
			StorageClasses: map[string]string{"fast": "provider-fast"},
		}, nil)
		ns = framework.CreateNamespace(ctx, consumer, "shop")
		twin = framework.OffloadNamespace(ctx, consumer, ns, "provider")
		// Pods are refused until the namespace's default service account
		// exists; the root CA ConfigMaps are published on both sides.
		eventually(ctx, func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})).To(Succeed())
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &corev1.ConfigMap{})).To(Succeed())
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "kube-root-ca.crt"}, &corev1.ConfigMap{})).To(Succeed())
		}).Should(Succeed())
	})

	It("reflects a ConfigMap, follows its updates, repairs drift, honours skip-reflection and leaves the provider's root CA alone", func(ctx context.Context) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"app": "shop"}, Annotations: map[string]string{"team": "checkout"}},
			Data:       map[string]string{"color": "blue"},
		}
		Expect(consumer.Client.Create(ctx, cm)).To(Succeed())
		var remote corev1.ConfigMap
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "settings", &remote)
			expectOrigin(g, &remote)
			g.Expect(remote.Labels).To(HaveKeyWithValue("app", "shop"))
			g.Expect(remote.Annotations).To(HaveKeyWithValue("team", "checkout"))
			g.Expect(remote.Data).To(Equal(map[string]string{"color": "blue"}))
		}).Should(Succeed())

		By("updating the local data")
		patchLocal(ctx, cm, `{"data":{"color":"green","size":"L"}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "settings", &remote)
			g.Expect(remote.Data).To(Equal(map[string]string{"color": "green", "size": "L"}))
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "settings", &corev1.ConfigMap{})

		By("editing the copy on the provider")
		patchRemote(ctx, &remote, `{"data":{"color":"red"},"metadata":{"labels":{"app":"hijacked"}}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "settings", &remote)
			g.Expect(remote.Data).To(Equal(map[string]string{"color": "green", "size": "L"}))
			g.Expect(remote.Labels).To(HaveKeyWithValue("app", "shop"))
		}).Should(Succeed())

		By("deleting the copy on the provider")
		oldUID := remote.UID
		Expect(provider.Client.Delete(ctx, &remote)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "settings", &remote)
			g.Expect(remote.UID).NotTo(Equal(oldUID))
			g.Expect(remote.Data).To(Equal(map[string]string{"color": "green", "size": "L"}))
		}).Should(Succeed())

		By("the twin namespace's kube-root-ca.crt is the provider's")
		var localCA, remoteCA corev1.ConfigMap
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &localCA)).To(Succeed())
		Consistently(func(g Gomega) {
			getRemote(ctx, g, "kube-root-ca.crt", &remoteCA)
			g.Expect(remoteCA.Data["ca.crt"]).NotTo(BeEmpty())
			g.Expect(remoteCA.Data["ca.crt"]).NotTo(Equal(localCA.Data["ca.crt"]))
			g.Expect(remoteCA.Labels).NotTo(HaveKey(ferryv1alpha1.LabelOriginCluster))
		}).WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Succeed())

		By("annotating it ferry.io/skip-reflection")
		patchLocal(ctx, cm, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationSkipReflection+`":"true"}}}`)
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, "settings", &corev1.ConfigMap{}) }).Should(Succeed())
		Consistently(func(g Gomega) { expectNoRemote(ctx, g, "settings", &corev1.ConfigMap{}) }).
			WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Succeed(), "a skipped object stays away, resyncs included")
		patchLocal(ctx, cm, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationSkipReflection+`":null}}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "settings", &remote)
			g.Expect(remote.Data).To(Equal(map[string]string{"color": "green", "size": "L"}))
			g.Expect(remote.Annotations).NotTo(HaveKey(ferryv1alpha1.AnnotationSkipReflection))
		}).Should(Succeed())

		By("deleting it locally")
		Expect(consumer.Client.Delete(ctx, cm)).To(Succeed())
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, "settings", &corev1.ConfigMap{}) }).Should(Succeed())
	})

	It("reflects a Secret, follows its updates, repairs drift, and never reflects a service-account token Secret", func(ctx context.Context) {
		legacy := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Namespace: ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}
		Expect(consumer.Client.Create(ctx, legacy)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(legacy), legacy)).To(Succeed())
			g.Expect(legacy.Data).To(HaveKey("token"), "the consumer's token controller filled it")
		}).Should(Succeed())
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Type:       corev1.SecretTypeBasicAuth,
			StringData: map[string]string{"username": "admin", "password": "s3cret"},
		}
		Expect(consumer.Client.Create(ctx, secret)).To(Succeed())
		var remote corev1.Secret
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "db", &remote)
			expectOrigin(g, &remote)
			g.Expect(remote.Type).To(Equal(corev1.SecretTypeBasicAuth))
			g.Expect(remote.Data).To(Equal(map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret")}))
		}).Should(Succeed())
		Consistently(func(g Gomega) { expectNoRemote(ctx, g, "legacy-token", &corev1.Secret{}) }).
			WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Succeed(), "a consumer service-account token must not reach the provider")

		By("updating the local data")
		patchLocal(ctx, secret, `{"stringData":{"password":"rotated"}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "db", &remote)
			g.Expect(remote.Data).To(Equal(map[string][]byte{"username": []byte("admin"), "password": []byte("rotated")}))
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "db", &corev1.Secret{})

		By("editing and deleting the copy on the provider")
		patchRemote(ctx, &remote, `{"data":{"password":"`+"aGFja2Vk"+`","extra":"eA=="}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "db", &remote)
			g.Expect(remote.Data).To(Equal(map[string][]byte{"username": []byte("admin"), "password": []byte("rotated")}))
		}).Should(Succeed())
		oldUID := remote.UID
		Expect(provider.Client.Delete(ctx, &remote)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "db", &remote)
			g.Expect(remote.UID).NotTo(Equal(oldUID))
			g.Expect(remote.Data).To(HaveKeyWithValue("password", []byte("rotated")))
		}).Should(Succeed())

		By("deleting it locally")
		Expect(consumer.Client.Delete(ctx, secret)).To(Succeed())
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, "db", &corev1.Secret{}) }).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, legacy)).To(Succeed())
	})

	It("reflects Services with their selectors, leaving cluster IPs and node ports to the provider, without fighting over them", func(ctx context.Context) {
		// The provider cannot give these to the copies: a copy with one of
		// them would be the consumer's, copied.
		const localIP, localNodePort = "10.96.200.200", int32(30080)
		reserved := framework.CreateNamespace(ctx, provider, "reserved")
		Expect(provider.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: reserved},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: localIP,
				Ports: []corev1.ServicePort{{Port: 80, NodePort: localNodePort}}},
		})).To(Succeed())

		api := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: localIP, Selector: map[string]string{"app": "api"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		Expect(consumer.Client.Create(ctx, api)).To(Succeed())
		var remoteAPI corev1.Service
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "api", &remoteAPI)
			expectOrigin(g, &remoteAPI)
			g.Expect(remoteAPI.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			g.Expect(remoteAPI.Spec.Selector).To(Equal(map[string]string{"app": "api"}))
			g.Expect(remoteAPI.Spec.ClusterIP).NotTo(BeEmpty())
			g.Expect(remoteAPI.Spec.ClusterIP).NotTo(Equal(localIP), "the provider assigns the cluster IP")
			g.Expect(remoteAPI.Spec.Ports).To(ConsistOf(And(HaveField("Name", "http"), HaveField("Port", int32(80)), HaveField("TargetPort", intstr.FromInt32(8080)))))
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "api", &corev1.Service{})

		By("a NodePort Service gets the provider's node ports")
		edge := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "edge"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: localNodePort}}},
		}
		Expect(consumer.Client.Create(ctx, edge)).To(Succeed())
		var remoteEdge corev1.Service
		var nodePort int32
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "edge", &remoteEdge)
			g.Expect(remoteEdge.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
			g.Expect(remoteEdge.Spec.Ports).To(HaveLen(1))
			nodePort = remoteEdge.Spec.Ports[0].NodePort
			g.Expect(nodePort).NotTo(BeZero())
			g.Expect(nodePort).NotTo(Equal(localNodePort), "the provider assigns the node port")
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "edge", &corev1.Service{})

		By("renaming the local port and changing its target port")
		patchLocal(ctx, edge, `{"spec":{"ports":[{"name":"web","port":80,"targetPort":9090,"nodePort":30080,"protocol":"TCP"}]}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "edge", &remoteEdge)
			g.Expect(remoteEdge.Spec.Ports).To(ConsistOf(And(HaveField("Name", "web"), HaveField("Port", int32(80)),
				HaveField("TargetPort", intstr.FromInt32(9090)), HaveField("NodePort", nodePort))), "the provider's node port is kept")
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "edge", &corev1.Service{})

		By("changing the selector of the copy on the provider")
		patchRemote(ctx, &remoteAPI, `{"spec":{"selector":{"app":"intruder"}}}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "api", &remoteAPI)
			g.Expect(remoteAPI.Spec.Selector).To(Equal(map[string]string{"app": "api"}))
		}).Should(Succeed())

		By("deleting them locally")
		Expect(consumer.Client.Delete(ctx, api)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, edge)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			expectNoRemote(ctx, g, "api", &corev1.Service{})
			expectNoRemote(ctx, g, "edge", &corev1.Service{})
		}).Should(Succeed())
	})

	It("reflects a NetworkPolicy translated for the provider: ipBlocks of the consumer pods its peers select follow them coming and going", Label("netpol"), func(ctx context.Context) {
		reflectNetworkPolicy(ctx, consumer, provider, ns, twin)
	})

	It("reflects a Service's EndpointSlice with the local endpoints only, translated to where the provider reaches them, marked as ferry's", func(ctx context.Context) {
		// Both clusters use 10.244.0.0/16: the provider reaches the
		// consumer's pods at the range its IPAM gave them.
		network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "provider")
		translated := network.ConsumerPodIP("10.244.7.7")
		Expect(translated).NotTo(HavePrefix("10.244."), "the provider's own pod CIDR cannot stand for the consumer's pods")
		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes)).To(Succeed())
		localNode := ""
		for _, n := range nodes.Items {
			if n.Name != virtualNode {
				localNode = n.Name
			}
		}
		Expect(localNode).NotTo(BeEmpty())
		// No selector: the consumer's EndpointSlice controller leaves the
		// Service's slices to whoever writes them.
		backend := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		Expect(consumer.Client.Create(ctx, backend)).To(Succeed())
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "backend-manual", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "backend"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.7.7"}, NodeName: &localNode, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}},
				{Addresses: []string{"10.244.9.9"}, NodeName: &virtualNode, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}},
			},
		}
		Expect(consumer.Client.Create(ctx, slice)).To(Succeed())
		var remote discoveryv1.EndpointSlice
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "backend", &corev1.Service{})
			getRemote(ctx, g, "backend-manual", &remote)
			expectOrigin(g, &remote)
			g.Expect(remote.Labels).To(HaveKeyWithValue(discoveryv1.LabelManagedBy, endpointSliceManager))
			g.Expect(remote.Labels).To(HaveKeyWithValue(discoveryv1.LabelServiceName, "backend"))
			g.Expect(remote.AddressType).To(Equal(discoveryv1.AddressTypeIPv4))
			g.Expect(remote.Endpoints).To(ConsistOf(And(HaveField("Addresses", []string{translated}), HaveField("NodeName", BeNil()))),
				"the endpoint on the virtual node is the provider's own")
			g.Expect(remote.Ports).To(ConsistOf(HaveField("Port", HaveValue(Equal(int32(8080))))))
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "backend-manual", &discoveryv1.EndpointSlice{})

		By("the local endpoint going away")
		patchLocal(ctx, slice, `{"endpoints":[{"addresses":["10.244.9.9"],"nodeName":"`+virtualNode+`","conditions":{"ready":true}}]}`)
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "backend-manual", &remote)
			g.Expect(remote.Endpoints).To(BeEmpty())
		}).Should(Succeed())

		Expect(consumer.Client.Delete(ctx, slice)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, backend)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			expectNoRemote(ctx, g, "backend-manual", &discoveryv1.EndpointSlice{})
			expectNoRemote(ctx, g, "backend", &corev1.Service{})
		}).Should(Succeed())
	})

	ingress := func(name, class string, annotations map[string]string) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		if class != "" {
			ing.Spec.IngressClassName = &class
		}
		return ing
	}
	allowed := map[string]string{ferryv1alpha1.AnnotationAllowReflection: "true"}

	It("maps an Ingress's class through the class map and drops an unmapped one", func(ctx context.Context) {
		mapped := ingress("shop-nginx", "nginx", allowed)
		unmapped := ingress("shop-traefik", "traefik", allowed)
		Expect(consumer.Client.Create(ctx, mapped)).To(Succeed())
		Expect(consumer.Client.Create(ctx, unmapped)).To(Succeed())
		var remote networkingv1.Ingress
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, "shop-nginx", &remote)
			expectOrigin(g, &remote)
			g.Expect(remote.Spec.IngressClassName).To(HaveValue(Equal("provider-nginx")))
			g.Expect(remote.Annotations).NotTo(HaveKey(ferryv1alpha1.AnnotationAllowReflection))
			g.Expect(remote.Spec.DefaultBackend.Service.Name).To(Equal("web"))
			getRemote(ctx, g, "shop-traefik", &remote)
			g.Expect(remote.Spec.IngressClassName).To(BeNil(), "the provider's default class serves an unmapped one")
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "shop-nginx", &networkingv1.Ingress{})
		expectRemoteQuiet(ctx, "shop-traefik", &networkingv1.Ingress{})
		Expect(consumer.Client.Delete(ctx, mapped)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, unmapped)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			expectNoRemote(ctx, g, "shop-nginx", &networkingv1.Ingress{})
			expectNoRemote(ctx, g, "shop-traefik", &networkingv1.Ingress{})
		}).Should(Succeed())
	})

	It("reflects only the Ingresses allowed when the kind's policy is AllowList; skip-reflection still wins", func(ctx context.Context) {
		private := ingress("private", "nginx", nil)
		Expect(consumer.Client.Create(ctx, private)).To(Succeed())
		Consistently(func(g Gomega) { expectNoRemote(ctx, g, "private", &networkingv1.Ingress{}) }).
			WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Succeed(), "not allowed: not reflected")

		patchLocal(ctx, private, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationAllowReflection+`":"true"}}}`)
		eventually(ctx, func(g Gomega) { getRemote(ctx, g, "private", &networkingv1.Ingress{}) }).Should(Succeed())

		patchLocal(ctx, private, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationSkipReflection+`":"true"}}}`)
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, "private", &networkingv1.Ingress{}) }).Should(Succeed())
		patchLocal(ctx, private, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationSkipReflection+`":null}}}`)
		eventually(ctx, func(g Gomega) { getRemote(ctx, g, "private", &networkingv1.Ingress{}) }).Should(Succeed())

		By("withdrawing the permission")
		patchLocal(ctx, private, `{"metadata":{"annotations":{"`+ferryv1alpha1.AnnotationAllowReflection+`":null}}}`)
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, "private", &networkingv1.Ingress{}) }).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, private)).To(Succeed())
	})

	It("reflects a ServiceAccount and hands its offloaded pods a working consumer token, for as long as one uses it", func(ctx context.Context) {
		Expect(consumer.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}})).To(Succeed())
		eventually(ctx, func(g Gomega) {
			var sa corev1.ServiceAccount
			getRemote(ctx, g, "app", &sa)
			expectOrigin(g, &sa)
			g.Expect(sa.AutomountServiceAccountToken).To(HaveValue(BeFalse()), "the provider mounts no provider token for it")
		}).Should(Succeed())
		tokenSecret := offloading.ServiceAccountTokenSecret("app")
		expectNoRemote(ctx, Default, tokenSecret, &corev1.Secret{})

		By("running a pod as it")
		spec := remotePodSpec()
		spec.ServiceAccountName = "app"
		d := deployment(ns, "tokened", 1, spec)
		Expect(consumer.Client.Create(ctx, d)).To(Succeed())
		var localCA corev1.ConfigMap
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}, &localCA)).To(Succeed())
		var secret corev1.Secret
		eventually(ctx, func(g Gomega) {
			getRemote(ctx, g, tokenSecret, &secret)
			expectOrigin(g, &secret)
			g.Expect(secret.Data).To(HaveKey("token"))
			g.Expect(string(secret.Data["ca.crt"])).To(Equal(localCA.Data["ca.crt"]), "the consumer's CA")
			g.Expect(string(secret.Data["namespace"])).To(Equal(ns), "the consumer namespace")
		}).Should(Succeed())

		By("the token authenticates to the consumer as the service account, over the consumer's CA")
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: consumer.Config.Host, BearerToken: string(secret.Data["token"]),
			TLSClientConfig: rest.TLSClientConfig{CAData: secret.Data["ca.crt"]}})
		Expect(err).NotTo(HaveOccurred())
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + ns + ":app"))

		By("the offloaded pod mounts it where the token volume was")
		pod := localPod(ctx, Default, "tokened")
		Expect(pod.Spec.Volumes).To(ContainElement(And(HaveField("Name", HavePrefix("kube-api-access-")), HaveField("Projected", Not(BeNil())))),
			"the consumer's admission added the projected token volume")
		tokenVolume := And(HaveField("Name", HavePrefix("kube-api-access-")), HaveField("Projected", BeNil()),
			HaveField("Secret", HaveField("SecretName", tokenSecret)))
		eventually(ctx, func(g Gomega) {
			var sp ferryv1alpha1.ShadowPod
			getRemote(ctx, g, pod.Name, &sp)
			g.Expect(sp.Spec.Template.Spec.Volumes).To(ContainElement(tokenVolume))
			var remotePod corev1.Pod
			getRemote(ctx, g, pod.Name, &remotePod)
			g.Expect(remotePod.Spec.Volumes).To(ContainElement(tokenVolume))
			g.Expect(remotePod.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		}).Should(Succeed())
		expectRemoteQuiet(ctx, tokenSecret, &corev1.Secret{})

		By("no pod using it any more")
		patchLocal(ctx, d, `{"spec":{"replicas":0}}`)
		eventually(ctx, func(g Gomega) { expectNoRemote(ctx, g, tokenSecret, &corev1.Secret{}) }).Should(Succeed())
		eventually(ctx, func(g Gomega) { getRemote(ctx, g, "app", &corev1.ServiceAccount{}) }).Should(Succeed(), "the service account stays")

		By("the default service account is the provider's own, left alone quietly")
		var def corev1.ServiceAccount
		getRemote(ctx, Default, "default", &def)
		Expect(def.Labels).NotTo(HaveKey(ferryv1alpha1.LabelOriginCluster))
		var events corev1.EventList
		Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(ContainElement(HaveField("InvolvedObject.Kind", "ServiceAccount")), "no warning about a service account")
	})

	It("reflects a PersistentVolumeClaim with its storage class mapped, and lets the provider annotate it without a fight", func(ctx context.Context) {
		// The provider's class, with a provisioner nobody runs: the PV
		// controller annotates the copy and waits.
		class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "provider-fast"}, Provisioner: "example.com/nowhere",
			VolumeBindingMode: new(storagev1.VolumeBindingImmediate)}
		Expect(provider.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(provider.Client.Delete(ctx, class)).To(Succeed()) })
		pvc := func(name, class string) *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: &class,
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
		}
		data, scratch := pvc("data", "fast"), pvc("scratch", "slow")
		Expect(consumer.Client.Create(ctx, data)).To(Succeed())
		Expect(consumer.Client.Create(ctx, scratch)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			var remote corev1.PersistentVolumeClaim
			getRemote(ctx, g, "data", &remote)
			expectOrigin(g, &remote)
			g.Expect(remote.Spec.StorageClassName).To(HaveValue(Equal("provider-fast")))
			g.Expect(remote.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
			g.Expect(remote.Annotations).To(HaveKeyWithValue("volume.kubernetes.io/storage-provisioner", "example.com/nowhere"),
				"the provider's PV controller annotated it")
			getRemote(ctx, g, "scratch", &remote)
			g.Expect(remote.Spec.StorageClassName).To(BeNil(), "an unmapped class is dropped")
		}).Should(Succeed())
		expectRemoteQuiet(ctx, "data", &corev1.PersistentVolumeClaim{})

		By("the provider's events about the copy come back about the local claim")
		eventually(ctx, func(g Gomega) {
			var events corev1.EventList
			g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns), client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: "provider"})).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Kind", "PersistentVolumeClaim"), HaveField("InvolvedObject.Name", "data"),
				HaveField("InvolvedObject.Namespace", ns), HaveField("InvolvedObject.UID", data.UID),
				HaveField("Reason", "ExternalProvisioning"))))
		}).Should(Succeed())

		Expect(consumer.Client.Delete(ctx, data)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, scratch)).To(Succeed())
		eventually(ctx, func(g Gomega) {
			expectNoRemote(ctx, g, "data", &corev1.PersistentVolumeClaim{})
			expectNoRemote(ctx, g, "scratch", &corev1.PersistentVolumeClaim{})
		}).Should(Succeed())
	})

	It("brings the provider's events about reflected objects and offloaded pods back, about the local objects", func(ctx context.Context) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "evented", Namespace: ns}, Data: map[string]string{"k": "v"}}
		Expect(consumer.Client.Create(ctx, cm)).To(Succeed())
		var remote corev1.ConfigMap
		eventually(ctx, func(g Gomega) { getRemote(ctx, g, "evented", &remote) }).Should(Succeed())

		now := metav1.Now()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "evented.e2e", Namespace: twin},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: twin, Name: "evented", UID: remote.UID},
			Reason:         "ProviderNoticed", Message: "seen on the provider", Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: "e2e"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		Expect(provider.Client.Create(ctx, ev)).To(Succeed())
		var local corev1.Event
		eventually(ctx, func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evented.e2e"}, &local)).To(Succeed())
			g.Expect(local.InvolvedObject).To(And(HaveField("Kind", "ConfigMap"), HaveField("Namespace", ns),
				HaveField("Name", "evented"), HaveField("UID", cm.UID)))
			g.Expect(local.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginCluster, "provider"))
			g.Expect(local.Reason).To(Equal("ProviderNoticed"))
			g.Expect(local.Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(local.Message).To(Equal("seen on the provider"))
			g.Expect(local.Source.Host).To(Equal(virtualNode))
		}).Should(Succeed())

		By("the event repeating on the provider")
		patchRemote(ctx, ev, `{"count":2,"message":"seen twice on the provider","lastTimestamp":"`+time.Now().Add(time.Second).UTC().Format(time.RFC3339)+`"}`)
		eventually(ctx, func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evented.e2e"}, &local)).To(Succeed())
			g.Expect(local.Count).To(Equal(int32(2)))
			g.Expect(local.Message).To(Equal("seen twice on the provider"))
		}).Should(Succeed())

		By("an offloaded pod's events, but for the provider scheduler's placement")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evented-pod", Namespace: ns, Labels: map[string]string{"app": "evented-pod"}}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		var remotePod corev1.Pod
		eventually(ctx, func(g Gomega) {
			var pods corev1.PodList
			g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin), client.MatchingLabels{"app": "evented-pod"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.NodeName).NotTo(BeEmpty())
			remotePod = pods.Items[0]
		}).Should(Succeed())
		podEvent := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "evented-pod.e2e", Namespace: twin},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: twin, Name: remotePod.Name, UID: remotePod.UID, FieldPath: "spec.containers{app}"},
			Reason:         "Pulled", Message: "image pulled on the provider", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "kubelet", Host: remotePod.Spec.NodeName}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		Expect(provider.Client.Create(ctx, podEvent)).To(Succeed())
		podEvents := func(g Gomega) []corev1.Event {
			var events corev1.EventList
			g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns), client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: "provider"})).To(Succeed())
			var out []corev1.Event
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == "evented-pod" {
					out = append(out, e)
				}
			}
			return out
		}
		eventually(ctx, func(g Gomega) {
			g.Expect(podEvents(g)).To(ContainElement(And(HaveField("InvolvedObject.UID", pod.UID), HaveField("Reason", "Pulled"),
				HaveField("InvolvedObject.FieldPath", "spec.containers{app}"), HaveField("Source.Host", virtualNode))))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(podEvents(g)).NotTo(ContainElement(HaveField("Reason", "Scheduled")), "the provider scheduler's placement stays there")
		}).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Expect(consumer.Client.Delete(ctx, cm)).To(Succeed())
	})

	It("runs an app using a ConfigMap, a Secret and a Service remotely, its Service's endpoints the provider's", func(ctx context.Context) {
		Expect(consumer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns},
			Data: map[string]string{"GREETING": "hello"}})).To(Succeed())
		Expect(consumer.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: ns},
			StringData: map[string]string{"API_KEY": "k3y"}})).To(Succeed())
		Expect(consumer.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}})).To(Succeed())
		spec := remotePodSpec()
		spec.Volumes = []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-secret"}}},
		}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}, {Name: "secret", MountPath: "/etc/secret"}}
		spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-secret"}}},
		}
		spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		Expect(consumer.Client.Create(ctx, deployment(ns, "web", 1, spec))).To(Succeed())

		// The provider's EndpointSlice controller copies the Service's
		// labels, ferry's origin labels included, onto its slice.
		var providerSlice *discoveryv1.EndpointSlice
		Eventually(func(g Gomega) {
			pod := localPod(ctx, g, "web")
			g.Expect(pod.Spec.NodeName).To(Equal(virtualNode))
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			var remotePod corev1.Pod
			getRemote(ctx, g, pod.Name, &remotePod)
			g.Expect(remotePod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(remotePod.Status.PodIP).NotTo(BeEmpty())
			g.Expect(remotePod.Spec.Containers[0].EnvFrom).To(Equal(spec.Containers[0].EnvFrom))

			var cm corev1.ConfigMap
			getRemote(ctx, g, "web-config", &cm)
			g.Expect(cm.Data).To(Equal(map[string]string{"GREETING": "hello"}))
			var secret corev1.Secret
			getRemote(ctx, g, "web-secret", &secret)
			g.Expect(secret.Data).To(Equal(map[string][]byte{"API_KEY": []byte("k3y")}))
			var svc corev1.Service
			getRemote(ctx, g, "web", &svc)
			g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"app": "web"}))

			var slices discoveryv1.EndpointSliceList
			g.Expect(provider.Client.List(ctx, &slices, client.InNamespace(twin), client.MatchingLabels{discoveryv1.LabelServiceName: "web"})).To(Succeed())
			var addresses []string
			ferrySlices := 0
			for _, s := range slices.Items {
				switch s.Labels[discoveryv1.LabelManagedBy] {
				case "endpointslice-controller.k8s.io":
					providerSlice = s.DeepCopy()
					for _, e := range s.Endpoints {
						addresses = append(addresses, e.Addresses...)
					}
				case endpointSliceManager:
					ferrySlices++
					g.Expect(s.Endpoints).To(BeEmpty(), "the consumer's endpoint of the offloaded pod is not reflected back")
				}
			}
			g.Expect(addresses).To(ConsistOf(remotePod.Status.PodIP), "the provider's EndpointSlice controller lists the remote pod")
			g.Expect(ferrySlices).To(Equal(1), "the consumer's slice of the Service is reflected")

			var token corev1.Secret
			getRemote(ctx, g, offloading.ServiceAccountTokenSecret("default"), &token)
			g.Expect(token.Data).To(HaveKey("token"), "the pod runs as the default service account and gets its token")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(polling).Should(Succeed())
		Expect(providerSlice.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginCluster, "consumer"))
		expectRemoteQuiet(ctx, providerSlice.Name, &discoveryv1.EndpointSlice{})
	})

	It("writes nothing for objects that are already equal (metrics)", func(ctx context.Context) {
		before := scrape(ctx)
		Expect(before).To(HaveKeyWithValue(`ferry_reflection_items{kind="configmaps"}`, BeNumerically(">=", 1)))
		Expect(before).To(HaveKeyWithValue(`ferry_reflection_items{kind="services"}`, BeNumerically(">=", 1)))
		Expect(before).To(HaveKey(`ferry_reflection_writes_total{kind="configmaps",verb="create"}`))
		var cm corev1.ConfigMap
		var secret corev1.Secret
		var svc corev1.Service
		rvs := func(g Gomega) []string {
			getRemote(ctx, g, "web-config", &cm)
			getRemote(ctx, g, "web-secret", &secret)
			getRemote(ctx, g, "web", &svc)
			return []string{cm.ResourceVersion, secret.ResourceVersion, svc.ResourceVersion}
		}
		first := rvs(Default)
		Consistently(rvs).WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Equal(first))
		after := scrape(ctx)
		Expect(writes(after)).To(Equal(writes(before)), "writes at rest, over a resync: %v", diffSeries(writes(before), writes(after)))
		AddReportEntry("reflection writes", fmt.Sprint(writes(after)))

		By("the provider's Ingresses are watched in the twin namespace only (no cluster-wide grant)")
		// (kube-controller-manager's garbage collector and quota
		// controller watch every resource cluster-wide, Ingresses too.)
		Expect(openWatches(ctx, provider, "ingresses")).To(HaveKeyWithValue("namespace", BeNumerically(">=", 1)))
	})

	It("takes the reflected objects away with the twin namespace when the namespace is no longer offloaded", func(ctx context.Context) {
		for _, name := range []string{"web", "tokened"} {
			Expect(consumer.Client.Delete(ctx, deployment(ns, name, 0, corev1.PodSpec{}), client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		}
		eventually(ctx, func(g Gomega) {
			var pods corev1.PodList
			g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns}})).To(Succeed())
		Eventually(func(g Gomega) {
			err := provider.Client.Get(ctx, client.ObjectKey{Name: twin}, &corev1.Namespace{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "twin namespace still there: %v", err)
			var cms corev1.ConfigMapList
			g.Expect(provider.Client.List(ctx, &cms, client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: "consumer"})).To(Succeed())
			g.Expect(cms.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(polling).Should(Succeed())
		By("the local objects stay")
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{})).To(Succeed())
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Service{})).To(Succeed())
		Consistently(func(g Gomega) {
			err := provider.Client.Get(ctx, client.ObjectKey{Name: twin}, &corev1.Namespace{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "twin namespace came back: %v", err)
		}).WithContext(ctx).WithTimeout(quiet).WithPolling(polling).Should(Succeed())
	})
})

// openWatches counts the watches of resource open on c's API server, by
// scope ("cluster" or "namespace").
func openWatches(ctx context.Context, c *testbed.Cluster, resource string) map[string]float64 {
	GinkgoHelper()
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `resource="`+resource+`"`) ||
			!strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		Expect(err).NotTo(HaveOccurred(), line)
		for _, scope := range []string{"cluster", "namespace"} {
			if strings.Contains(line, `scope="`+scope+`"`) {
				out[scope] += v
			}
		}
	}
	return out
}

// diffSeries lists the series whose values differ between a and b.
func diffSeries(a, b map[string]float64) []string {
	var out []string
	for k := range maps.Keys(b) {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s: %g -> %g", k, a[k], b[k]))
		}
	}
	for k := range maps.Keys(a) {
		if _, ok := b[k]; !ok {
			out = append(out, k+" gone")
		}
	}
	return out
}

var _ = Describe("Reflection and pod offloading with cluster-wide watches", Label("reflection", "offloading"), Ordered, func() {
	const (
		timeout = 30 * time.Second
		polling = 200 * time.Millisecond
	)
	var consumer, provider *testbed.Cluster
	// twins maps the offloaded namespaces to their twins.
	twins := map[string]string{}
	var shop, bar string

	offload := func(ctx context.Context, ns string) {
		GinkgoHelper()
		twins[ns] = framework.OffloadNamespace(ctx, consumer, ns, "provider")
	}
	remoteConfigMap := func(ctx context.Context, g Gomega, ns, name string) *corev1.ConfigMap {
		var cm corev1.ConfigMap
		g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twins[ns], Name: name}, &cm)).To(Succeed())
		return &cm
	}

	BeforeAll(func(ctx context.Context) {
		consumer, provider = startPeeredForReflection(ctx, 1, reflection.Options{ResyncPeriod: 2 * time.Second},
			func(provider *testbed.Cluster) {
				// The provider trusts this consumer with the cluster-wide
				// read role, before peering: its virtual kubelet (remote
				// scope auto) finds the grant when it starts.
				Expect(provider.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: "ferry-reflection-reader-consumer"},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ferry-reflection-reader"},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: peering.TenantNamespace("consumer"),
						Name: ferryv1alpha1.ConsumerServiceAccount}},
				})).To(Succeed())
			})
		shop, bar = framework.CreateNamespace(ctx, consumer, "shop"), framework.CreateNamespace(ctx, consumer, "bar")
		offload(ctx, shop) // bar is offloaded by the first spec
		// The virtual kubelet watches the provider's Ingresses cluster-wide
		// and not per twin namespace (nothing else on the provider watches
		// them in a namespace; kube-controller-manager's garbage collector
		// and quota controller watch every resource cluster-wide).
		Consistently(func() map[string]float64 { return openWatches(ctx, provider, "ingresses") }).WithContext(ctx).
			WithTimeout(2 * time.Second).WithPolling(polling).Should(And(HaveKeyWithValue("cluster", BeNumerically(">=", 1)), Not(HaveKeyWithValue("namespace", BeNumerically(">", 0)))))
	})

	It("offloads the pods of one namespace and then of two with the same ShadowPod and pod watches on the provider, their statuses flowing back", func(ctx context.Context) {
		// offloadedPod runs a pod in ns and waits until the provider runs it
		// and its status (Running, Offloaded) is back on the local pod.
		offloadedPod := func(ns string) {
			GinkgoHelper()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scoped", Namespace: ns}, Spec: remotePodSpec()}
			Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
			Eventually(func(g Gomega) {
				var remote corev1.Pod
				g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twins[ns], Name: pod.Name}, &remote)).To(Succeed())
				g.Expect(remote.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginCluster, "consumer"))
				g.Expect(remote.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
				cond := podCondition(pod, ferryv1alpha1.PodConditionOffloaded)
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Status).To(Equal(corev1.ConditionTrue))
				g.Expect(cond.Message).To(ContainSubstring(twins[ns] + "/" + pod.Name))
			}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(polling).Should(Succeed())
		}
		// watches are the provider's open watches of ShadowPods and pods:
		// the virtual kubelet's, the provider's own controllers' (all
		// cluster-wide), none in a namespace.
		watches := func() map[string]float64 {
			GinkgoHelper()
			out := map[string]float64{}
			for _, resource := range []string{"shadowpods", "pods"} {
				for scope, n := range openWatches(ctx, provider, resource) {
					out[resource+"/"+scope] = n
				}
			}
			return out
		}
		noneInANamespace := And(Not(HaveKeyWithValue("shadowpods/namespace", BeNumerically(">", 0))),
			Not(HaveKeyWithValue("pods/namespace", BeNumerically(">", 0))), HaveKeyWithValue("shadowpods/cluster", BeNumerically(">=", 1)))

		offloadedPod(shop)
		Eventually(watches).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(polling).Should(noneInANamespace)
		one := watches()

		By("offloading a second namespace")
		offload(ctx, bar)
		offloadedPod(bar)
		Eventually(watches).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(polling).Should(Equal(one),
			"the provider's watches with one offloaded namespace were %v", one)
		Consistently(watches).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(polling).Should(noneInANamespace)

		By("deleting the local pods")
		for _, ns := range []string{shop, bar} {
			Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scoped", Namespace: ns}})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, ns := range []string{shop, bar} {
				err := provider.Client.Get(ctx, client.ObjectKey{Namespace: twins[ns], Name: "scoped"}, &ferryv1alpha1.ShadowPod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ShadowPod %s/scoped: %v", twins[ns], err)
				err = consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scoped"}, &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s/scoped: %v", ns, err)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(polling).Should(Succeed())
	})

	It("reflects each namespace's objects into its own twin, repairs drift, and keeps the provider's slices of a reflected Service", func(ctx context.Context) {
		for _, ns := range []string{shop, bar} {
			Expect(consumer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
				Data: map[string]string{"owner": ns}})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, ns := range []string{shop, bar} {
				cm := remoteConfigMap(ctx, g, ns, "settings")
				g.Expect(cm.Data).To(Equal(map[string]string{"owner": ns}))
				g.Expect(cm.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOriginNamespace, ns))
			}
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(polling).Should(Succeed())

		By("editing a copy on the provider")
		cm := remoteConfigMap(ctx, Default, bar, "settings")
		Expect(provider.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"owner":"someone"}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(remoteConfigMap(ctx, g, bar, "settings").Data).To(Equal(map[string]string{"owner": bar}))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(polling).Should(Succeed())

		By("a Service with a selector and its pod")
		Expect(consumer.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: shop},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}})).To(Succeed())
		Expect(consumer.Client.Create(ctx, deployment(shop, "web", 1, remotePodSpec()))).To(Succeed())
		var providerSlice discoveryv1.EndpointSlice
		Eventually(func(g Gomega) {
			var slices discoveryv1.EndpointSliceList
			g.Expect(provider.Client.List(ctx, &slices, client.InNamespace(twins[shop]), client.MatchingLabels{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"})).To(Succeed())
			g.Expect(slices.Items).To(HaveLen(1))
			g.Expect(slices.Items[0].Endpoints).To(HaveLen(1))
			providerSlice = slices.Items[0]
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(polling).Should(Succeed())
		Consistently(func(g Gomega) string {
			var s discoveryv1.EndpointSlice
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(&providerSlice), &s)).To(Succeed())
			return s.ResourceVersion
		}).WithContext(ctx).WithTimeout(3*time.Second).WithPolling(polling).Should(Equal(providerSlice.ResourceVersion), "the provider's slice is left alone")
	})

	It("stops reflecting a namespace no longer offloaded, and only that one", func(ctx context.Context) {
		Expect(consumer.Client.Delete(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: bar}})).To(Succeed())
		Eventually(func(g Gomega) {
			err := provider.Client.Get(ctx, client.ObjectKey{Name: twins[bar]}, &corev1.Namespace{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "twin namespace still there: %v", err)
		}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(polling).Should(Succeed())

		By("the other namespace is still reflected")
		var local corev1.ConfigMap
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: shop, Name: "settings"}, &local)).To(Succeed())
		Expect(consumer.Client.Patch(ctx, &local, client.RawPatch(types.MergePatchType, []byte(`{"data":{"owner":"still"}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(remoteConfigMap(ctx, g, shop, "settings").Data).To(Equal(map[string]string{"owner": "still"}))
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(polling).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, &local)).To(Succeed())
		Eventually(func(g Gomega) {
			err := provider.Client.Get(ctx, client.ObjectKey{Namespace: twins[shop], Name: "settings"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "copy still there: %v", err)
		}).WithContext(ctx).WithTimeout(timeout).WithPolling(polling).Should(Succeed())
	})
})

// startPeeredForReflection starts a consumer and a provider (with workers
// kwok nodes), ferry on both, the consumer's virtual kubelet reflecting with
// opts, runs beforePeering (when set) on the provider, and peers them.
func startPeeredForReflection(ctx context.Context, workers int, opts reflection.Options, beforePeering func(provider *testbed.Cluster)) (consumer, provider *testbed.Cluster) {
	GinkgoHelper()
	clusters := framework.StartClusters(ctx,
		testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
		testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true,
			Nodes: []testbed.NodePool{{Name: "worker", Count: workers, CPU: "32", Memory: "128Gi", Pods: 250}}},
	)
	consumer, provider = clusters[0], clusters[1]
	for _, c := range clusters {
		framework.ApplyManifests(ctx, c, "base")
	}
	if beforePeering != nil {
		beforePeering(provider)
	}
	health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
	withReflection := health
	withReflection.Reflection = opts
	framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{Health: withReflection})
	framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{Health: health})
	out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s")
	Expect(err).NotTo(HaveOccurred(), out)
	return consumer, provider
}
