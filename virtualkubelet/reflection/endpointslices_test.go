package reflection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// localEndpointSlice is the slice the consumer's EndpointSlice controller
// keeps for Service web: a local pod, an offloaded one (on the virtual node
// ferry-provider) and one offloaded to another provider.
func localEndpointSlice() *discoveryv1.EndpointSlice {
	meta := localObjectMeta("web-abcde")
	meta.Labels[discoveryv1.LabelServiceName] = "web"
	meta.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  meta,
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(8080))}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.1.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
			Hostname:   new("web-0"),
			NodeName:   new("worker-1"),
			Zone:       new("zone-a"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "pod-uid"},
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}},
		}, {
			Addresses:  []string{"10.50.0.7"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			NodeName:   new("ferry-provider"),
		}, {
			Addresses:  []string{"10.60.0.8"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(false)},
			NodeName:   new("ferry-other-provider"),
		}},
	}
}

func TestEndpointSliceTranslatorDesired(t *testing.T) {
	tests := []struct {
		name      string
		change    func(*discoveryv1.EndpointSlice)
		skip      bool
		endpoints []discoveryv1.Endpoint
	}{{
		name:   "remapped, offloaded pods dropped",
		change: func(*discoveryv1.EndpointSlice) {},
		endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.200.1.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
			Hostname:   new("web-0"),
			Zone:       new("zone-a"),
		}, {
			Addresses:  []string{"10.60.0.8"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(false)},
		}},
	}, {
		name: "only offloaded pods",
		change: func(es *discoveryv1.EndpointSlice) {
			es.Endpoints = es.Endpoints[1:2]
		},
		endpoints: []discoveryv1.Endpoint{},
	}, {
		name: "IPv6",
		change: func(es *discoveryv1.EndpointSlice) {
			es.AddressType = discoveryv1.AddressTypeIPv6
			es.Endpoints = es.Endpoints[2:]
			es.Endpoints[0].Addresses = []string{"fd00::8"}
		},
		endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"fd00::8"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(false)},
		}},
	}, {
		name:   "not a Service's",
		change: func(es *discoveryv1.EndpointSlice) { delete(es.Labels, discoveryv1.LabelServiceName) },
		skip:   true,
	}, {
		name:   "FQDN",
		change: func(es *discoveryv1.EndpointSlice) { es.AddressType = discoveryv1.AddressTypeFQDN },
		skip:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := localEndpointSlice()
			tt.change(local)
			before := local.DeepCopy()
			got, skip, err := endpointSliceTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			if tt.skip {
				if skip == "" || got != nil {
					t.Fatalf("desired = %v, %q; want skipped with a reason", got, skip)
				}
				return
			}
			if skip != "" {
				t.Fatalf("skipped: %s", skip)
			}
			want := got.(*discoveryv1.EndpointSlice)
			checkReflectedMeta(t, want, "web-abcde", reflectedLabels(map[string]string{
				discoveryv1.LabelServiceName: "web",
				discoveryv1.LabelManagedBy:   endpointSliceManager,
			}))
			if want.AddressType != local.AddressType || !equality.Semantic.DeepEqual(want.Ports, local.Ports) {
				t.Errorf("address type %s, ports %v; want %s, %v", want.AddressType, want.Ports, local.AddressType, local.Ports)
			}
			if want.Endpoints == nil || !equality.Semantic.DeepEqual(want.Endpoints, tt.endpoints) {
				t.Errorf("endpoints =\n%+v\nwant\n%+v", want.Endpoints, tt.endpoints)
			}
			if !equality.Semantic.DeepEqual(local, before) {
				t.Error("desired changed the local EndpointSlice")
			}
		})
	}
}

func TestEndpointSliceTranslatorDesiredWithoutRemap(t *testing.T) {
	env := translatorEnv()
	env.RemapIP = nil
	got, _, err := endpointSliceTranslator{}.desired(env, localEndpointSlice(), "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	if a := got.(*discoveryv1.EndpointSlice).Endpoints[0].Addresses; len(a) != 1 || a[0] != "10.0.1.5" {
		t.Errorf("addresses = %v, want the local ones", a)
	}
}

func TestEndpointSliceTranslatorEqual(t *testing.T) {
	tests := []struct {
		name   string
		change func(*discoveryv1.EndpointSlice)
		equal  bool
	}{
		{name: "as created", change: func(*discoveryv1.EndpointSlice) {}, equal: true},
		{name: "port added", change: func(es *discoveryv1.EndpointSlice) {
			es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: new("metrics"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(9090))})
		}},
		{name: "endpoint address changed", change: func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses[0] = "10.0.1.5" }},
		{name: "endpoint removed", change: func(es *discoveryv1.EndpointSlice) { es.Endpoints = es.Endpoints[:1] }},
		{name: "endpoint not ready", change: func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Conditions.Ready = new(false) }},
		{name: "port changed", change: func(es *discoveryv1.EndpointSlice) { es.Ports[0].Port = new(int32(8081)) }},
		{name: "managed-by label changed", change: func(es *discoveryv1.EndpointSlice) {
			es.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
		}},
		{name: "service-name label removed", change: func(es *discoveryv1.EndpointSlice) { delete(es.Labels, discoveryv1.LabelServiceName) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _, err := endpointSliceTranslator{}.desired(translatorEnv(), localEndpointSlice(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := want.DeepCopyObject().(*discoveryv1.EndpointSlice)
			assignIdentity(remote)
			tt.change(remote)
			if got := (endpointSliceTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestEndpointSliceTranslatorEqualDefaultsAndEmpty(t *testing.T) {
	local := localEndpointSlice()
	local.Ports = []discoveryv1.EndpointPort{{Port: new(int32(8080))}}
	local.Endpoints = local.Endpoints[1:2] // offloaded only: none reflected
	want, _, err := endpointSliceTranslator{}.desired(translatorEnv(), local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := want.DeepCopyObject().(*discoveryv1.EndpointSlice)
	assignIdentity(remote)
	remote.Ports[0].Name, remote.Ports[0].Protocol = new(""), new(corev1.ProtocolTCP)
	remote.Endpoints = nil
	if !(endpointSliceTranslator{}).equal(want, remote) {
		t.Error("defaulted ports or no endpoints read back as null are drift")
	}
}

func TestEndpointSliceTranslatorMerge(t *testing.T) {
	tr := endpointSliceTranslator{}
	want, _, err := tr.desired(translatorEnv(), localEndpointSlice(), "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abcde", Namespace: "shop-home", Labels: map[string]string{"stale": "x"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.200.9.9"}}},
	}
	assignIdentity(remote)
	before := remote.DeepCopy()

	merged := tr.merge(want, remote)
	checkKeptIdentity(t, merged)
	if !tr.equal(want, merged) {
		t.Errorf("merged copy %+v does not equal %+v", merged, want)
	}
	if !equality.Semantic.DeepEqual(remote, before) {
		t.Error("merge changed the remote object")
	}
}

// TestEndpointSlicesOfAProvidersOtherPoolsAreNotReflected: with a provider
// split into node pools, the endpoints on each of its virtual nodes are the
// provider's own; the reflection of every pool's virtual kubelet writes the
// same slice, so the pools' virtual kubelets never fight over it.
func TestEndpointSlicesOfAProvidersOtherPoolsAreNotReflected(t *testing.T) {
	local := localEndpointSlice()
	local.Endpoints = append(local.Endpoints, discoveryv1.Endpoint{
		Addresses: []string{"10.50.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}, NodeName: new("ferry-provider-t4-1234abcd"),
	})
	pools := map[string]bool{"ferry-provider": true, "ferry-provider-t4-1234abcd": true}
	var seen []*discoveryv1.EndpointSlice
	for _, node := range []string{"ferry-provider", "ferry-provider-t4-1234abcd"} {
		env := translatorEnv()
		env.NodeName = node
		env.ProviderNode = func(n string) bool { return pools[n] }
		got, _, err := endpointSliceTranslator{}.desired(env, local, "shop-home")
		if err != nil {
			t.Fatal(err)
		}
		es := got.(*discoveryv1.EndpointSlice)
		for _, e := range es.Endpoints {
			for _, a := range e.Addresses {
				if a == "10.50.0.9" || a == "10.50.0.7" {
					t.Errorf("the reflection of %s reflects the provider's own endpoint %s", node, a)
				}
			}
		}
		seen = append(seen, es)
	}
	if !equality.Semantic.DeepEqual(seen[0].Endpoints, seen[1].Endpoints) {
		t.Errorf("two pools' reflections want different slices:\n%+v\n%+v", seen[0].Endpoints, seen[1].Endpoints)
	}
}
