package offloading

import (
	"crypto/sha256"
	"encoding/hex"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TwinNamespaceName is the name, in every selected provider, of the twin of
// the consumer's namespace under spec's namespaceMappingStrategy. The
// NamespaceOffloading's status records the name actually in use per
// provider; that record, not this function, is the truth once a twin exists.
func TwinNamespaceName(spec *ferryv1alpha1.NamespaceOffloadingSpec, namespace string, consumer ferryv1alpha1.ClusterID) string {
	switch spec.NamespaceMappingStrategy {
	case ferryv1alpha1.NamespaceMappingEnforceSameName:
		return namespace
	case ferryv1alpha1.NamespaceMappingSelectedName:
		return spec.RemoteNamespaceName
	default:
		return DefaultTwinNamespaceName(namespace, consumer)
	}
}

// DefaultTwinNamespaceName is the DefaultName twin of namespace:
// "<namespace>-<consumer ID>", so twins of several consumers in one provider
// do not collide; when that exceeds a namespace name's 63 characters it is
// cut and ends with 8 hex digits of the SHA-256 of the whole, keeping it a
// valid DNS label and distinct from its neighbours.
func DefaultTwinNamespaceName(namespace string, consumer ferryv1alpha1.ClusterID) string {
	name := namespace + "-" + string(consumer)
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:63-9] + "-" + hex.EncodeToString(sum[:])[:8]
}
