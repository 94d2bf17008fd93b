package reflection

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

func peerPod(name, node, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// TestNetworkPolicyTranslatorDesired: the copy of an allow-from-label
// policy keeps its selectors and holds the remapped address of the local
// matching pod only (not the offloaded one, not the unlabelled one, not the
// finished one); the copy follows a pod's coming; a part that cannot be
// translated is reported by one Event.
func TestNetworkPolicyTranslatorDesired(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	allowed := map[string]string{"access": "true"}
	finished := peerPod("done", "worker-1", "10.0.1.9", allowed)
	finished.Status.Phase = corev1.PodSucceeded
	for _, p := range []*corev1.Pod{
		peerPod("client", "worker-1", "10.0.1.5", allowed),
		peerPod("denied", "worker-1", "10.0.1.6", nil),
		peerPod("offloaded", "ferry-provider", "10.50.0.7", allowed),
		finished,
	} {
		_ = pods.Add(p)
	}
	_ = nsIndexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"kubernetes.io/metadata.name": "shop"}}})
	ns := &namespaces{}
	recorder := record.NewFakeRecorder(10)
	tr := &networkPolicyTranslator{
		pods: pods, namespaces: nsIndexer, ns: ns, recorder: recorder, reported: map[types.UID]string{},
		podCIDR: func() (netip.Prefix, netip.Prefix, bool) {
			return netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("10.200.0.0/16"), true
		},
	}
	meta := localObjectMeta("allow-access")
	policy := &networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: allowed}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.3.0/24"}},
		}}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}}
	want := func(blocks ...string) networkingv1.NetworkPolicySpec {
		from := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: allowed}}}
		for _, b := range blocks {
			from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b}})
		}
		return networkingv1.NetworkPolicySpec{
			PodSelector: policy.Spec.PodSelector, PolicyTypes: policy.Spec.PolicyTypes,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: from}},
		}
	}
	got, skip, err := tr.desired(translatorEnv(), policy, "twin")
	if err != nil || skip != "" {
		t.Fatalf("desired: skip %q, err %v", skip, err)
	}
	np := got.(*networkingv1.NetworkPolicy)
	if np.Namespace != "twin" || np.Labels["ferry.io/origin-cluster"] != "home" {
		t.Errorf("metadata = %+v", np.ObjectMeta)
	}
	if w := want("10.200.1.5/32", "10.200.3.0/24"); !equality.Semantic.DeepEqual(np.Spec, w) {
		t.Errorf("spec = %+v\nwant %+v", np.Spec, w)
	}
	if len(recorder.Events) != 0 {
		t.Errorf("events for a faithful copy: %v", <-recorder.Events)
	}

	_ = pods.Add(peerPod("newcomer", "worker-2", "10.0.2.4", allowed))
	got, _, _ = tr.desired(translatorEnv(), policy, "twin")
	if w := want("10.200.1.5/32", "10.200.2.4/32", "10.200.3.0/24"); !equality.Semantic.DeepEqual(got.(*networkingv1.NetworkPolicy).Spec, w) {
		t.Errorf("after a pod came: spec = %+v\nwant %+v", got.(*networkingv1.NetworkPolicy).Spec, w)
	}
	if !tr.equal(got, got.DeepCopyObject().(*networkingv1.NetworkPolicy)) {
		t.Error("a copy is not equal to itself")
	}

	// Not mapped yet: no rule, reported once.
	tr.podCIDR = func() (netip.Prefix, netip.Prefix, bool) { return netip.Prefix{}, netip.Prefix{}, false }
	for range 2 {
		got, _, _ = tr.desired(translatorEnv(), policy, "twin")
	}
	if spec := got.(*networkingv1.NetworkPolicy).Spec; len(spec.Ingress) != 0 {
		t.Errorf("unmapped: ingress = %+v, want none", spec.Ingress)
	}
	if n := len(recorder.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if e := <-recorder.Events; !strings.Contains(e, ReasonNetworkPolicyNarrowed) || !strings.Contains(e, "not mapped") {
		t.Errorf("event = %q", e)
	}
}

func TestPodChangesPolicies(t *testing.T) {
	p := peerPod("a", "n", "10.0.0.1", map[string]string{"x": "1"})
	status := p.DeepCopy()
	status.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	relabelled := p.DeepCopy()
	relabelled.Labels["x"] = "2"
	moved := p.DeepCopy()
	moved.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.2"}}
	if podChangesPolicies(p, status) {
		t.Error("a condition change reflects every policy again")
	}
	if !podChangesPolicies(p, relabelled) || !podChangesPolicies(p, moved) {
		t.Error("a label or address change does not reflect the policies again")
	}
}
