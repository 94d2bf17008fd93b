package reflection

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/fabric/netpol"
)

// ReasonNetworkPolicyNarrowed: part of a NetworkPolicy could not be
// translated faithfully for the provider and its copy allows less there.
const ReasonNetworkPolicyNarrowed = "NetworkPolicyNarrowed"

// podCIDRFunc is the consumer's pod range and where the provider sees it
// (network.Translator.LocalPodCIDR).
type podCIDRFunc func() (local, atProvider netip.Prefix, mapped bool)

// networkPolicyTranslator reflects NetworkPolicies, translated by
// fabric/netpol to what the provider sees: selectors over the consumer's
// pods become ipBlocks of their addresses at the provider, kept in step by
// reflecting every policy again when pods or namespaces change. What it
// cannot translate faithfully narrows the copy and is reported by an Event
// on the local policy (once per distinct report).
type networkPolicyTranslator struct {
	pods, namespaces cache.Indexer
	ns               *namespaces
	podCIDR          podCIDRFunc
	recorder         record.EventRecorder

	mu       sync.Mutex
	reported map[types.UID]string
}

var _ translator = (*networkPolicyTranslator)(nil)

func (t *networkPolicyTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	np, ok := local.(*networkingv1.NetworkPolicy)
	if !ok {
		return nil, "", fmt.Errorf("reflect a NetworkPolicy: got a %T", local)
	}
	spec, problems := netpol.Translate(np, twinNamespace, t.consumer(env))
	t.report(np, problems)
	return &networkingv1.NetworkPolicy{ObjectMeta: remoteMeta(env, np, twinNamespace), Spec: spec}, "", nil
}

// consumer is the translation's snapshot of this cluster.
func (t *networkPolicyTranslator) consumer(env *Env) *netpol.Consumer {
	c := &netpol.Consumer{Namespaces: map[string]netpol.Namespace{}}
	if t.podCIDR != nil {
		local, at, mapped := t.podCIDR()
		c.PodCIDR, c.PodCIDRAtProvider, c.Unmapped = local, at, !mapped
	}
	for _, o := range t.namespaces.List() {
		ns := o.(*corev1.Namespace)
		c.Namespaces[ns.Name] = netpol.Namespace{Name: ns.Name, Labels: ns.Labels, Twin: t.ns.twin(ns.Name)}
	}
	for _, o := range t.pods.List() {
		p := o.(*corev1.Pod)
		if !policyPeerPod(p) {
			continue
		}
		pod := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, OnProvider: env.providerNode(p.Spec.NodeName)}
		if !pod.OnProvider {
			for _, ip := range p.Status.PodIPs {
				if a := env.remapIP(ip.IP); a != "" {
					pod.Addrs = append(pod.Addrs, a)
				}
			}
		}
		c.Pods = append(c.Pods, pod)
	}
	return c
}

// policyPeerPod says whether a pod can be a NetworkPolicy peer: it has an
// address of the pod network and is not finished.
func policyPeerPod(p *corev1.Pod) bool {
	return !p.Spec.HostNetwork && len(p.Status.PodIPs) > 0 &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// report records problems on the policy when they differ from the last
// report.
func (t *networkPolicyTranslator) report(np *networkingv1.NetworkPolicy, problems []netpol.Problem) {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.String()
	}
	msg := strings.Join(msgs, "; ")
	t.mu.Lock()
	changed := t.reported[np.UID] != msg
	if msg == "" {
		delete(t.reported, np.UID)
	} else {
		t.reported[np.UID] = msg
	}
	t.mu.Unlock()
	if changed && msg != "" && t.recorder != nil {
		t.recorder.Eventf(np, corev1.EventTypeWarning, ReasonNetworkPolicyNarrowed, "the provider's copy allows less than this policy: %s", msg)
	}
}

func (*networkPolicyTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*networkingv1.NetworkPolicy), remote.(*networkingv1.NetworkPolicy)
	return metaEqual(w, r) && equality.Semantic.DeepEqual(defaultedPolicySpec(w.Spec), defaultedPolicySpec(r.Spec))
}

func (*networkPolicyTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*networkingv1.NetworkPolicy).DeepCopy(), remote.(*networkingv1.NetworkPolicy).DeepCopy()
	mergeMeta(w, merged)
	merged.Spec = w.Spec
	return merged
}

// defaultedPolicySpec is spec as the API server stores it: ports default to
// TCP, empty lists are nil.
func defaultedPolicySpec(spec networkingv1.NetworkPolicySpec) networkingv1.NetworkPolicySpec {
	s := *spec.DeepCopy()
	ports := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			if ps[i].Protocol == nil {
				ps[i].Protocol = new(corev1.ProtocolTCP)
			}
		}
	}
	for i := range s.Ingress {
		ports(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		ports(s.Egress[i].Ports)
	}
	return s
}

// podChangesPolicies says whether a pod's change can change a policy's
// copy: its labels, addresses, node or being a peer at all.
func podChangesPolicies(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	return !maps.Equal(o.Labels, n.Labels) || o.Spec.NodeName != n.Spec.NodeName ||
		policyPeerPod(o) != policyPeerPod(n) ||
		!slices.Equal(o.Status.PodIPs, n.Status.PodIPs)
}

// namespaceChangesPolicies says whether a namespace's change can change a
// policy's copy: its labels.
func namespaceChangesPolicies(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.Namespace)
	n, ok2 := newObj.(*corev1.Namespace)
	return !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels)
}

// policyPeerPods is the informer of every pod of the cluster, which a
// NetworkPolicy's copy may have to name as a peer. It keeps of each pod only
// what makes it a peer and where (trimPolicyPeer): this informer holds the
// whole cluster's pods, and their specs are most of their size.
func policyPeerPods(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	inf := f.Core().V1().Pods().Informer()
	_ = inf.SetTransform(trimPolicyPeer)
	return inf
}

// trimPolicyPeer is the transform of policyPeerPods: a pod's namespace,
// name, labels, node, host networking, phase and addresses (what
// policyPeerPod, podChangesPolicies and the translator read), and the
// metadata the informer itself needs.
func trimPolicyPeer(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			ResourceVersion: p.ResourceVersion, Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIPs: p.Status.PodIPs},
	}, nil
}
