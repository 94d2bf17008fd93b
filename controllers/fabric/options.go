package fabric

import (
	"fmt"
	"net/netip"

	"github.com/ferry-io/ferry/fabric"
)

// DefaultPool is where remapped and external CIDRs come from unless
// --ipam-pool says otherwise: 10.64.0.0-10.95.255.255, clear of the usual
// Kubernetes defaults (services 10.96.0.0/12, pods 10.244.0.0/16, k3s'
// 10.42/10.43).
const DefaultPool = "10.64.0.0/11"

// Options configure the network fabric's control plane.
type Options struct {
	// Disabled turns the fabric off for clusters whose networks already
	// reach each other (a flat network): pod addresses pass unchanged and
	// NetworkReady says the fabric is disabled.
	Disabled bool
	// PodCIDR is this cluster's pod network; empty: detected from the
	// nodes' spec.podCIDRs.
	PodCIDR string
	// ServiceCIDR is this cluster's Service range; empty: read from the
	// API server's ServiceCIDR "kubernetes".
	ServiceCIDR string
	// Pool is where remapped CIDRs and the external CIDR come from
	// (DefaultPool when empty).
	Pool []string
	// Reserved are ranges the IPAM never hands out nor lets a peer keep
	// (networks of this cluster it cannot see, such as the nodes' subnet).
	Reserved []string
}

// settings are Options parsed.
type settings struct {
	disabled             bool
	podCIDR, serviceCIDR netip.Prefix
	pool, reserved       []netip.Prefix
}

// Validate reports the first bad option, naming its flag.
func (o Options) Validate() error {
	_, err := o.parse()
	return err
}

func (o Options) parse() (settings, error) {
	s := settings{disabled: o.Disabled}
	var err error
	if o.PodCIDR != "" {
		if s.podCIDR, err = fabric.ParsePrefix("--pod-cidr", o.PodCIDR); err != nil {
			return s, err
		}
	}
	if o.ServiceCIDR != "" {
		if s.serviceCIDR, err = fabric.ParsePrefix("--service-cidr", o.ServiceCIDR); err != nil {
			return s, err
		}
	}
	pool := o.Pool
	if len(pool) == 0 {
		pool = []string{DefaultPool}
	}
	for _, p := range pool {
		pfx, err := fabric.ParsePrefix("--ipam-pool", p)
		if err != nil {
			return s, err
		}
		s.pool = append(s.pool, pfx)
	}
	for _, r := range o.Reserved {
		pfx, err := fabric.ParsePrefix("--ipam-reserved", r)
		if err != nil {
			return s, err
		}
		s.reserved = append(s.reserved, pfx)
	}
	for _, p := range s.pool {
		for _, r := range s.reserved {
			if fabric.Overlaps(p, r) {
				return s, fmt.Errorf("--ipam-pool %s overlaps --ipam-reserved %s", p, r)
			}
		}
	}
	return s, nil
}
