package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkConfig condition types.
const (
	// NetworkConfigRemapped: IPAM chose the CIDR this cluster uses for the peer's pods.
	NetworkConfigRemapped = "Remapped"
	// NetworkConfigTunnelUp: the gateway's tunnel to the peer is established.
	NetworkConfigTunnelUp = "TunnelUp"
	// NetworkConfigDiscovered: this cluster's own pod and service CIDRs are
	// known (on the local NetworkConfig only).
	NetworkConfigDiscovered = "Discovered"
)

// Values of LabelNetworkConfig: what a NetworkConfig stands for.
const (
	// LabelNetworkConfig says what a NetworkConfig is: NetworkConfigLocal,
	// NetworkConfigPeer or NetworkConfigPublished.
	LabelNetworkConfig = "ferry.io/network-config"
	// NetworkConfigLocal is this cluster's own network, in ferry-system,
	// named after this cluster's ID. Its spec is what the cluster tells its
	// peers; its status how discovery and the IPAM went.
	NetworkConfigLocal = "local"
	// NetworkConfigPeer is a peer's network as the peer tells it (spec) and
	// where this cluster maps it (status): in ferry-system for a provider,
	// in the tenant namespace for a consumer (written there by the consumer).
	NetworkConfigPeer = "peer"
	// NetworkConfigPublished is a provider's copy of its local
	// NetworkConfig in a consumer's tenant namespace, for the consumer to read.
	NetworkConfigPublished = "published"
)

// APIServerEndpoint is how pods of a cluster reach its API server: the
// cluster IP and port of the default/kubernetes Service.
type APIServerEndpoint struct {
	// Address is the kubernetes Service's cluster IP.
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP address"
	Address string `json:"address"`

	// Port is the kubernetes Service's port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// GatewayEndpoint is where a cluster's WireGuard gateway listens, and its key.
type GatewayEndpoint struct {
	// Address is the gateway's host name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`

	// Port is the gateway's UDP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// PublicKey is the gateway's WireGuard public key, base64 (44 characters).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw480]=$`
	PublicKey string `json:"publicKey"`

	// PodAddress is the gateway pod's own IP in the cluster's pod CIDR: peers
	// probe it through the tunnel to measure the round trip.
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="podAddress must be an IP address"
	// +optional
	PodAddress string `json:"podAddress,omitempty"`

	// NextPublicKey is the key the gateway switches to at RotateAt. Peers
	// switch to it at the same moment, so established flows pause for no
	// longer than one handshake.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw480]=$`
	// +optional
	NextPublicKey string `json:"nextPublicKey,omitempty"`

	// RotateAt is when the gateway replaces PublicKey by NextPublicKey.
	// +optional
	RotateAt *metav1.Time `json:"rotateAt,omitempty"`
}

// GatewayStatus is where this cluster's nodes reach its gateway.
type GatewayStatus struct {
	// OverlayAddress is the gateway pod's IP: the remote end of every node's
	// VXLAN link to it.
	OverlayAddress string `json:"overlayAddress"`

	// VXLANPort is the UDP port of the gateway's VXLAN link.
	VXLANPort int32 `json:"vxlanPort"`

	// VNI is the VXLAN network identifier.
	VNI int32 `json:"vni"`

	// MTU is the MTU of routes toward peers: the tunnel's MTU, which
	// already leaves room for the VXLAN and WireGuard headers.
	MTU int32 `json:"mtu"`

	// TunnelKind is "kernel" (WireGuard module) or "userspace" (wireguard-go).
	// +optional
	TunnelKind string `json:"tunnelKind,omitempty"`
	// Replica is the active gateway replica (its pod name, the holder of
	// the gateway Lease); empty when the gateway runs without election.
	// +optional
	Replica string `json:"replica,omitempty"`
}

// TunnelStatus is the state of the gateway's tunnel to one peer.
type TunnelStatus struct {
	// Endpoint is the peer gateway's UDP endpoint the tunnel uses.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// LastHandshakeTime is the tunnel's last completed WireGuard handshake.
	// +optional
	LastHandshakeTime *metav1.Time `json:"lastHandshakeTime,omitempty"`

	// RoundTripTime is the last measured round trip to the peer's gateway
	// pod through the tunnel.
	// +optional
	RoundTripTime *metav1.Duration `json:"roundTripTime,omitempty"`
}

// NetworkConfigSpec is what one peer says of its network.
type NetworkConfigSpec struct {
	// ClusterID of the peer this configuration describes.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterID is immutable"
	ClusterID ClusterID `json:"clusterID"`

	// PodCIDR is the peer's pod network as the peer itself sees it.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="podCIDR must be a CIDR in canonical form, such as 10.244.0.0/16"
	PodCIDR string `json:"podCIDR"`

	// ServiceCIDR is the peer's Service cluster-IP range; empty when the
	// peer could not tell.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="serviceCIDR must be a CIDR in canonical form, such as 10.96.0.0/12"
	// +optional
	ServiceCIDR string `json:"serviceCIDR,omitempty"`

	// ExternalCIDR is where the peer's pods appear to clusters whose own
	// networks overlap podCIDR: a range of the same size, chosen by the
	// peer's IPAM, that a cluster uses when it is free there too.
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="externalCIDR must be a CIDR in canonical form, such as 10.70.0.0/16"
	// +optional
	ExternalCIDR string `json:"externalCIDR,omitempty"`

	// APIServer is the peer's kubernetes Service, which offloaded pods of
	// the peer reach (by name kubernetes.default) through the fabric.
	// +optional
	APIServer *APIServerEndpoint `json:"apiServer,omitempty"`

	// Gateway is the peer's tunnel endpoint; empty while the peer's gateway is not up.
	// +optional
	Gateway *GatewayEndpoint `json:"gateway,omitempty"`
}

// NetworkConfigStatus is how this cluster reaches the peer's pods, and how
// the peer reaches this cluster's.
type NetworkConfigStatus struct {
	// Conditions: Remapped, TunnelUp; Discovered on the local NetworkConfig.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// RemappedPodCIDR is the CIDR, of the same size as spec.podCIDR, that
	// this cluster uses for the peer's pods; it differs from spec.podCIDR
	// when that overlaps a network of this cluster.
	// +optional
	RemappedPodCIDR string `json:"remappedPodCIDR,omitempty"`

	// RemappedAPIServerAddress is the address this cluster uses for the
	// peer's spec.apiServer.address; it differs from it when that overlaps
	// a network of this cluster.
	// +optional
	RemappedAPIServerAddress string `json:"remappedAPIServerAddress,omitempty"`

	// PodCIDRAtPeer is where the peer sees this cluster's pods: the peer's
	// remappedPodCIDR for this cluster (this cluster's pod CIDR, its
	// external CIDR, or a range of the peer's pool). Set on a provider's
	// NetworkConfig in ferry-system, from what the provider reports.
	// +optional
	PodCIDRAtPeer string `json:"podCIDRAtPeer,omitempty"`

	// APIServerAddressAtPeer is where pods in the peer reach this cluster's
	// API server (the peer's remappedAPIServerAddress for this cluster).
	// +optional
	APIServerAddressAtPeer string `json:"apiServerAddressAtPeer,omitempty"`

	// Gateway is where this cluster's nodes reach its gateway (on the local
	// NetworkConfig only), written by ferry-gateway.
	// +optional
	Gateway *GatewayStatus `json:"gateway,omitempty"`

	// Tunnel is the gateway's tunnel to the peer, written by ferry-gateway.
	// +optional
	Tunnel *TunnelStatus `json:"tunnel,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// NetworkConfig is one peer's pod network and gateway, and the CIDR this
// cluster maps it to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=netcfg,categories=ferry
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Pod CIDR",type=string,JSONPath=`.spec.podCIDR`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.metadata.labels.ferry\.io/network-config`
// +kubebuilder:printcolumn:name="Service CIDR",type=string,JSONPath=`.spec.serviceCIDR`,priority=1
// +kubebuilder:printcolumn:name="External CIDR",type=string,JSONPath=`.spec.externalCIDR`,priority=1
// +kubebuilder:printcolumn:name="Remapped",type=string,JSONPath=`.status.remappedPodCIDR`
// +kubebuilder:printcolumn:name="At Peer",type=string,JSONPath=`.status.podCIDRAtPeer`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Remapped")].status`
// +kubebuilder:printcolumn:name="Tunnel",type=string,JSONPath=`.status.conditions[?(@.type=="TunnelUp")].status`
// +kubebuilder:printcolumn:name="RTT",type=string,JSONPath=`.status.tunnel.roundTripTime`,priority=1
// +kubebuilder:printcolumn:name="Handshake",type=date,JSONPath=`.status.tunnel.lastHandshakeTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the peer's network.
	Spec NetworkConfigSpec `json:"spec"`

	// Status is the mapping this cluster chose.
	// +optional
	Status NetworkConfigStatus `json:"status,omitempty"`
}

// NetworkConfigList is a list of NetworkConfigs.
// +kubebuilder:object:root=true
type NetworkConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the NetworkConfigs.
	Items []NetworkConfig `json:"items"`
}

func init() {
	register(&NetworkConfig{}, &NetworkConfigList{})
}
