package gateway

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseEndpoint parses ferry-gateway's --endpoint, the address:port peers
// reach the gateway's WireGuard UDP port at: a DNS name, an IPv4 address or
// a bracketed IPv6 address ([fd00::1]:51820), and a port 1-65535. The
// chart's values.schema.json holds network.gateway.endpoint to the same
// rule; a test of the chart compares the two.
func ParseEndpoint(s string) (host string, port int32, err error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("want address:port: %w", err)
	}
	p, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q is not a port number (1-65535)", portText)
	}
	bracketed := strings.HasPrefix(s, "[")
	if a, err := netip.ParseAddr(host); err == nil {
		switch {
		case a.Zone() != "":
			return "", 0, fmt.Errorf("address %q: an IPv6 zone is not allowed (peers are elsewhere)", host)
		case a.Is6() && !bracketed:
			return "", 0, fmt.Errorf("address %q: write an IPv6 address in brackets, such as [%s]:%s", host, host, portText)
		case a.Is4() && bracketed:
			return "", 0, fmt.Errorf("address %q: only an IPv6 address is written in brackets", host)
		}
		return host, int32(p), nil
	}
	if bracketed {
		return "", 0, fmt.Errorf("address %q: only an IPv6 address is written in brackets", host)
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return "", 0, fmt.Errorf("address %q is neither an IP address nor a DNS name: %s", host, errs[0])
	}
	return host, int32(p), nil
}

// ServicePortName is the name of the gateway Service's WireGuard port.
const ServicePortName = "wireguard"

// ServiceEndpoint finds the gateway's endpoint from its Service, when
// --endpoint is not given: a LoadBalancer Service's load balancer address
// and port, or, for a NodePort Service, the address of the gateway pod's
// node and the node port.
type ServiceEndpoint struct {
	// Service is the gateway's Service, in ferry-system.
	Service string
	// PortName is the Service port of the WireGuard UDP port.
	PortName string
	// NodeAddress is the address of the gateway pod's node (its
	// status.hostIP: the node's InternalIP as the kubelet reports it),
	// advertised with a NodePort Service.
	NodeAddress string
}

// Endpoint is the address and port peers reach the gateway at through svc.
func (s ServiceEndpoint) Endpoint(svc *corev1.Service) (host string, port int32, err error) {
	what := fmt.Sprintf("Service %s/%s", svc.Namespace, svc.Name)
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == s.PortName {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", 0, fmt.Errorf("%s has no port named %q (the WireGuard UDP port)", what, s.PortName)
	}
	if sp.Protocol != corev1.ProtocolUDP {
		return "", 0, fmt.Errorf("%s: port %s is %s, not UDP", what, s.PortName, sp.Protocol)
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			switch {
			case in.IP != "":
				return in.IP, sp.Port, nil
			case in.Hostname != "":
				return in.Hostname, sp.Port, nil
			}
		}
		return "", 0, fmt.Errorf("%s of type LoadBalancer has no load balancer address yet "+
			"(a cluster without a load balancer never gives one: use type NodePort, chart value network.gateway.serviceType, or set --endpoint)", what)
	case corev1.ServiceTypeNodePort:
		if sp.NodePort == 0 {
			return "", 0, fmt.Errorf("%s of type NodePort: port %s has no node port yet", what, s.PortName)
		}
		a, err := netip.ParseAddr(s.NodeAddress)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			return "", 0, fmt.Errorf("%s of type NodePort: --node-address %q is not the node's IP address (set it, or $HOST_IP from the downward API's status.hostIP)", what, s.NodeAddress)
		}
		return a.String(), sp.NodePort, nil
	default:
		return "", 0, fmt.Errorf("%s is of type %s, which peers cannot reach: use LoadBalancer or NodePort, or set --endpoint", what, svc.Spec.Type)
	}
}
