package fabric

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func node(name, podCIDR, ip string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:   corev1.NodeSpec{PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}}}
}

func TestDiscoverReadsTheCluster(t *testing.T) {
	objs := []client.Object{
		node("a", "10.244.1.0/24", "192.168.1.10", nil),
		node("b", "10.244.2.0/24", "192.168.1.11", nil),
		// A virtual node's pod CIDR is the provider's business.
		node("ferry-eu", "10.99.0.0/24", "127.0.0.1", map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}),
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00:10:96::/108"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	d, err := discover(context.Background(), c, c, settings{})
	if err != nil {
		t.Fatal(err)
	}
	if d.podCIDR.String() != "10.244.0.0/16" || d.serviceCIDR.String() != "10.96.0.0/12" || d.apiServer.String() != "10.96.0.1" || d.apiServerPort != 443 {
		t.Errorf("discovered pods %s services %s API server %s:%d", d.podCIDR, d.serviceCIDR, d.apiServer, d.apiServerPort)
	}
	if len(d.nodeIPs) != 2 {
		t.Errorf("node IPs %v, want the two real nodes'", d.nodeIPs)
	}

	// Flags win.
	s, _ := Options{PodCIDR: "172.16.0.0/16", ServiceCIDR: "172.17.0.0/16"}.parse()
	d, _ = discover(context.Background(), c, c, s)
	if d.podCIDR.String() != "172.16.0.0/16" || d.serviceCIDR.String() != "172.17.0.0/16" {
		t.Errorf("with flags: pods %s services %s", d.podCIDR, d.serviceCIDR)
	}

	// Nothing to detect the pod CIDR from: a clear error naming the flag.
	empty := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	if _, err := discover(context.Background(), empty, empty, settings{}); !errors.Is(err, errPodCIDRUnknown) {
		t.Errorf("no nodes: %v", err)
	}
}
