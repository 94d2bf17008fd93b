package peering

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

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

// maxVirtualNodeName bounds virtual node names: the name is also a label
// value (app.kubernetes.io/instance of its virtual kubelet's objects).
const maxVirtualNodeName = 63

// PoolVirtualNodeName is, on a consumer, the VirtualNode (in ferry-system)
// and Node name standing for the pool of a provider's nodes whose label key
// has value: ferry-<provider>-<value>-<hash>, the value lowercased with
// characters a name cannot hold replaced by '-', the front part shortened to
// stay at most 63 characters, and the hash (8 hex digits of provider, key
// and value) keeping names unique where shortening or replacing would
// merge them, and apart from every provider's ferry-<provider>.
func PoolVirtualNodeName(provider ferryv1alpha1.ClusterID, key, value string) string {
	sum := sha256.Sum256([]byte(string(provider) + "\x00" + key + "\x00" + value))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	var b strings.Builder
	for _, r := range strings.ToLower(value) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := VirtualNodeName(provider) + "-" + b.String()
	if len(base) > maxVirtualNodeName-len(suffix) {
		base = base[:maxVirtualNodeName-len(suffix)]
	}
	return strings.TrimRight(base, "-") + suffix
}
