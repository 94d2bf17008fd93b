package framework

import (
	"context"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/test/testbed"
)

// PeerNetwork is the network fabric's mapping between a consumer and one
// of its providers, as the consumer's NetworkConfigs record it.
type PeerNetwork struct {
	// ProviderPods maps the provider's pod CIDR to where the consumer
	// sees the provider's pods.
	ProviderPods fabric.Mapping
	// ConsumerPods maps the consumer's pod CIDR to where the provider sees
	// the consumer's pods.
	ConsumerPods fabric.Mapping
	// APIServerAtProvider is where pods in the provider reach the
	// consumer's API server.
	APIServerAtProvider string
}

// ProviderPodIP is where the consumer sees a provider pod IP.
func (n PeerNetwork) ProviderPodIP(ip string) string {
	GinkgoHelper()
	out, ok := n.ProviderPods.TranslateString(ip)
	Expect(ok).To(BeTrue(), "%s lies outside the provider's pod CIDR %s", ip, n.ProviderPods.From)
	return out
}

// ConsumerPodIP is where the provider sees a consumer pod IP.
func (n PeerNetwork) ConsumerPodIP(ip string) string {
	GinkgoHelper()
	out, ok := n.ConsumerPods.TranslateString(ip)
	Expect(ok).To(BeTrue(), "%s lies outside the consumer's pod CIDR %s", ip, n.ConsumerPods.From)
	return out
}

// WaitPeerNetwork waits until the consumer's fabric has mapped the provider
// both ways, and returns the mapping.
func WaitPeerNetwork(ctx context.Context, consumer *testbed.Cluster, consumerID, provider ferryv1alpha1.ClusterID) PeerNetwork {
	GinkgoHelper()
	var n PeerNetwork
	Eventually(func(g Gomega) {
		var local, peer ferryv1alpha1.NetworkConfig
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: string(consumerID)}, &local)).To(Succeed())
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: string(provider)}, &peer)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(peer.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped)).To(BeTrue(), "provider %s not mapped: %v", provider, peer.Status.Conditions)
		g.Expect(peer.Status.PodCIDRAtPeer).NotTo(BeEmpty(), "provider %s has not mapped this cluster yet", provider)
		g.Expect(peer.Status.APIServerAddressAtPeer).NotTo(BeEmpty())
		mapping := func(from, to string) fabric.Mapping {
			m, err := fabric.NewMapping(netip.MustParsePrefix(from), netip.MustParsePrefix(to))
			g.Expect(err).NotTo(HaveOccurred())
			return m
		}
		n = PeerNetwork{
			ProviderPods:        mapping(peer.Spec.PodCIDR, peer.Status.RemappedPodCIDR),
			ConsumerPods:        mapping(local.Spec.PodCIDR, peer.Status.PodCIDRAtPeer),
			APIServerAtProvider: peer.Status.APIServerAddressAtPeer,
		}
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	return n
}
