// Package netpol translates a consumer namespace's NetworkPolicy into the
// copy that enforces it on a provider, in the twin namespace of the
// namespace offloaded there.
//
// On the provider the consumer's pods are not pods: they appear at the
// addresses the network fabric maps them to. Selectors over them become
// ipBlocks of those addresses (/32 or /128), kept in step by translating
// again whenever the pods change. Pods offloaded to the same provider are
// real pods of a twin namespace there, with the consumer pod's labels
// (ferry's own keys aside): selectors keep matching them. Whatever cannot be
// translated faithfully is translated to something that allows less, and
// reported as a Problem.
package netpol

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
)

// Pod is one of the consumer's pods, as the translation needs it.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	// Addrs are the addresses the provider reaches the pod at; empty when
	// it cannot (the fabric has not mapped them, or the pod runs in
	// another provider that this one has no path to).
	Addrs []string
	// OnProvider says the pod runs in this provider: a real pod of a twin
	// namespace there, matched by selectors, not by address.
	OnProvider bool
}

// Namespace is one of the consumer's namespaces.
type Namespace struct {
	Name   string
	Labels map[string]string
	// Twin is its twin namespace on this provider; "" when it is not
	// offloaded there.
	Twin string
}

// Consumer is what the translation knows of the consumer cluster.
type Consumer struct {
	// Namespaces by name.
	Namespaces map[string]Namespace
	// Pods are the consumer's pods (running, with addresses).
	Pods []Pod
	// PodCIDR is the consumer's pod range; invalid when unknown (the
	// fabric is disabled: one flat network), then ipBlocks pass unchanged.
	PodCIDR netip.Prefix
	// PodCIDRAtProvider is where the provider sees PodCIDR (same length);
	// invalid while it cannot reach it: ipBlocks inside PodCIDR then match
	// nothing.
	PodCIDRAtProvider netip.Prefix
	// Unmapped says the fabric is enabled but has not mapped the two
	// clusters yet: no consumer address is known on the provider, so the
	// copy keeps no rule (it denies all the policy governs) until it has.
	Unmapped bool
}

// Problem is one part of a policy that could not be translated faithfully
// and was made to allow less.
type Problem struct {
	// Field is the path of the part in the policy, such as
	// spec.ingress[0].from[1].ipBlock.
	Field string
	// Message says what was done.
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Translate returns the spec of the provider's copy of policy, living in
// twin, and what it could not translate faithfully.
//
//   - spec.podSelector (the pods the policy isolates) stays: the offloaded
//     pods carry their labels. A requirement on a ferry.io/ label key, which
//     offloaded pods do not carry, is dropped, so more pods are isolated.
//   - A peer podSelector (same namespace) keeps matching the pods of twin,
//     and gains one ipBlock per address of each matching consumer pod that
//     does not run in the provider.
//   - A peer namespaceSelector (with its podSelector) becomes the ipBlocks
//     of the matching consumer pods of matching namespaces that do not run
//     in the provider, and, when some matching namespaces are offloaded to
//     the provider, a peer selecting their twin namespaces by name with the
//     same podSelector.
//   - An ipBlock inside the consumer's pod CIDR is mapped to where the
//     provider sees it; one that holds the pod CIDR keeps its other
//     addresses and gains the mapped pod CIDR; any other passes unchanged.
//     Excepts follow their addresses.
//   - Until the fabric has mapped the clusters, the copy has no rule.
//   - Ports and policyTypes are kept; policyTypes is always written out. A
//     rule whose peers all translate to nothing is dropped (a rule with no
//     peers would allow everything).
func Translate(policy *networkingv1.NetworkPolicy, twin string, c *Consumer) (networkingv1.NetworkPolicySpec, []Problem) {
	t := &translation{policy: policy, twin: twin, c: c}
	spec := policy.Spec
	out := networkingv1.NetworkPolicySpec{
		PodSelector: t.targetSelector(spec.PodSelector),
		PolicyTypes: policyTypes(spec),
	}
	if c.Unmapped && (len(spec.Ingress) > 0 || len(spec.Egress) > 0) {
		t.problem("spec", "the network fabric has not mapped this cluster's pods at the provider yet: the copy allows nothing until it has")
		return out, t.problems
	}
	for i, r := range spec.Ingress {
		field := fmt.Sprintf("spec.ingress[%d]", i)
		peers, keep := t.peers(field+".from", r.From)
		if !keep {
			continue
		}
		t.checkNamedPorts(field, r.Ports, r.From, false)
		out.Ingress = append(out.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: r.Ports, From: peers})
	}
	for i, r := range spec.Egress {
		field := fmt.Sprintf("spec.egress[%d]", i)
		peers, keep := t.peers(field+".to", r.To)
		if !keep {
			continue
		}
		t.checkNamedPorts(field, r.Ports, r.To, true)
		out.Egress = append(out.Egress, networkingv1.NetworkPolicyEgressRule{Ports: r.Ports, To: peers})
	}
	return out, t.problems
}

// policyTypes is spec's policyTypes, or what the API server defaults them
// to: Ingress, and Egress when there are egress rules.
func policyTypes(spec networkingv1.NetworkPolicySpec) []networkingv1.PolicyType {
	if len(spec.PolicyTypes) > 0 {
		return slices.Clone(spec.PolicyTypes)
	}
	types := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if len(spec.Egress) > 0 {
		types = append(types, networkingv1.PolicyTypeEgress)
	}
	return types
}

type translation struct {
	policy   *networkingv1.NetworkPolicy
	twin     string
	c        *Consumer
	problems []Problem
}

func (t *translation) problem(field, format string, args ...any) {
	t.problems = append(t.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// ferryKey says whether a label key is one of ferry's, which offloaded pods
// do not carry.
func ferryKey(k string) bool { return strings.HasPrefix(k, ferryv1alpha1.KeyPrefix) }

// targetSelector is sel without its requirements on ferry's keys.
func (t *translation) targetSelector(sel metav1.LabelSelector) metav1.LabelSelector {
	out := metav1.LabelSelector{}
	var dropped []string
	for k, v := range sel.MatchLabels {
		if ferryKey(k) {
			dropped = append(dropped, k)
			continue
		}
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[k] = v
	}
	for _, e := range sel.MatchExpressions {
		if ferryKey(e.Key) {
			dropped = append(dropped, e.Key)
			continue
		}
		out.MatchExpressions = append(out.MatchExpressions, *e.DeepCopy())
	}
	if len(dropped) > 0 {
		slices.Sort(dropped)
		t.problem("spec.podSelector", "offloaded pods do not carry the label keys %s: their requirements are dropped, so the copy isolates more pods", strings.Join(dropped, ", "))
	}
	return out
}

// usesFerryKeys says whether sel has a requirement on one of ferry's keys.
func usesFerryKeys(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	for k := range sel.MatchLabels {
		if ferryKey(k) {
			return true
		}
	}
	for _, e := range sel.MatchExpressions {
		if ferryKey(e.Key) {
			return true
		}
	}
	return false
}

// peers translates one rule's peers. keep is false when the rule must be
// dropped: it had peers and none is left.
func (t *translation) peers(field string, in []networkingv1.NetworkPolicyPeer) (out []networkingv1.NetworkPolicyPeer, keep bool) {
	if len(in) == 0 {
		return nil, true // every source or destination, as on the consumer
	}
	blocks := map[string]networkingv1.IPBlock{}
	addBlock := func(b networkingv1.IPBlock) {
		key := b.CIDR + "|" + strings.Join(b.Except, ",")
		blocks[key] = b
	}
	for i, p := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p.IPBlock != nil:
			for _, b := range t.ipBlock(f+".ipBlock", *p.IPBlock) {
				addBlock(b)
			}
		case p.NamespaceSelector != nil:
			nsSel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
			if err != nil {
				t.problem(f+".namespaceSelector", "invalid selector, peer left out: %v", err)
				continue
			}
			podSel, ok := t.podSelector(f, p.PodSelector)
			if !ok {
				continue
			}
			var twins []string
			for _, name := range sortedKeys(t.c.Namespaces) {
				ns := t.c.Namespaces[name]
				if !nsSel.Matches(labels.Set(ns.Labels)) {
					continue
				}
				if ns.Twin != "" {
					twins = append(twins, ns.Twin)
				}
				for _, b := range t.podBlocks(f, name, podSel) {
					addBlock(b)
				}
			}
			if len(twins) > 0 && !usesFerryKeys(p.PodSelector) {
				out = append(out, networkingv1.NetworkPolicyPeer{
					NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: twins,
					}}},
					PodSelector: p.PodSelector.DeepCopy(),
				})
			}
		default:
			podSel, ok := t.podSelector(f, p.PodSelector)
			if !ok {
				continue
			}
			if !usesFerryKeys(p.PodSelector) {
				out = append(out, networkingv1.NetworkPolicyPeer{PodSelector: p.PodSelector.DeepCopy()})
			}
			for _, b := range t.podBlocks(f, t.policy.Namespace, podSel) {
				addBlock(b)
			}
		}
	}
	keys := sortedKeys(blocks)
	for _, k := range keys {
		b := blocks[k]
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &b})
	}
	if len(out) == 0 {
		t.problem(field, "no peer is left on the provider: the rule is dropped (it allows nothing there)")
		return nil, false
	}
	return out, true
}

// podSelector parses a peer's podSelector (nil: every pod). A selector on
// ferry's keys matches the consumer's pods by address, not the offloaded
// ones: reported.
func (t *translation) podSelector(field string, sel *metav1.LabelSelector) (labels.Selector, bool) {
	if sel == nil {
		return labels.Everything(), true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.problem(field+".podSelector", "invalid selector, peer left out: %v", err)
		return nil, false
	}
	if usesFerryKeys(sel) {
		t.problem(field+".podSelector", "offloaded pods do not carry ferry.io/ labels: only the consumer's own pods match, by address")
	}
	return s, true
}

// podBlocks are the ipBlocks of the consumer's pods of namespace matching
// sel that do not run in the provider; the pods the provider cannot reach
// are reported and left out.
func (t *translation) podBlocks(field, namespace string, sel labels.Selector) []networkingv1.IPBlock {
	var out []networkingv1.IPBlock
	unreachable := 0
	for _, p := range t.c.Pods {
		if p.Namespace != namespace || p.OnProvider || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if len(p.Addrs) == 0 {
			unreachable++
			continue
		}
		for _, a := range p.Addrs {
			addr, err := netip.ParseAddr(a)
			if err != nil {
				unreachable++
				continue
			}
			addr = addr.Unmap()
			out = append(out, networkingv1.IPBlock{CIDR: netip.PrefixFrom(addr, addr.BitLen()).String()})
		}
	}
	if unreachable > 0 {
		t.problem(field, "%d matching pod(s) of namespace %s have no address this provider reaches (offloaded to another provider, or not mapped yet): left out", unreachable, namespace)
	}
	return out
}

// ipBlock translates one ipBlock.
func (t *translation) ipBlock(field string, b networkingv1.IPBlock) []networkingv1.IPBlock {
	cidr, err := parseCIDR(b.CIDR)
	if err != nil {
		t.problem(field+".cidr", "%v: peer left out", err)
		return nil
	}
	var excepts []netip.Prefix
	for i, e := range b.Except {
		p, err := parseCIDR(e)
		if err != nil {
			// Allowing the except's addresses would allow more: the
			// whole block goes.
			t.problem(fmt.Sprintf("%s.except[%d]", field, i), "%v: peer left out", err)
			return nil
		}
		excepts = append(excepts, p)
	}
	pod := t.c.PodCIDR
	if !pod.IsValid() || !fabric.Overlaps(cidr, pod) {
		return []networkingv1.IPBlock{block(cidr, excepts)}
	}
	mapping, reachable := fabric.Mapping{}, false
	if t.c.PodCIDRAtProvider.IsValid() {
		m, err := fabric.NewMapping(pod, t.c.PodCIDRAtProvider)
		mapping, reachable = m, err == nil
	}
	if pod.Contains(cidr.Addr()) && cidr.Bits() >= pod.Bits() {
		// Inside the pod range: where the provider sees it.
		if !reachable {
			t.problem(field, "%s is in the consumer's pod range %s, which this provider does not reach yet: peer left out", cidr, pod)
			return nil
		}
		var mapped []netip.Prefix
		for _, e := range excepts {
			if fabric.Overlaps(e, cidr) {
				mapped = append(mapped, translatePrefix(mapping, e))
			}
		}
		return []networkingv1.IPBlock{block(translatePrefix(mapping, cidr), mapped)}
	}
	// The block holds the pod range: its other addresses as they are,
	// the pod range where the provider sees it (unless excepted).
	var outside, inside []netip.Prefix
	podExcepted := false
	for _, e := range excepts {
		switch {
		case pod.Contains(e.Addr()) && e.Bits() >= pod.Bits():
			inside = append(inside, translatePrefix(mapping, e))
		case e.Contains(pod.Addr()) && e.Bits() <= pod.Bits():
			podExcepted = true
			outside = append(outside, e)
		default:
			outside = append(outside, e)
		}
	}
	if !podExcepted {
		outside = append(outside, pod)
	}
	out := []networkingv1.IPBlock{block(cidr, outside)}
	switch {
	case podExcepted:
	case reachable:
		out = append(out, block(mapping.To, inside))
	default:
		t.problem(field, "holds the consumer's pod range %s, which this provider does not reach yet: those addresses are excepted", pod)
	}
	return out
}

func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 prefix", s)
	}
	return p.Masked(), nil
}

func translatePrefix(m fabric.Mapping, p netip.Prefix) netip.Prefix {
	a, _ := m.Translate(p.Addr())
	return netip.PrefixFrom(a, p.Bits()).Masked()
}

func block(cidr netip.Prefix, excepts []netip.Prefix) networkingv1.IPBlock {
	b := networkingv1.IPBlock{CIDR: cidr.String()}
	slices.SortFunc(excepts, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	for _, e := range slices.Compact(excepts) {
		b.Except = append(b.Except, e.String())
	}
	return b
}

// checkNamedPorts reports named ports of egress rules towards the
// consumer's pods: the provider's engine resolves a named port on the
// destination pod, which it does not know for an address, so such traffic
// is denied there.
func (t *translation) checkNamedPorts(field string, ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer, egress bool) {
	if !egress || len(peers) == 0 {
		return
	}
	for i, p := range ports {
		if p.Port != nil && p.Port.Type == intstr.String {
			t.problem(fmt.Sprintf("%s.ports[%d].port", field, i), "named port %q is resolved on the destination pod, unknown on the provider for the consumer's pods: traffic to them on it is denied there", p.Port.StrVal)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
