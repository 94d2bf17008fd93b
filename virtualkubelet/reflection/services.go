package reflection

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serviceTranslator reflects Services, so offloaded pods reach them by name.
// The remote copy has what users choose: the type, the selector (it selects
// the offloaded pods on the provider), the ports without their node ports,
// session affinity, publishNotReadyAddresses, the traffic policies and
// distribution, the IP family policy, the external name, the load balancer's
// class, source ranges and node-port allocation, and a headless Service's
// clusterIP "None".
//
// The provider assigns the cluster IPs, IP families, node ports and health
// check node port: they are neither copied nor compared, and merge keeps
// them. The external IPs and load balancer IP are consumer-network addresses:
// they are not copied either, and whatever the provider sets there is kept.
//
// A copy cannot switch between headless and not by an update (the API
// server refuses the one and ignores the other): it is recreated.
type serviceTranslator struct{}

func (serviceTranslator) mustRecreate(want, remote client.Object) bool {
	w, r := want.(*corev1.Service), remote.(*corev1.Service)
	return w.Spec.Type != corev1.ServiceTypeExternalName && r.Spec.Type != corev1.ServiceTypeExternalName &&
		isHeadless(&w.Spec) != isHeadless(&r.Spec)
}

var _ translator = serviceTranslator{}

func (serviceTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	svc, ok := local.(*corev1.Service)
	if !ok {
		return nil, "", fmt.Errorf("reflect a Service: got a %T", local)
	}
	s := svc.Spec.DeepCopy()
	spec := corev1.ServiceSpec{
		Type:                          s.Type,
		Selector:                      s.Selector,
		Ports:                         s.Ports,
		SessionAffinity:               s.SessionAffinity,
		SessionAffinityConfig:         s.SessionAffinityConfig,
		PublishNotReadyAddresses:      s.PublishNotReadyAddresses,
		InternalTrafficPolicy:         s.InternalTrafficPolicy,
		IPFamilyPolicy:                s.IPFamilyPolicy,
		TrafficDistribution:           s.TrafficDistribution,
		ExternalName:                  s.ExternalName,
		AllocateLoadBalancerNodePorts: s.AllocateLoadBalancerNodePorts,
		LoadBalancerClass:             s.LoadBalancerClass,
		LoadBalancerSourceRanges:      s.LoadBalancerSourceRanges,
	}
	for i := range spec.Ports {
		spec.Ports[i].NodePort = 0
	}
	// Without the external IPs, only these types are externally accessible
	// (the API server refuses an external traffic policy on others).
	if usesNodePorts(spec.Type) {
		spec.ExternalTrafficPolicy = s.ExternalTrafficPolicy
	}
	if isHeadless(s) {
		spec.ClusterIP = corev1.ClusterIPNone
		spec.ClusterIPs = []string{corev1.ClusterIPNone}
	}
	return &corev1.Service{ObjectMeta: remoteMeta(env, svc, twinNamespace), Spec: spec}, "", nil
}

func (serviceTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*corev1.Service), remote.(*corev1.Service)
	if !metaEqual(w, r) {
		return false
	}
	ws, rs := ownedServiceSpec(&w.Spec), ownedServiceSpec(&r.Spec)
	if w.Spec.IPFamilyPolicy == nil {
		// The provider chose it.
		rs.IPFamilyPolicy = nil
	}
	return equality.Semantic.DeepEqual(ws, rs)
}

func (serviceTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*corev1.Service).DeepCopy(), remote.(*corev1.Service).DeepCopy()
	mergeMeta(w, merged)
	ws, spec := &w.Spec, &merged.Spec
	spec.Type = ws.Type
	spec.Selector = ws.Selector
	spec.Ports = withNodePorts(ws.Type, ws.Ports, spec.Ports)
	spec.SessionAffinity = ws.SessionAffinity
	spec.SessionAffinityConfig = ws.SessionAffinityConfig
	spec.PublishNotReadyAddresses = ws.PublishNotReadyAddresses
	// Empty unless the type has node ports; the API server defaults it if
	// the provider's external IPs make the Service externally accessible.
	spec.ExternalTrafficPolicy = ws.ExternalTrafficPolicy
	spec.InternalTrafficPolicy = ws.InternalTrafficPolicy
	if ws.IPFamilyPolicy != nil {
		spec.IPFamilyPolicy = ws.IPFamilyPolicy
	}
	spec.TrafficDistribution = ws.TrafficDistribution
	spec.ExternalName = ws.ExternalName
	spec.AllocateLoadBalancerNodePorts = ws.AllocateLoadBalancerNodePorts
	spec.LoadBalancerClass = ws.LoadBalancerClass
	spec.LoadBalancerSourceRanges = ws.LoadBalancerSourceRanges
	switch {
	case ws.Type == corev1.ServiceTypeExternalName:
		// No cluster IP: the provider releases them.
		spec.ClusterIP, spec.ClusterIPs = "", nil
		spec.IPFamilies, spec.IPFamilyPolicy = nil, nil
	case isHeadless(ws) && !isHeadless(spec):
		// Refused unless the copy was an ExternalName one (a cluster IP
		// is immutable): the copy is recreated.
		spec.ClusterIP, spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	case !isHeadless(ws) && isHeadless(spec):
		// The API server keeps "None"; equal reports the drift.
		spec.ClusterIP, spec.ClusterIPs = "", nil
	}
	if spec.Type != corev1.ServiceTypeLoadBalancer || spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		spec.HealthCheckNodePort = 0
	}
	return merged
}

// withNodePorts is ports (a copy of want's) with the node ports the provider
// assigned to the same ports of remote, matched by name, else by port number
// and protocol; none when typ has no node ports.
func withNodePorts(typ corev1.ServiceType, ports, remote []corev1.ServicePort) []corev1.ServicePort {
	used := make([]bool, len(remote))
	match := func(same func(r *corev1.ServicePort) bool) int32 {
		for i := range remote {
			if !used[i] && same(&remote[i]) {
				used[i] = true
				return remote[i].NodePort
			}
		}
		return 0
	}
	for i := range ports {
		p := &ports[i]
		p.NodePort = 0
		if !usesNodePorts(typ) {
			continue
		}
		p.NodePort = match(func(r *corev1.ServicePort) bool { return r.Name == p.Name })
		if p.NodePort == 0 {
			p.NodePort = match(func(r *corev1.ServicePort) bool {
				return r.Port == p.Port && portProtocol(r.Protocol) == portProtocol(p.Protocol)
			})
		}
	}
	return ports
}

// ownedServiceSpec is the part of spec ferry writes, defaulted as the API
// server defaults it, so a copy read back compares equal to what was
// written.
func ownedServiceSpec(spec *corev1.ServiceSpec) corev1.ServiceSpec {
	s := spec.DeepCopy()
	out := corev1.ServiceSpec{
		Type:                          s.Type,
		Selector:                      s.Selector,
		Ports:                         s.Ports,
		SessionAffinity:               s.SessionAffinity,
		SessionAffinityConfig:         s.SessionAffinityConfig,
		PublishNotReadyAddresses:      s.PublishNotReadyAddresses,
		ExternalTrafficPolicy:         s.ExternalTrafficPolicy,
		InternalTrafficPolicy:         s.InternalTrafficPolicy,
		IPFamilyPolicy:                s.IPFamilyPolicy,
		TrafficDistribution:           s.TrafficDistribution,
		ExternalName:                  s.ExternalName,
		AllocateLoadBalancerNodePorts: s.AllocateLoadBalancerNodePorts,
		LoadBalancerClass:             s.LoadBalancerClass,
		LoadBalancerSourceRanges:      s.LoadBalancerSourceRanges,
	}
	if out.Type == "" {
		out.Type = corev1.ServiceTypeClusterIP
	}
	if isHeadless(s) {
		out.ClusterIP = corev1.ClusterIPNone
	}
	for i := range out.Ports {
		p := &out.Ports[i]
		p.NodePort = 0
		p.Protocol = portProtocol(p.Protocol)
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if out.SessionAffinity == "" {
		out.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch out.SessionAffinity {
	case corev1.ServiceAffinityNone:
		out.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := out.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			out.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	switch {
	case !usesNodePorts(out.Type):
		// Only the provider's external IPs would make it apply.
		out.ExternalTrafficPolicy = ""
	case out.ExternalTrafficPolicy == "":
		out.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	switch {
	case out.Type == corev1.ServiceTypeExternalName:
		out.InternalTrafficPolicy = nil
	case out.InternalTrafficPolicy == nil:
		out.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if out.Type == corev1.ServiceTypeLoadBalancer && out.AllocateLoadBalancerNodePorts == nil {
		out.AllocateLoadBalancerNodePorts = new(true)
	}
	return out
}

// usesNodePorts tells whether Services of type typ have node ports (and are
// reachable from outside the cluster).
func usesNodePorts(typ corev1.ServiceType) bool {
	return typ == corev1.ServiceTypeNodePort || typ == corev1.ServiceTypeLoadBalancer
}

func isHeadless(spec *corev1.ServiceSpec) bool {
	return spec.ClusterIP == corev1.ClusterIPNone
}

// portProtocol is p as the API server defaults it.
func portProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
