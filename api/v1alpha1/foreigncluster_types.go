package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PeeringRole says what a peer does for this cluster.
// +kubebuilder:validation:Enum=Consumer;Provider;ConsumerAndProvider
type PeeringRole string

const (
	// RoleConsumer: the peer offloads its pods to this cluster.
	RoleConsumer PeeringRole = "Consumer"
	// RoleProvider: this cluster offloads its pods to the peer.
	RoleProvider PeeringRole = "Provider"
	// RoleConsumerAndProvider: both directions.
	RoleConsumerAndProvider PeeringRole = "ConsumerAndProvider"
)

// ForeignCluster condition types.
const (
	// ForeignClusterAPIServerReady: the peer's API server answered the last health checks.
	ForeignClusterAPIServerReady = "APIServerReady"
	// ForeignClusterAuthenticated: the credential for the peer is present and accepted.
	ForeignClusterAuthenticated = "Authenticated"
	// ForeignClusterResourcesGranted: the peer granted resources (a ResourceSlice).
	ForeignClusterResourcesGranted = "ResourcesGranted"
	// ForeignClusterVirtualNodeReady: the virtual node standing for the peer is Ready.
	ForeignClusterVirtualNodeReady = "VirtualNodeReady"
	// ForeignClusterNetworkReady: the network fabric to the peer is up.
	ForeignClusterNetworkReady = "NetworkReady"
)

// HealthCheck tunes how often the peer's API server is probed and when it is
// declared unreachable.
// +kubebuilder:validation:XValidation:rule="!has(self.timeoutSeconds) || !has(self.periodSeconds) || self.timeoutSeconds <= self.periodSeconds",message="timeoutSeconds must not exceed periodSeconds",fieldPath=`.timeoutSeconds`
type HealthCheck struct {
	// PeriodSeconds is the time between two probes.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`

	// TimeoutSeconds bounds one probe.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// FailureThreshold is how many probes in a row must fail before the peer
	// is declared unreachable (and its virtual node NotReady).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// SecretReference points at a Secret in a given namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// ForeignClusterSpec describes a peer: who it is, where its API server is and
// how this cluster authenticates to it.
// +kubebuilder:validation:XValidation:rule="self.role == 'Consumer' || has(self.credentialsSecretRef)",message="credentialsSecretRef is required when role is Provider or ConsumerAndProvider",fieldPath=`.credentialsSecretRef`
// +kubebuilder:validation:XValidation:rule="self.role == 'Consumer' || has(self.apiServerURL)",message="apiServerURL is required when role is Provider or ConsumerAndProvider",fieldPath=`.apiServerURL`
type ForeignClusterSpec struct {
	// ClusterID of the peer. It cannot change: every object exchanged with
	// the peer is labelled with it.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterID is immutable"
	ClusterID ClusterID `json:"clusterID"`

	// Role of the peer for this cluster.
	Role PeeringRole `json:"role"`

	// APIServerURL is the peer's API server, as this cluster reaches it.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://[^\s/]+(/[^\s]*)?$`
	// +optional
	APIServerURL string `json:"apiServerURL,omitempty"`

	// CredentialsSecretRef names the Secret holding the kubeconfig this
	// cluster uses to reach the peer, scoped by the peer to its tenant
	// namespaces. It lives in ferry-system, the only namespace whose Secrets
	// ferry's components may read.
	// +kubebuilder:validation:XValidation:rule="self.namespace == 'ferry-system'",message="credentialsSecretRef.namespace must be ferry-system",fieldPath=`.namespace`
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// TenantNamespace is the namespace, in this cluster, holding the peer's
	// peering objects when the peer is a consumer.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	TenantNamespace string `json:"tenantNamespace,omitempty"`

	// ResourceRequest is a fixed request this cluster makes of the peer when
	// it is a provider, granted up to what the peer has free. Empty asks for
	// the peer's default policy (a share of its free resources).
	// +optional
	ResourceRequest corev1.ResourceList `json:"resourceRequest,omitempty"`

	// StorageClassMap maps this cluster's storage class names to the peer's,
	// when the peer is a provider: a claim of ferry's virtual class asking
	// for class K is provisioned there with class StorageClassMap[K]. A class
	// without an entry is served by the provider's class of the same name,
	// and "" (the cluster default) by the provider's default class (an entry
	// for "" names another); a class the provider does not offer is refused,
	// never silently replaced, and an entry naming one is ignored and
	// reported in the ResourcesGranted condition.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	StorageClassMap map[string]string `json:"storageClassMap,omitempty"`

	// HealthCheck tunes the probes of the peer's API server.
	// +kubebuilder:default={periodSeconds:10,timeoutSeconds:5,failureThreshold:3}
	// +optional
	HealthCheck HealthCheck `json:"healthCheck"`

	// PodSecurity is, where the peer is a consumer of this cluster, the Pod
	// Security Standards level its pods must meet here: baseline (the
	// default), restricted, or privileged (no restriction, set only by an
	// admin who trusts the peer with the provider's nodes). This cluster
	// enforces it on the peer's ShadowPods and labels the peer's twin
	// namespaces with it (pod-security.kubernetes.io/enforce).
	// +kubebuilder:default=baseline
	// +optional
	PodSecurity PodSecurityLevel `json:"podSecurity,omitempty"`

	// NodePools, where the peer is a provider, splits its nodes into pools
	// by a node label, one virtual node per pool; unset, the provider is one
	// virtual node.
	// +optional
	NodePools *NodePools `json:"nodePools,omitempty"`

	// Fencing: the consumer's Lease on the provider, self-fencing and
	// out-of-service failover (docs/operations/failure-behaviour.md, "Failover and fencing").
	// +kubebuilder:default={}
	// +optional
	Fencing Fencing `json:"fencing"`
}

// PodSecurityLevel is a Pod Security Standards level.
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

const (
	PodSecurityPrivileged PodSecurityLevel = "privileged"
	PodSecurityBaseline   PodSecurityLevel = "baseline"
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// ForeignClusterStatus is what this cluster observes of the peer.
type ForeignClusterStatus struct {
	// Conditions: APIServerReady, Authenticated, ResourcesGranted,
	// VirtualNodeReady, NetworkReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// APIServerVersion is the version the peer's API server reported.
	// +optional
	APIServerVersion string `json:"apiServerVersion,omitempty"`

	// RemoteTenantNamespace is this cluster's tenant namespace in the peer,
	// where its ResourceSlices live.
	// +optional
	RemoteTenantNamespace string `json:"remoteTenantNamespace,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ForeignCluster is one peer of this cluster: a consumer that runs pods here,
// a provider that runs this cluster's pods, or both.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fc,categories=ferry
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="API Server",type=string,JSONPath=`.status.conditions[?(@.type=="APIServerReady")].status`
// +kubebuilder:printcolumn:name="Authenticated",type=string,JSONPath=`.status.conditions[?(@.type=="Authenticated")].status`
// +kubebuilder:printcolumn:name="Granted",type=string,JSONPath=`.status.conditions[?(@.type=="ResourcesGranted")].status`
// +kubebuilder:printcolumn:name="Virtual Node",type=string,JSONPath=`.status.conditions[?(@.type=="VirtualNodeReady")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ForeignCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the peer as configured.
	Spec ForeignClusterSpec `json:"spec"`

	// Status is the peer as observed.
	// +optional
	Status ForeignClusterStatus `json:"status,omitempty"`
}

// ForeignClusterList is a list of ForeignClusters.
// +kubebuilder:object:root=true
type ForeignClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ForeignClusters.
	Items []ForeignCluster `json:"items"`
}

func init() {
	register(&ForeignCluster{}, &ForeignClusterList{})
}

// IsConsumer reports whether the peer offloads its pods to this cluster.
func (s *ForeignClusterSpec) IsConsumer() bool {
	return s.Role == RoleConsumer || s.Role == RoleConsumerAndProvider
}

// IsProvider reports whether this cluster offloads its pods to the peer.
func (s *ForeignClusterSpec) IsProvider() bool {
	return s.Role == RoleProvider || s.Role == RoleConsumerAndProvider
}
