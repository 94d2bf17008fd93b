// Package netdetect reads a cluster's pod and service CIDRs from what its API
// shows: the nodes' spec.podCIDRs and the ServiceCIDR "kubernetes". The
// network fabric's controllers detect them at run time and ferryctl install
// shows (and pins) them before installing; both use these rules so that they
// agree.
package netdetect

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// MinDetectedBits widens a pod CIDR detected from nodes to at least this
// size: nodes get slices (/24s) of a cluster CIDR the API does not show, and
// a /16 is what the usual installers use.
const MinDetectedBits = 16

// ServiceCIDRName is the API server's default ServiceCIDR object.
const ServiceCIDRName = "kubernetes"

// PodCIDR is the covering range of the IPv4 spec.podCIDRs of the real
// (not virtual) nodes, widened to at least a /MinDetectedBits, and how many
// node ranges it covers; ok is false when no node has one.
func PodCIDR(nodes []corev1.Node) (cidr netip.Prefix, ranges int, ok bool) {
	var cidrs []netip.Prefix
	for _, n := range nodes {
		if n.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual {
			continue
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
				cidrs = append(cidrs, p.Masked())
			}
		}
	}
	if len(cidrs) == 0 {
		return netip.Prefix{}, 0, false
	}
	cidr = Covering(cidrs)
	if cidr.Bits() > MinDetectedBits {
		cidr = netip.PrefixFrom(cidr.Addr(), MinDetectedBits).Masked()
	}
	return cidr, len(cidrs), true
}

// ServiceCIDR is the first range of the ServiceCIDR sc in the family asked
// for (IPv4 when ipv4 is true); ok is false when it has none.
func ServiceCIDR(sc *networkingv1.ServiceCIDR, ipv4 bool) (netip.Prefix, bool) {
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() == ipv4 {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// Covering is the smallest prefix containing all of ps (one family, at
// least one prefix).
func Covering(ps []netip.Prefix) netip.Prefix {
	out := ps[0]
	for _, p := range ps[1:] {
		for !(out.Contains(p.Addr()) && out.Bits() <= p.Bits()) {
			out = netip.PrefixFrom(out.Addr(), out.Bits()-1).Masked()
		}
	}
	return out
}
