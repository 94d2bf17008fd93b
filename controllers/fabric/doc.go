// Package fabric runs the control plane of ferry's network fabric in one
// cluster: it learns the cluster's own pod and service CIDRs, exchanges
// NetworkConfigs with each peer over the peering's credential, and gives
// every peer whose pod CIDR overlaps a network of this cluster a remapped
// CIDR of the same size (IPAM), persisted in a ConfigMap so a restarted or
// second replica never hands one range out twice. The address translation
// itself is github.com/ferry-io/ferry/fabric, shared with the virtual
// kubelet and reflection.
//
// The data plane (gateway, tunnel, NAT, routes) is not built yet: the
// ForeignCluster condition NetworkReady stays False, saying so.
package fabric
