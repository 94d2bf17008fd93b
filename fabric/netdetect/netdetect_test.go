package netdetect

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestCovering(t *testing.T) {
	got := Covering([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.7.0/24"), netip.MustParsePrefix("10.244.2.0/24")})
	if got.String() != "10.244.0.0/21" {
		t.Errorf("Covering = %s", got)
	}
}

func node(name string, virtual bool, cidrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	if virtual {
		n.Labels = map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}
	}
	return n
}

func TestPodCIDR(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  []corev1.Node
		want   string
		ranges int
	}{
		{"none", []corev1.Node{node("a", false)}, "", 0},
		{"widened to a /16", []corev1.Node{node("a", false, "10.244.1.0/24"), node("b", false, "10.244.2.0/24", "fd00::/64")}, "10.244.0.0/16", 2},
		{"wider than a /16 kept", []corev1.Node{node("a", false, "10.0.0.0/24"), node("b", false, "10.3.0.0/24")}, "10.0.0.0/14", 2},
		{"virtual nodes ignored", []corev1.Node{node("v", true, "192.168.0.0/24"), node("a", false, "10.244.1.0/24")}, "10.244.0.0/16", 1},
		{"malformed ignored", []corev1.Node{node("a", false, "10.244.1.0/33", "x")}, "", 0},
	} {
		got, ranges, ok := PodCIDR(tc.nodes)
		if ok != (tc.want != "") || (ok && got.String() != tc.want) || ranges != tc.ranges {
			t.Errorf("%s: PodCIDR = %s, %d, %v; want %q, %d", tc.name, got, ranges, ok, tc.want, tc.ranges)
		}
	}
}

func TestServiceCIDR(t *testing.T) {
	sc := &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"fd00:10:96::/112", "10.96.0.1/12"}}}
	if got, ok := ServiceCIDR(sc, true); !ok || got.String() != "10.96.0.0/12" {
		t.Errorf("IPv4 = %s, %v", got, ok)
	}
	if got, ok := ServiceCIDR(sc, false); !ok || got.String() != "fd00:10:96::/112" {
		t.Errorf("IPv6 = %s, %v", got, ok)
	}
	if _, ok := ServiceCIDR(&networkingv1.ServiceCIDR{}, true); ok {
		t.Error("empty ServiceCIDR gave a range")
	}
}
