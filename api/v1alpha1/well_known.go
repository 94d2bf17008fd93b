package v1alpha1

// Labels, annotations and taints ferry puts on or reads from core objects.
// They are the contract between ferry's components and with users, so they
// live here, beside the types, and nowhere else.
const (
	// LabelOriginCluster is set on every object a ferry component creates on
	// behalf of another cluster: the ClusterID of the cluster it comes from.
	LabelOriginCluster = "ferry.io/origin-cluster"

	// LabelOriginNamespace is the namespace, in the origin cluster, of the
	// object this one stands for.
	LabelOriginNamespace = "ferry.io/origin-namespace"

	// KeyPrefix starts every label and annotation key ferry defines.
	KeyPrefix = "ferry.io/"

	// LabelNodeType marks ferry's virtual nodes with NodeTypeVirtual.
	LabelNodeType = "ferry.io/type"

	// NodeTypeVirtual is the LabelNodeType value of a virtual node.
	NodeTypeVirtual = "virtual-node"

	// LabelClusterID carries the ClusterID of the provider behind a virtual node.
	LabelClusterID = "ferry.io/cluster-id"

	// LabelTopologyCluster is the topology key of the cluster a node's pods
	// run in, for topologySpreadConstraints and pod (anti-)affinity across
	// clusters: on a virtual node the ClusterID of its provider (set by the
	// virtual kubelet), on this cluster's real nodes this cluster's own
	// ClusterID (set by ferry-controller-manager's node topology
	// controller). Unlike LabelClusterID, which only virtual nodes carry,
	// every node has it: PodTopologySpread ignores nodes without its
	// topologyKey, so the local cluster would otherwise not count as a
	// domain.
	LabelTopologyCluster = "topology.ferry.io/cluster"

	// RuntimeClassVirtual is ferry's RuntimeClass (installed with ferry):
	// a pod naming it in spec.runtimeClassName runs on a virtual node
	// whatever its namespace's podOffloadingStrategy, as long as the
	// namespace is offloaded. Its scheduling part (a nodeSelector on
	// LabelNodeType and a toleration of TaintVirtualNode) is added by the
	// API server's RuntimeClass admission; it never reaches a provider.
	RuntimeClassVirtual = "ferry"

	// AnnotationRemoteRuntimeClass, on a pod, names the RuntimeClass its
	// offloaded copy runs with in the provider (a DNS subdomain). Without
	// it, a pod of RuntimeClassVirtual runs with none (the provider's
	// default runtime); any other runtimeClassName is kept.
	AnnotationRemoteRuntimeClass = "ferry.io/remote-runtime-class"

	// LabelOffloadingEnabled marks a namespace whose pods may be offloaded;
	// ferry's admission webhooks only act in namespaces carrying it.
	LabelOffloadingEnabled = "ferry.io/offloading-enabled"

	// TaintVirtualNode is the NoExecute taint key every virtual node carries,
	// so only pods that tolerate it are placed there.
	TaintVirtualNode = "ferry.io/virtual-node"

	// AnnotationNodeShapes carries, on a virtual node, the JSON list of
	// NodeShapes of its provider's grant, for the RemoteFit scheduler plugin.
	AnnotationNodeShapes = "ferry.io/node-shapes"

	// ConsumerServiceAccount is, in a provider's tenant namespace, the
	// identity of the consumer; its tokens are the consumer's credential.
	// Deleting it (with the tenant namespace) revokes every token issued
	// for it.
	ConsumerServiceAccount = "ferry-consumer"

	// SystemNamespace is where ferry's components and cluster-wide peering
	// objects (credentials, VirtualNodes) live.
	SystemNamespace = "ferry-system"

	// ClusterIdentityConfigMap, in SystemNamespace, holds this cluster's
	// ClusterID under ClusterIdentityKey. It is written once, at install.
	ClusterIdentityConfigMap = "ferry-cluster-identity"

	// ClusterIdentityKey is the ClusterID's key in ClusterIdentityConfigMap.
	ClusterIdentityKey = "clusterID"

	// KubeconfigSecretKey is the key of the kubeconfig in a credentials Secret.
	KubeconfigSecretKey = "kubeconfig"

	// LabelOriginName is, on a ShadowPod and its real pod, the name of the
	// consumer's pod they stand for.
	LabelOriginName = "ferry.io/origin-name"

	// LabelOriginUID is, on a ShadowPod and its real pod, the UID of the
	// consumer's pod they stand for: a pod recreated under the same name
	// (a StatefulSet's) is not mistaken for its predecessor.
	LabelOriginUID = "ferry.io/origin-uid"

	// ShadowPodFinalizer holds a ShadowPod until its real pod is gone, so a
	// deleted ShadowPod never leaves a pod running unaccounted for. The
	// consumer sets it at creation; the provider's controller removes it.
	ShadowPodFinalizer = "ferry.io/shadow-pod"

	// TwinNamespaceFinalizer holds a TwinNamespace until its namespace is gone.
	TwinNamespaceFinalizer = "ferry.io/twin-namespace"

	// NamespaceOffloadingFinalizer holds a NamespaceOffloading until its
	// offloaded pods are drained and its twin namespaces are gone.
	NamespaceOffloadingFinalizer = "ferry.io/namespace-offloading"

	// TwinNamespaceClusterRole is, on a provider, the ClusterRole the consumer
	// is bound to (by a RoleBinding) in each of its twin namespaces.
	TwinNamespaceClusterRole = "ferry-twin-namespace"

	// PodConditionOffloaded is the condition the virtual kubelet sets on an
	// offloaded pod: True once the provider runs it, False with the reason
	// when the provider cannot (or ferry refuses to) run it.
	PodConditionOffloaded = "ferry.io/Offloaded"

	// AnnotationSkipReflection, set to "true" on a ConfigMap, Secret,
	// Service, EndpointSlice, Ingress, ServiceAccount or
	// PersistentVolumeClaim, keeps it off the providers even when its kind's
	// policy is DenyList; a copy already there is deleted.
	AnnotationSkipReflection = "ferry.io/skip-reflection"

	// AnnotationAllowReflection, set to "true", reflects an object whose
	// kind's policy is AllowList (only objects carrying it are reflected).
	AnnotationAllowReflection = "ferry.io/allow-reflection"

	// StorageClassVirtual is ferry's virtual StorageClass: ferry's PVC webhook
	// moves the claims of offloaded namespaces to it, and the storage fabric
	// binds each in the cluster its first pod lands in.
	StorageClassVirtual = "ferry"

	// ProvisionerVirtual is the provisioner of StorageClassVirtual, served by
	// ferry-controller-manager.
	ProvisionerVirtual = "storage.ferry.io/virtual"

	// AnnotationConsumerAPIServer, on a pod, "false" leaves its offloaded
	// copy with the provider's kubernetes Service instead of pointing
	// KUBERNETES_SERVICE_HOST at this (the consumer) cluster's API server
	// through the network fabric. Default "true".
	AnnotationConsumerAPIServer = "ferry.io/consumer-api-server"

	// AnnotationRequestedStorageClass keeps, on a claim moved to
	// StorageClassVirtual, the storage class it asked for; "" when it asked
	// for the cluster's default class.
	AnnotationRequestedStorageClass = "ferry.io/requested-storage-class"

	// AnnotationStorageClasses carries, on a virtual node, the JSON list of
	// VirtualNodeStorageClasses its provider serves claims with (the entry
	// named "" serves claims asking for the default class).
	AnnotationStorageClasses = "ferry.io/storage-classes"

	// LabelManagedBy is the well-known label naming the component that
	// manages an object.
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedByStorage is LabelManagedBy's value on the claims the storage
	// fabric makes (in the storage namespace and in providers): they are
	// its own, and reflection leaves them alone.
	ManagedByStorage = "storage.ferry.io"
)
