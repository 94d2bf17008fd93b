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
)

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

	// Gateway is the peer's tunnel endpoint; empty while the peer's gateway is not up.
	// +optional
	Gateway *GatewayEndpoint `json:"gateway,omitempty"`
}

// NetworkConfigStatus is how this cluster reaches the peer's pods.
type NetworkConfigStatus struct {
	// Conditions: Remapped, TunnelUp.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// RemappedPodCIDR is the CIDR, of the same size as spec.podCIDR, that
	// this cluster uses for the peer's pods; it differs from spec.podCIDR
	// when that overlaps a network of this cluster.
	// +optional
	RemappedPodCIDR string `json:"remappedPodCIDR,omitempty"`

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
// +kubebuilder:printcolumn:name="Remapped",type=string,JSONPath=`.status.remappedPodCIDR`
// +kubebuilder:printcolumn:name="Tunnel",type=string,JSONPath=`.status.conditions[?(@.type=="TunnelUp")].status`
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
