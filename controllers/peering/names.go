package peering

import (
	"crypto/sha256"
	"encoding/hex"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

const (
	// ConsumerRole is the Role of the consumer in its tenant namespace.
	ConsumerRole = "ferry-consumer"

	// TenantFinalizer holds a provider's ForeignCluster until the consumer's
	// tenant (and with it the credential) is gone.
	TenantFinalizer = "ferry.io/tenant"

	// PeerFinalizer holds a consumer's ForeignCluster until its virtual node,
	// its remote ResourceSlice and its credential are gone.
	PeerFinalizer = "ferry.io/peer"

	tenantPrefix = "ferry-tenant-"
)

// TenantNamespace is the provider namespace holding a consumer's peering
// objects: ferry-tenant-<consumer ID>, shortened with a hash to stay a valid
// namespace name for long IDs.
func TenantNamespace(consumer ferryv1alpha1.ClusterID) string {
	name := tenantPrefix + string(consumer)
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(consumer))
	return name[:63-9] + "-" + hex.EncodeToString(sum[:])[:8]
}

// TenantNamespaceOf is the tenant namespace a provider-side ForeignCluster
// uses: its spec.tenantNamespace, or the derived name.
func TenantNamespaceOf(fc *ferryv1alpha1.ForeignCluster) string {
	if fc.Spec.TenantNamespace != "" {
		return fc.Spec.TenantNamespace
	}
	return TenantNamespace(fc.Spec.ClusterID)
}

// CredentialsSecretName is, on a consumer, the Secret in ferry-system holding
// the kubeconfig for a provider.
func CredentialsSecretName(provider ferryv1alpha1.ClusterID) string {
	return "ferry-peer-" + string(provider)
}

// VirtualNodeName is, on a consumer, the VirtualNode (in ferry-system) and
// Node name standing for a provider.
func VirtualNodeName(provider ferryv1alpha1.ClusterID) string {
	return "ferry-" + string(provider)
}

func isConsumer(fc *ferryv1alpha1.ForeignCluster) bool { return fc.Spec.IsConsumer() }

func isProvider(fc *ferryv1alpha1.ForeignCluster) bool { return fc.Spec.IsProvider() }
