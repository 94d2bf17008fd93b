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

	// LabelNodeType marks ferry's virtual nodes with NodeTypeVirtual.
	LabelNodeType = "ferry.io/type"

	// NodeTypeVirtual is the LabelNodeType value of a virtual node.
	NodeTypeVirtual = "virtual-node"

	// LabelClusterID carries the ClusterID of the provider behind a virtual node.
	LabelClusterID = "ferry.io/cluster-id"

	// LabelOffloadingEnabled marks a namespace whose pods may be offloaded;
	// ferry's admission webhooks only act in namespaces carrying it.
	LabelOffloadingEnabled = "ferry.io/offloading-enabled"

	// TaintVirtualNode is the NoExecute taint key every virtual node carries,
	// so only pods that tolerate it are placed there.
	TaintVirtualNode = "ferry.io/virtual-node"

	// AnnotationNodeShapes carries, on a virtual node, the JSON list of
	// NodeShapes of its provider's grant, for the RemoteFit scheduler plugin.
	AnnotationNodeShapes = "ferry.io/node-shapes"

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
)
