package placement

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// NodeStorageClasses reads the storage classes a virtual node's provider
// serves claims with (the node's ferry.io/storage-classes annotation). ok is
// false when the node publishes none (a real node, or a provider offering no
// storage); a malformed annotation is an error naming it.
func NodeStorageClasses(node *corev1.Node) (classes []ferryv1alpha1.VirtualNodeStorageClass, ok bool, err error) {
	raw, found := node.Annotations[ferryv1alpha1.AnnotationStorageClasses]
	if !found || raw == "" {
		return nil, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &classes); err != nil {
		return nil, false, fmt.Errorf("node %s: metadata.annotations[%s]: %w", node.Name, ferryv1alpha1.AnnotationStorageClasses, err)
	}
	return classes, len(classes) > 0, nil
}

// ResolveStorageClass is the provider class serving a claim that asked for
// requested ("" for the cluster's default): the entry of that name (the
// entry named "" stands for the default). The error says what the provider
// offers.
func ResolveStorageClass(classes []ferryv1alpha1.VirtualNodeStorageClass, requested string) (string, error) {
	offered := make([]string, 0, len(classes))
	for _, c := range classes {
		if c.Name == requested {
			return c.ProviderClass, nil
		}
		if c.Name == "" {
			offered = append(offered, fmt.Sprintf("the default (%s)", c.ProviderClass))
		} else {
			offered = append(offered, fmt.Sprintf("%q", c.Name))
		}
	}
	what := fmt.Sprintf("storage class %q", requested)
	if requested == "" {
		what = "a default storage class"
	}
	if len(offered) == 0 {
		return "", fmt.Errorf("offers no storage, so not %s", what)
	}
	return "", fmt.Errorf("does not offer %s (offers: %s)", what, strings.Join(offered, ", "))
}

// annIsDefaultClass and its beta form mark a cluster's default
// StorageClass; the API server still honours both.
const (
	annIsDefaultClass     = "storageclass.kubernetes.io/is-default-class"
	annIsDefaultClassBeta = "storageclass.beta.kubernetes.io/is-default-class"
)

// DefaultStorageClass is the class a claim asking for none gets in a
// cluster of classes: of those annotated as the default (either
// annotation), the newest (then the first by name), as the API server's
// DefaultStorageClass admission picks it. ferry's own virtual class never
// is: it serves claims, it does not hold them. nil when there is none.
func DefaultStorageClass(classes []storagev1.StorageClass) *storagev1.StorageClass {
	var found *storagev1.StorageClass
	for i := range classes {
		c := &classes[i]
		isDefault := c.Annotations[annIsDefaultClass] == "true" || c.Annotations[annIsDefaultClassBeta] == "true"
		if !isDefault || c.Provisioner == ferryv1alpha1.ProvisionerVirtual || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if found == nil || c.CreationTimestamp.After(found.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&found.CreationTimestamp) && c.Name < found.Name) {
			found = c
		}
	}
	return found
}
