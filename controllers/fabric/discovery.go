package fabric

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/netdetect"
)

// discovered is what this cluster learnt of its own network, and how.
type discovered struct {
	podCIDR, serviceCIDR     netip.Prefix
	podSource, serviceSource string
	apiServer                netip.Addr
	apiServerPort            int32
	nodeIPs                  []netip.Addr
}

// errPodCIDRUnknown says the pod CIDR is neither configured nor detectable.
var errPodCIDRUnknown = errors.New("pod CIDR unknown")

// discover reads the cluster's networks: flags first, then the nodes'
// spec.podCIDRs (real nodes only) for the pod CIDR, the API server's
// ServiceCIDR "kubernetes" for the service CIDR, and the default/kubernetes
// Service for the API server's address.
func discover(ctx context.Context, cached, direct client.Reader, s settings) (discovered, error) {
	var d discovered
	var nodes corev1.NodeList
	if err := cached.List(ctx, &nodes); err != nil {
		return d, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				d.nodeIPs = append(d.nodeIPs, ip.Unmap())
			}
		}
	}
	detected, ranges, found := netdetect.PodCIDR(nodes.Items)
	switch {
	case s.podCIDR.IsValid():
		d.podCIDR, d.podSource = s.podCIDR, "from --pod-cidr"
	case found:
		d.podCIDR = detected
		d.podSource = fmt.Sprintf("detected from the spec.podCIDRs of %d nodes (their covering range, at least a /%d); set --pod-cidr to be exact", ranges, netdetect.MinDetectedBits)
	default:
		return d, fmt.Errorf("%w: --pod-cidr is not set and no node of this cluster has spec.podCIDRs to detect it from", errPodCIDRUnknown)
	}

	switch {
	case s.serviceCIDR.IsValid():
		d.serviceCIDR, d.serviceSource = s.serviceCIDR, "from --service-cidr"
	default:
		var sc networkingv1.ServiceCIDR
		err := direct.Get(ctx, types.NamespacedName{Name: netdetect.ServiceCIDRName}, &sc)
		switch {
		case err == nil:
			if p, ok := netdetect.ServiceCIDR(&sc, d.podCIDR.Addr().Is4()); ok {
				d.serviceCIDR, d.serviceSource = p, "read from the API server's ServiceCIDR kubernetes"
			}
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || apierrors.IsForbidden(err):
		default:
			return d, fmt.Errorf("read ServiceCIDR kubernetes: %w", err)
		}
		if !d.serviceCIDR.IsValid() {
			d.serviceSource = "unknown: the API server serves no ServiceCIDR kubernetes; set --service-cidr so that no peer is mapped onto it"
		}
	}

	var svc corev1.Service
	if err := direct.Get(ctx, types.NamespacedName{Namespace: corev1.NamespaceDefault, Name: "kubernetes"}, &svc); err == nil {
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
			d.apiServer = ip.Unmap()
			d.apiServerPort = 443
			for _, p := range svc.Spec.Ports {
				if p.Name == "https" || len(svc.Spec.Ports) == 1 {
					d.apiServerPort = p.Port
				}
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return d, fmt.Errorf("read Service default/kubernetes: %w", err)
	}
	return d, nil
}
