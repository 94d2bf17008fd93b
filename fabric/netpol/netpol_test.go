package netpol

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ferry-io/ferry/fabric"
)

// The consumer of the tests: pod range 10.244.0.0/16, seen by the provider
// at 10.71.0.0/16. Namespace app is offloaded (twin app-c1), db is
// offloaded to this provider too (twin db-c1), web is not offloaded.
func consumer() *Consumer {
	return &Consumer{
		Namespaces: map[string]Namespace{
			"app": {Name: "app", Labels: map[string]string{"kubernetes.io/metadata.name": "app", "team": "a"}, Twin: "app-c1"},
			"db":  {Name: "db", Labels: map[string]string{"kubernetes.io/metadata.name": "db", "team": "a"}, Twin: "db-c1"},
			"web": {Name: "web", Labels: map[string]string{"kubernetes.io/metadata.name": "web", "team": "b"}},
		},
		Pods: []Pod{
			{Namespace: "app", Name: "client", Labels: map[string]string{"role": "client"}, Addrs: []string{"10.71.1.5"}},
			{Namespace: "app", Name: "other", Labels: map[string]string{"role": "other"}, Addrs: []string{"10.71.1.6"}},
			{Namespace: "app", Name: "offloaded-client", Labels: map[string]string{"role": "client"}, Addrs: []string{"10.99.0.3"}, OnProvider: true},
			{Namespace: "app", Name: "elsewhere", Labels: map[string]string{"role": "client"}},
			{Namespace: "db", Name: "pg", Labels: map[string]string{"role": "client"}, Addrs: []string{"10.71.2.7"}},
			{Namespace: "web", Name: "front", Labels: map[string]string{"role": "client"}, Addrs: []string{"10.71.3.8"}},
		},
		PodCIDR:           netip.MustParsePrefix("10.244.0.0/16"),
		PodCIDRAtProvider: netip.MustParsePrefix("10.71.0.0/16"),
	}
}

func policy(spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}, Spec: spec}
}

var (
	ingress = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	clients = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}
	server  = metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}
	port80  = []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(80))}}
	ipPeer  = func(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
	}
)

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     networkingv1.NetworkPolicySpec
		consumer func(*Consumer)
		want     networkingv1.NetworkPolicySpec
		problems []string // substrings of the problems, in order
	}{{
		name: "deny all keeps no rule and writes policyTypes out",
		spec: networkingv1.NetworkPolicySpec{},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress},
	}, {
		name: "allow all: a rule without peers stays without peers",
		spec: networkingv1.NetworkPolicySpec{PodSelector: server, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: port80}}},
		want: networkingv1.NetworkPolicySpec{PodSelector: server, PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: port80}}},
	}, {
		name: "podSelector peer: the same selector plus the addresses of the local matching pods",
		spec: networkingv1.NetworkPolicySpec{PodSelector: server, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: port80, From: []networkingv1.NetworkPolicyPeer{{PodSelector: clients}}}}},
		want: networkingv1.NetworkPolicySpec{PodSelector: server, PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: port80, From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: clients}, ipPeer("10.71.1.5/32"),
		}}}},
		problems: []string{"spec.ingress[0].from[0]: 1 matching pod(s) of namespace app have no address"},
	}, {
		name: "namespaceSelector: addresses of every matching namespace's pods, twin names for those offloaded here",
		spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, PodSelector: clients,
		}}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"app-c1", "db-c1"}}}}, PodSelector: clients},
			ipPeer("10.71.1.5/32"), ipPeer("10.71.2.7/32"),
		}}}},
		problems: []string{"spec.egress[0].to[0]: 1 matching pod(s) of namespace app"},
	}, {
		name: "namespaceSelector of namespaces not offloaded here: addresses only",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
		}}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.71.3.8/32")}}}},
	}, {
		name: "a peer matching nothing drops the rule rather than leaving it without peers",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}},
		}}}}},
		want:     networkingv1.NetworkPolicySpec{PolicyTypes: ingress},
		problems: []string{"spec.ingress[0].from: no peer is left"},
	}, {
		name: "ipBlock inside the pod range is mapped, with its excepts",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.244.1.0/24", "10.244.1.128/25")}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.71.1.0/24", "10.71.1.128/25")}}}},
	}, {
		name: "ipBlock outside the pod range passes unchanged",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("192.168.0.0/16", "192.168.1.0/24")}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("192.168.0.0/16", "192.168.1.0/24")}}}},
	}, {
		name: "ipBlock holding the pod range: the rest unchanged, the pod range mapped, excepts on their side",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.0.0.0/8", "10.1.0.0/16", "10.244.9.0/24")}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			ipPeer("10.0.0.0/8", "10.1.0.0/16", "10.244.0.0/16"), ipPeer("10.71.0.0/16", "10.71.9.0/24"),
		}}}},
	}, {
		name: "ipBlock holding the pod range, which an except removes: nothing mapped",
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.0.0.0/8", "10.240.0.0/12")}}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.0.0.0/8", "10.240.0.0/12")}}}},
	}, {
		name:     "pod range not reachable yet: an ipBlock inside it is left out, one holding it excepts it",
		consumer: func(c *Consumer) { c.PodCIDRAtProvider = netip.Prefix{} },
		spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.244.1.0/24")}},
			{From: []networkingv1.NetworkPolicyPeer{ipPeer("0.0.0.0/0")}},
		}},
		want:     networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("0.0.0.0/0", "10.244.0.0/16")}}}},
		problems: []string{"spec.ingress[0].from[0].ipBlock: 10.244.1.0/24 is in the consumer's pod range", "spec.ingress[0].from: no peer is left", "spec.ingress[1].from[0].ipBlock: holds the consumer's pod range"},
	}, {
		name:     "fabric not mapped yet: no rule, whatever the policy allows",
		consumer: func(c *Consumer) { c.Unmapped = true },
		spec:     networkingv1.NetworkPolicySpec{PodSelector: server, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
		want:     networkingv1.NetworkPolicySpec{PodSelector: server, PolicyTypes: ingress},
		problems: []string{"spec: the network fabric has not mapped"},
	}, {
		name:     "fabric disabled (no pod range known): ipBlocks pass unchanged",
		consumer: func(c *Consumer) { c.PodCIDR, c.PodCIDRAtProvider = netip.Prefix{}, netip.Prefix{} },
		spec:     networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.244.1.0/24")}}}},
		want:     networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.244.1.0/24")}}}},
	}, {
		name:     "a bad except leaves the whole block out",
		spec:     networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("192.168.0.0/16", "bogus"), {PodSelector: clients}}}}},
		want:     networkingv1.NetworkPolicySpec{PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: clients}, ipPeer("10.71.1.5/32")}}}},
		problems: []string{"spec.ingress[0].from[0].ipBlock.except[0]: \"bogus\" is not a CIDR", "spec.ingress[0].from[1]: 1 matching pod(s)"},
	}, {
		name: "ferry.io keys: dropped from the target selector (isolating more), a peer selector on them keeps addresses only",
		spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server", "ferry.io/x": "y"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ferry.io/origin", Operator: metav1.LabelSelectorOpDoesNotExist}, {Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"other"}}},
			}}}}},
		},
		want:     networkingv1.NetworkPolicySpec{PodSelector: server, PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer("10.71.1.6/32")}}}},
		problems: []string{"spec.podSelector: offloaded pods do not carry the label keys ferry.io/x", "spec.ingress[0].from[0].podSelector: offloaded pods do not carry ferry.io/ labels"},
	}, {
		name: "named port in egress towards the consumer's pods is reported",
		spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromString("http"))}}, To: []networkingv1.NetworkPolicyPeer{ipPeer("192.168.0.0/16")},
		}}},
		want: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromString("http"))}}, To: []networkingv1.NetworkPolicyPeer{ipPeer("192.168.0.0/16")},
		}}},
		problems: []string{`spec.egress[0].ports[0].port: named port "http"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := consumer()
			if tc.consumer != nil {
				tc.consumer(c)
			}
			got, problems := Translate(policy(tc.spec), "app-c1", c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if len(problems) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tc.problems), tc.problems)
			}
			for i, p := range problems {
				if !strings.Contains(p.String(), tc.problems[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p, tc.problems[i])
				}
			}
		})
	}
}

// TestTranslateFollowsPods: the ipBlocks are those of the pods of the
// moment; translating again after a pod comes, goes or changes its labels
// gives the new set.
func TestTranslateFollowsPods(t *testing.T) {
	p := policy(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: clients}}}}})
	blocks := func(c *Consumer) []string {
		spec, _ := Translate(p, "app-c1", c)
		var out []string
		for _, peer := range spec.Ingress[0].From {
			if peer.IPBlock != nil {
				out = append(out, peer.IPBlock.CIDR)
			}
		}
		return out
	}
	c := consumer()
	if got := blocks(c); !cmp.Equal(got, []string{"10.71.1.5/32"}) {
		t.Fatalf("blocks = %v", got)
	}
	c.Pods = append(c.Pods, Pod{Namespace: "app", Name: "new", Labels: map[string]string{"role": "client"}, Addrs: []string{"10.71.1.9"}})
	c.Pods[1].Labels = map[string]string{"role": "client"}
	if got := blocks(c); !cmp.Equal(got, []string{"10.71.1.5/32", "10.71.1.6/32", "10.71.1.9/32"}) {
		t.Fatalf("after a pod came and one was relabelled: blocks = %v", got)
	}
	c.Pods = c.Pods[1:]
	if got := blocks(c); !cmp.Equal(got, []string{"10.71.1.6/32", "10.71.1.9/32"}) {
		t.Fatalf("after a pod went: blocks = %v", got)
	}
}

// FuzzTranslateIPBlock: whatever the block, the translation never panics,
// and every address the copy allows inside the provider's view of the pod
// range is the mapping of an address the original allows.
func FuzzTranslateIPBlock(f *testing.F) {
	f.Add("10.0.0.0/8", "10.244.1.0/24")
	f.Add("10.244.0.0/16", "10.244.0.0/17")
	f.Add("0.0.0.0/0", "")
	f.Add("fd00::/8", "bogus")
	f.Add("10.244.1.7/32", "")
	f.Fuzz(func(t *testing.T, cidr, except string) {
		var excepts []string
		if except != "" {
			excepts = []string{except}
		}
		c := consumer()
		p := policy(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipPeer(cidr, excepts...)}}}})
		spec, _ := Translate(p, "app-c1", c)
		if len(spec.Ingress) == 0 {
			return
		}
		orig, err := parseCIDR(cidr)
		if err != nil {
			t.Fatalf("block %q is not a CIDR but the rule was kept: %+v", cidr, spec.Ingress)
		}
		var origExcept netip.Prefix
		if except != "" {
			origExcept, _ = parseCIDR(except)
		}
		for _, peer := range spec.Ingress[0].From {
			b, err := parseCIDR(peer.IPBlock.CIDR)
			if err != nil {
				t.Fatalf("copy has a bad block %q", peer.IPBlock.CIDR)
			}
			// Probe the first address of the copy's block.
			a := b.Addr()
			allowed := true
			for _, e := range peer.IPBlock.Except {
				if ep, _ := parseCIDR(e); ep.Contains(a) {
					allowed = false
				}
			}
			if !allowed {
				continue
			}
			src := a
			if c.PodCIDRAtProvider.Contains(a) {
				m, err := fabric.NewMapping(c.PodCIDRAtProvider, c.PodCIDR)
				if err != nil {
					t.Fatal(err)
				}
				src, _ = m.Translate(a)
			} else if c.PodCIDR.Contains(a) {
				t.Fatalf("copy allows %s, an untranslated address of the consumer's pod range", a)
			}
			if !orig.Contains(src) || (origExcept.IsValid() && origExcept.Contains(src)) {
				t.Fatalf("copy allows %s (consumer address %s) which %s except %q does not", a, src, cidr, except)
			}
		}
	})
}
