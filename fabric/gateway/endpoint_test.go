package gateway

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int32
	}{
		{"203.0.113.7:51820", "203.0.113.7", 51820},
		{"gw.example.com:1", "gw.example.com", 1},
		{"[fd00::7]:65535", "fd00::7", 65535},
		{"gw:051820", "gw", 51820},
	} {
		host, port, err := ParseEndpoint(tc.in)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("ParseEndpoint(%q) = %q, %d, %v; want %q, %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
	for in, want := range map[string]string{
		"203.0.113.7":                     "want address:port",
		"203.0.113.7:0":                   "not a port number",
		"203.0.113.7:65536":               "not a port number",
		"203.0.113.7:-1":                  "not a port number",
		":51820":                          "neither an IP address nor a DNS name",
		"Gw.Example:51820":                "neither an IP address nor a DNS name",
		"gw_1:51820":                      "neither an IP address nor a DNS name",
		"fd00::7:51820":                   "want address:port",
		"[1.2.3.4]:51820":                 "only an IPv6 address is written in brackets",
		"[gw]:51820":                      "only an IPv6 address is written in brackets",
		"[fe80::1%eth0]:5182":             "zone",
		strings.Repeat("a.", 127) + "a:1": "neither an IP address nor a DNS name",
	} {
		if _, _, err := ParseEndpoint(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEndpoint(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func gatewayService(typ corev1.ServiceType, nodePort int32, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-gateway"},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{
			{Name: "metrics", Port: 8443, Protocol: corev1.ProtocolTCP},
			{Name: ServicePortName, Port: 51820, NodePort: nodePort, Protocol: corev1.ProtocolUDP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}}}
}

func TestServiceEndpoint(t *testing.T) {
	se := ServiceEndpoint{Service: "ferry-gateway", PortName: ServicePortName, NodeAddress: "192.168.10.4"}
	for name, tc := range map[string]struct {
		svc      *corev1.Service
		nodeAddr string
		host     string
		port     int32
		err      string
	}{
		"load balancer IP": {svc: gatewayService(corev1.ServiceTypeLoadBalancer, 31820, corev1.LoadBalancerIngress{IP: "203.0.113.9"}),
			host: "203.0.113.9", port: 51820},
		"load balancer name": {svc: gatewayService(corev1.ServiceTypeLoadBalancer, 31820, corev1.LoadBalancerIngress{Hostname: "gw.elb.example"}),
			host: "gw.elb.example", port: 51820},
		"load balancer pending": {svc: gatewayService(corev1.ServiceTypeLoadBalancer, 31820),
			err: "type LoadBalancer has no load balancer address yet"},
		"node port": {svc: gatewayService(corev1.ServiceTypeNodePort, 31820), host: "192.168.10.4", port: 31820},
		"node port, IPv6 node": {svc: gatewayService(corev1.ServiceTypeNodePort, 31820), nodeAddr: "fd00:10::4",
			host: "fd00:10::4", port: 31820},
		"node port not allocated": {svc: gatewayService(corev1.ServiceTypeNodePort, 0), err: "has no node port yet"},
		"node port without the node's address": {svc: gatewayService(corev1.ServiceTypeNodePort, 31820), nodeAddr: "-",
			err: `--node-address "" is not the node's IP address`},
		"cluster IP": {svc: gatewayService(corev1.ServiceTypeClusterIP, 0), err: "of type ClusterIP, which peers cannot reach"},
		"no WireGuard port": {svc: func() *corev1.Service {
			s := gatewayService(corev1.ServiceTypeNodePort, 31820)
			s.Spec.Ports = s.Spec.Ports[:1]
			return s
		}(), err: `has no port named "wireguard"`},
	} {
		t.Run(name, func(t *testing.T) {
			se := se
			switch tc.nodeAddr {
			case "":
			case "-":
				se.NodeAddress = ""
			default:
				se.NodeAddress = tc.nodeAddr
			}
			host, port, err := se.Endpoint(tc.svc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Endpoint = %s, %d, %v; want an error containing %q", host, port, err, tc.err)
				}
				return
			}
			if err != nil || host != tc.host || port != tc.port {
				t.Fatalf("Endpoint = %s, %d, %v; want %s, %d", host, port, err, tc.host, tc.port)
			}
		})
	}
}

// Without --endpoint the gateway publishes what its Service offers, and is
// not ready (publishing nothing) while a LoadBalancer Service has no
// address.
func TestGatewayPublishesTheEndpointOfItsService(t *testing.T) {
	ctx := context.Background()
	local, _ := configs(t, mustKey(t))
	svc := gatewayService(corev1.ServiceTypeLoadBalancer, 31820)
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(local, svc).
		WithStatusSubresource(&ferryv1alpha1.NetworkConfig{}, &corev1.Service{}).Build()
	now := func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }
	r := &Reconciler{Client: c, ClusterID: "home", Now: now, Health: &Health{},
		Settings: Settings{KeySecret: "ferry-gateway-key", PodAddress: netip.MustParseAddr("10.244.1.5"),
			EndpointService: &ServiceEndpoint{Service: "ferry-gateway", PortName: ServicePortName, NodeAddress: "192.168.10.4"},
			DataPlane:       &DataPlane{Links: Links{Prefix: "ferry"}, Log: logr.Discard()}}}
	r.keys = &keyStore{Client: c, key: client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: r.KeySecret}, grace: time.Minute, now: now}
	r.metrics = newCollector(r)
	published := func() *ferryv1alpha1.GatewayEndpoint {
		t.Helper()
		var nc ferryv1alpha1.NetworkConfig
		if err := c.Get(ctx, client.ObjectKeyFromObject(local), &nc); err != nil {
			t.Fatal(err)
		}
		return nc.Spec.Gateway
	}

	_, err := r.Reconcile(ctx, request)
	if err == nil || !strings.Contains(err.Error(), "no load balancer address yet") {
		t.Fatalf("reconcile with a pending load balancer: %v", err)
	}
	if err := r.Health.Check(nil); err == nil || !strings.Contains(err.Error(), "no load balancer address yet") {
		t.Fatalf("readiness with a pending load balancer: %v", err)
	}
	if gw := published(); gw != nil {
		t.Fatalf("published %+v without an endpoint", gw)
	}

	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	if err := c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Reconcile(ctx, request) // the data plane fails (no namespace): only the endpoint matters here
	if gw := published(); gw == nil || gw.Address != "203.0.113.9" || gw.Port != 51820 {
		t.Fatalf("published %+v, want the load balancer's 203.0.113.9:51820", gw)
	}

	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Status = corev1.ServiceStatus{}
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	_, _ = r.Reconcile(ctx, request)
	if gw := published(); gw == nil || gw.Address != "192.168.10.4" || gw.Port != 31820 || gw.PodAddress != "10.244.1.5" {
		t.Fatalf("published %+v, want the node's 192.168.10.4 and the node port 31820", gw)
	}
}
