package reflection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// localService is a NodePort Service as the consumer's API server serves it:
// defaulted, with its cluster IP, node ports and external IPs.
func localService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: localObjectMeta("web"),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, AppProtocol: new("http"), Port: 9090, TargetPort: intstr.FromString("metrics"), NodePort: 30090},
			},
			ClusterIP:             "10.96.0.10",
			ClusterIPs:            []string{"10.96.0.10"},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        new(corev1.IPFamilyPolicySingleStack),
			ExternalIPs:           []string{"192.168.1.10"},
			SessionAffinity:       corev1.ServiceAffinityNone,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// reflectedServicePorts are localService's ports as reflected.
func reflectedServicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
		{Name: "metrics", Protocol: corev1.ProtocolTCP, AppProtocol: new("http"), Port: 9090, TargetPort: intstr.FromString("metrics")},
	}
}

// providerService is what the provider's API server makes of want: defaults
// filled in, cluster IP, IP families and node ports assigned.
func providerService(want *corev1.Service) *corev1.Service {
	s := want.DeepCopy()
	assignIdentity(s)
	spec := &s.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
		if usesNodePorts(spec.Type) {
			p.NodePort = 31000 + int32(i)
		}
	}
	if spec.Type == corev1.ServiceTypeExternalName {
		return s
	}
	if usesNodePorts(spec.Type) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			spec.AllocateLoadBalancerNodePorts = new(true)
		}
		if spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			spec.HealthCheckNodePort = 32000
		}
	}
	if spec.IPFamilyPolicy == nil {
		spec.IPFamilyPolicy = new(corev1.IPFamilyPolicySingleStack)
	}
	spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	if spec.ClusterIP != corev1.ClusterIPNone {
		spec.ClusterIP, spec.ClusterIPs = "10.100.0.5", []string{"10.100.0.5"}
	}
	return s
}

func TestServiceTranslatorDesired(t *testing.T) {
	tests := []struct {
		name   string
		change func(*corev1.Service)
		want   corev1.ServiceSpec
	}{{
		name:   "node port",
		change: func(*corev1.Service) {},
		want: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeNodePort,
			Selector:              map[string]string{"app": "web"},
			Ports:                 reflectedServicePorts(),
			IPFamilyPolicy:        new(corev1.IPFamilyPolicySingleStack),
			SessionAffinity:       corev1.ServiceAffinityNone,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}, {
		name: "headless with session affinity",
		change: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.ExternalIPs = corev1.ServiceTypeClusterIP, "", nil
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			s.Spec.Ports = reflectedServicePorts()
			s.Spec.PublishNotReadyAddresses = true
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(60))}}
		},
		want: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			ClusterIPs:               []string{corev1.ClusterIPNone},
			Selector:                 map[string]string{"app": "web"},
			Ports:                    reflectedServicePorts(),
			IPFamilyPolicy:           new(corev1.IPFamilyPolicySingleStack),
			PublishNotReadyAddresses: true,
			SessionAffinity:          corev1.ServiceAffinityClientIP,
			SessionAffinityConfig:    &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(60))}},
			InternalTrafficPolicy:    new(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}, {
		name: "cluster IP reached at external IPs",
		change: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			s.Spec.TrafficDistribution = new(corev1.ServiceTrafficDistributionPreferSameZone)
		},
		want: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			Selector:              map[string]string{"app": "web"},
			Ports:                 reflectedServicePorts(),
			IPFamilyPolicy:        new(corev1.IPFamilyPolicySingleStack),
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyCluster),
			TrafficDistribution:   new(corev1.ServiceTrafficDistributionPreferSameZone),
		},
	}, {
		name: "load balancer",
		change: func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.HealthCheckNodePort = 32456
			s.Spec.LoadBalancerIP = "203.0.113.7"
			s.Spec.LoadBalancerClass = new("example.com/lb")
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
			s.Spec.AllocateLoadBalancerNodePorts = new(false)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		},
		want: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			Selector:                      map[string]string{"app": "web"},
			Ports:                         reflectedServicePorts(),
			IPFamilyPolicy:                new(corev1.IPFamilyPolicySingleStack),
			SessionAffinity:               corev1.ServiceAffinityNone,
			ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy:         new(corev1.ServiceInternalTrafficPolicyCluster),
			LoadBalancerClass:             new("example.com/lb"),
			LoadBalancerSourceRanges:      []string{"198.51.100.0/24"},
			AllocateLoadBalancerNodePorts: new(false),
		},
	}, {
		name: "external name",
		change: func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone}
		},
		want: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", SessionAffinity: corev1.ServiceAffinityNone},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := localService()
			tt.change(local)
			before := local.DeepCopy()
			got, skip, err := serviceTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil || skip != "" {
				t.Fatalf("desired: %v, skip %q", err, skip)
			}
			want := got.(*corev1.Service)
			checkReflectedMeta(t, want, "web", reflectedLabels(nil))
			if !equality.Semantic.DeepEqual(want.Spec, tt.want) {
				t.Errorf("spec =\n%+v\nwant\n%+v", want.Spec, tt.want)
			}
			if !equality.Semantic.DeepEqual(want.Status, corev1.ServiceStatus{}) {
				t.Errorf("status copied: %+v", want.Status)
			}
			if !equality.Semantic.DeepEqual(local, before) {
				t.Error("desired changed the local Service")
			}
		})
	}
}

func TestServiceTranslatorEqual(t *testing.T) {
	tests := []struct {
		name   string
		local  func() *corev1.Service // localService when nil
		change func(*corev1.Service)
		equal  bool
	}{
		{name: "assigned by the provider", change: func(*corev1.Service) {}, equal: true},
		{name: "undefaulted local, defaulted by the provider", local: func() *corev1.Service {
			return &corev1.Service{
				ObjectMeta: localObjectMeta("web"),
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "web"},
					Ports:    []corev1.ServicePort{{Port: 80}},
				},
			}
		}, change: func(*corev1.Service) {}, equal: true},
		{name: "undefaulted load balancer, defaulted by the provider", local: func() *corev1.Service {
			return &corev1.Service{
				ObjectMeta: localObjectMeta("web"),
				Spec: corev1.ServiceSpec{
					Type:            corev1.ServiceTypeLoadBalancer,
					Ports:           []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromString("https")}},
					SessionAffinity: corev1.ServiceAffinityClientIP,
				},
			}
		}, change: func(s *corev1.Service) {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{
				TimeoutSeconds: new(corev1.DefaultClientIPServiceAffinitySeconds),
			}}
		}, equal: true},
		{name: "headless, assigned by the provider", local: func() *corev1.Service {
			s := localService()
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			return s
		}, change: func(*corev1.Service) {}, equal: true},
		{name: "provider's external IPs and load balancer status", change: func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"172.16.0.9"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.16.0.9"}}
		}, equal: true},
		{name: "dual stack chosen by the provider", local: func() *corev1.Service {
			s := localService()
			s.Spec.IPFamilyPolicy = nil
			return s
		}, change: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = new(corev1.IPFamilyPolicyPreferDualStack)
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			s.Spec.ClusterIPs = []string{"10.100.0.5", "fd00::5"}
		}, equal: true},
		{name: "selector changed", change: func(s *corev1.Service) { s.Spec.Selector["app"] = "other" }},
		{name: "selector removed", change: func(s *corev1.Service) { s.Spec.Selector = nil }},
		{name: "label removed", change: func(s *corev1.Service) { delete(s.Labels, "app") }},
		{name: "port changed", change: func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 }},
		{name: "target port changed", change: func(s *corev1.Service) { s.Spec.Ports[1].TargetPort = intstr.FromInt32(9091) }},
		{name: "app protocol removed", change: func(s *corev1.Service) { s.Spec.Ports[1].AppProtocol = nil }},
		{name: "port removed", change: func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[:1] }},
		{name: "type changed", change: func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
		}},
		{name: "external traffic policy changed", change: func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}},
		{name: "internal traffic policy changed", change: func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal)
		}},
		{name: "IP family policy changed", change: func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = new(corev1.IPFamilyPolicyRequireDualStack)
		}},
		{name: "session affinity changed", change: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }},
		{name: "made headless", change: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := localService()
			if tt.local != nil {
				local = tt.local()
			}
			want, _, err := serviceTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := providerService(want.(*corev1.Service))
			tt.change(remote)
			if got := (serviceTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestServiceTranslatorMerge(t *testing.T) {
	nodePorts := func(s *corev1.Service) map[string]int32 {
		out := map[string]int32{}
		for _, p := range s.Spec.Ports {
			out[p.Name] = p.NodePort
		}
		return out
	}
	tests := []struct {
		name string
		// was is the local Service the remote one was made from, now the
		// local one.
		was, now func() *corev1.Service
		check    func(t *testing.T, remote, merged *corev1.Service)
	}{{
		name: "ports reordered, one renamed, one added",
		was:  localService,
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Ports[0], s.Spec.Ports[1] = s.Spec.Ports[1], s.Spec.Ports[0]
			s.Spec.Ports[1].Name = "web" // was "http", port 80/TCP
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
			return s
		},
		check: func(t *testing.T, remote, merged *corev1.Service) {
			was := nodePorts(remote)
			got := nodePorts(merged)
			if got["metrics"] != was["metrics"] || got["web"] != was["http"] || got["dns"] != 0 {
				t.Errorf("node ports = %v, want those of %v matched by name, else port, and none for the new port", got, was)
			}
		},
	}, {
		name: "node port to cluster IP",
		was:  localService,
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
			return s
		},
		check: func(t *testing.T, _, merged *corev1.Service) {
			for _, p := range merged.Spec.Ports {
				if p.NodePort != 0 {
					t.Errorf("port %s keeps node port %d", p.Name, p.NodePort)
				}
			}
			if merged.Spec.ExternalTrafficPolicy != "" {
				t.Errorf("external traffic policy %q on a cluster IP Service", merged.Spec.ExternalTrafficPolicy)
			}
		},
	}, {
		name: "cluster IP to load balancer with local traffic",
		was: func() *corev1.Service {
			s := localService()
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
			return s
		},
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = new(true)
			return s
		},
		check: func(t *testing.T, _, merged *corev1.Service) {
			if merged.Spec.Type != corev1.ServiceTypeLoadBalancer || merged.Spec.HealthCheckNodePort != 0 {
				t.Errorf("type %s, health check node port %d: want LoadBalancer, left for the provider to assign", merged.Spec.Type, merged.Spec.HealthCheckNodePort)
			}
			for _, p := range merged.Spec.Ports {
				if p.NodePort != 0 {
					t.Errorf("port %s has node port %d the provider did not assign", p.Name, p.NodePort)
				}
			}
		},
	}, {
		name: "load balancer keeps its health check node port",
		was: func() *corev1.Service {
			s := localService()
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			return s
		},
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Selector = map[string]string{"app": "web", "tier": "front"}
			return s
		},
		check: func(t *testing.T, remote, merged *corev1.Service) {
			if merged.Spec.HealthCheckNodePort != remote.Spec.HealthCheckNodePort || merged.Spec.HealthCheckNodePort == 0 {
				t.Errorf("health check node port = %d, want %d", merged.Spec.HealthCheckNodePort, remote.Spec.HealthCheckNodePort)
			}
			if merged.Spec.Selector["tier"] != "front" {
				t.Errorf("selector = %v", merged.Spec.Selector)
			}
		},
	}, {
		name: "load balancer to cluster traffic drops the health check node port",
		was: func() *corev1.Service {
			s := localService()
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			return s
		},
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			return s
		},
		check: func(t *testing.T, _, merged *corev1.Service) {
			if merged.Spec.HealthCheckNodePort != 0 {
				t.Errorf("health check node port = %d, want none", merged.Spec.HealthCheckNodePort)
			}
		},
	}, {
		name: "to external name",
		was:  localService,
		now: func() *corev1.Service {
			s := localService()
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}
			return s
		},
		check: func(t *testing.T, _, merged *corev1.Service) {
			s := merged.Spec
			if s.ClusterIP != "" || s.ClusterIPs != nil || s.IPFamilies != nil || s.IPFamilyPolicy != nil || s.InternalTrafficPolicy != nil {
				t.Errorf("external name Service keeps cluster IP fields: %+v", s)
			}
		},
	}, {
		name: "made headless",
		was:  localService,
		now: func() *corev1.Service {
			s := localService()
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, ""
			s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			return s
		},
		check: func(t *testing.T, _, merged *corev1.Service) {
			// The provider refuses it (immutable): the copy is recreated.
			if merged.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("cluster IP = %q, want None", merged.Spec.ClusterIP)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := serviceTranslator{}
			was, _, err := tr.desired(translatorEnv(), tt.was(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := providerService(was.(*corev1.Service))
			remote.Labels["stale"] = "x"
			remote.Spec.ExternalIPs = []string{"172.16.0.9"}
			remote.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.16.0.9"}}
			before := remote.DeepCopy()
			want, _, err := tr.desired(translatorEnv(), tt.now(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}

			merged := tr.merge(want, remote).(*corev1.Service)
			checkKeptIdentity(t, merged)
			if !equality.Semantic.DeepEqual(remote, before) {
				t.Fatal("merge changed the remote object")
			}
			if merged.Labels["stale"] != "" {
				t.Error("merge kept a stale label")
			}
			if !equality.Semantic.DeepEqual(merged.Spec.ExternalIPs, remote.Spec.ExternalIPs) ||
				!equality.Semantic.DeepEqual(merged.Status, remote.Status) {
				t.Error("merge dropped the provider's external IPs or status")
			}
			if merged.Spec.Type != corev1.ServiceTypeExternalName && merged.Spec.ClusterIP != corev1.ClusterIPNone &&
				(merged.Spec.ClusterIP != remote.Spec.ClusterIP || !equality.Semantic.DeepEqual(merged.Spec.IPFamilies, remote.Spec.IPFamilies)) {
				t.Errorf("merge dropped the cluster IP %q or IP families %v", remote.Spec.ClusterIP, remote.Spec.IPFamilies)
			}
			tt.check(t, remote, merged)
			if !tr.equal(want, merged) {
				t.Errorf("merged copy\n%+v\ndoes not equal\n%+v", merged.Spec, want.(*corev1.Service).Spec)
			}
		})
	}
}

func TestServiceTranslatorMergeKeepsNodePortsOfAnUnnamedPort(t *testing.T) {
	tr := serviceTranslator{}
	local := localService()
	local.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}
	want, _, err := tr.desired(translatorEnv(), local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := providerService(want.(*corev1.Service))
	local.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	want, _, err = tr.desired(translatorEnv(), local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	merged := tr.merge(want, remote).(*corev1.Service)
	if got := merged.Spec.Ports[0]; got.NodePort != remote.Spec.Ports[0].NodePort || got.TargetPort != intstr.FromInt32(8080) {
		t.Errorf("port = %+v, want target port 8080 and node port %d", got, remote.Spec.Ports[0].NodePort)
	}
	if !tr.equal(want, merged) {
		t.Error("merged copy does not equal the desired one")
	}
}

func TestServiceMustRecreate(t *testing.T) {
	svc := func(typ corev1.ServiceType, clusterIP string) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP}}
	}
	tr := serviceTranslator{}
	for _, tc := range []struct {
		want, remote *corev1.Service
		recreate     bool
	}{
		{svc(corev1.ServiceTypeClusterIP, ""), svc(corev1.ServiceTypeClusterIP, "10.0.0.1"), false},
		{svc(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone), svc(corev1.ServiceTypeClusterIP, "10.0.0.1"), true},
		{svc(corev1.ServiceTypeClusterIP, ""), svc(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone), true},
		{svc(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone), svc(corev1.ServiceTypeExternalName, ""), false},
		{svc(corev1.ServiceTypeNodePort, ""), svc(corev1.ServiceTypeClusterIP, "10.0.0.1"), false},
	} {
		if got := tr.mustRecreate(tc.want, tc.remote); got != tc.recreate {
			t.Errorf("want %s/%q, remote %s/%q: mustRecreate = %v, want %v", tc.want.Spec.Type, tc.want.Spec.ClusterIP,
				tc.remote.Spec.Type, tc.remote.Spec.ClusterIP, got, tc.recreate)
		}
	}
}
