package reflection

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// endpointSliceManager is the managed-by label of the EndpointSlices ferry
// writes: the provider's EndpointSlice controller leaves them alone. A label
// value, so no "/" (the API server refuses "ferry.io/virtual-kubelet"); named
// like the Kubernetes controllers' ("endpointslice-controller.k8s.io").
const endpointSliceManager = "virtual-kubelet.ferry.io"

// notFerrysEndpointSlice tells the provider's own slices among those
// carrying ferry's origin labels: its EndpointSlice controller copies a
// Service's labels onto the slices it makes for it, so the slices of a
// reflected Service with a selector look like copies. They are not ferry's
// to repair or delete.
func notFerrysEndpointSlice(o client.Object) bool {
	return o.GetLabels()[discoveryv1.LabelManagedBy] != endpointSliceManager
}

// endpointSliceTranslator reflects the EndpointSlices of Services (IPv4 and
// IPv6 ones), so offloaded pods reach the local pods behind a Service by its
// name. The remote copy has the local one's address type, ports and
// endpoints, with every address remapped to where the provider reaches it,
// and only each endpoint's conditions, hostname and zone: its node, target
// pod and topology hints are the consumer's. The endpoints on the virtual
// node are left out: those are offloaded pods, which the provider's own
// EndpointSlices already hold. A slice left with no endpoints is reflected
// all the same. Nothing is left to the provider.
type endpointSliceTranslator struct{}

var _ translator = endpointSliceTranslator{}

func (endpointSliceTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	es, ok := local.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, "", fmt.Errorf("reflect an EndpointSlice: got a %T", local)
	}
	if es.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, "not the EndpointSlice of a Service", nil
	}
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return nil, fmt.Sprintf("%s addresses are not reflected, only IPv4 and IPv6 ones", es.AddressType), nil
	}
	c := es.DeepCopy()
	meta := remoteMeta(env, es, twinNamespace)
	meta.Labels[discoveryv1.LabelManagedBy] = endpointSliceManager
	endpoints := make([]discoveryv1.Endpoint, 0, len(c.Endpoints))
	for _, e := range c.Endpoints {
		if e.NodeName != nil && env.providerNode(*e.NodeName) {
			continue
		}
		addresses := make([]string, 0, len(e.Addresses))
		for _, a := range e.Addresses {
			if ip := env.remapIP(a); ip != "" {
				addresses = append(addresses, ip)
			}
		}
		if len(addresses) == 0 {
			continue // the provider cannot reach it
		}
		endpoints = append(endpoints, discoveryv1.Endpoint{
			Addresses:  addresses,
			Conditions: e.Conditions,
			Hostname:   e.Hostname,
			Zone:       e.Zone,
		})
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  meta,
		AddressType: c.AddressType,
		Endpoints:   endpoints,
		Ports:       c.Ports,
	}, "", nil
}

func (endpointSliceTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*discoveryv1.EndpointSlice), remote.(*discoveryv1.EndpointSlice)
	return metaEqual(w, r) &&
		w.AddressType == r.AddressType &&
		equality.Semantic.DeepEqual(defaultedEndpointPorts(w.Ports), defaultedEndpointPorts(r.Ports)) &&
		equality.Semantic.DeepEqual(w.Endpoints, r.Endpoints)
}

// merge applies want's fields. The address type is immutable: an update
// changing it is refused, and the copy is recreated.
func (endpointSliceTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*discoveryv1.EndpointSlice).DeepCopy(), remote.(*discoveryv1.EndpointSlice).DeepCopy()
	mergeMeta(w, merged)
	merged.AddressType = w.AddressType
	merged.Endpoints = w.Endpoints
	merged.Ports = w.Ports
	return merged
}

// defaultedEndpointPorts is a copy of ports as the API server defaults them.
func defaultedEndpointPorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i, p := range ports {
		out[i] = *p.DeepCopy()
		if out[i].Name == nil {
			out[i].Name = new("")
		}
		if out[i].Protocol == nil {
			out[i].Protocol = new(corev1.ProtocolTCP)
		}
	}
	return out
}
