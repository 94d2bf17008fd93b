package grant

import (
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// annIsDefaultClass marks a cluster's default StorageClass.
const annIsDefaultClass = "storageclass.kubernetes.io/is-default-class"

// StorageClassOffers are the storage classes a provider lets its consumers'
// claims use: every class but ferry's own virtual one (a claim offloaded
// there would be offloaded again), sorted by name. The default is the class
// annotated as default; of several, the newest (then the first by name), as
// the API server's DefaultStorageClass admission picks it.
func StorageClassOffers(classes []storagev1.StorageClass) []ferryv1alpha1.StorageClassOffer {
	var offers []ferryv1alpha1.StorageClassOffer
	var def *storagev1.StorageClass
	for i := range classes {
		c := &classes[i]
		if c.Provisioner == ferryv1alpha1.ProvisionerVirtual || !c.DeletionTimestamp.IsZero() {
			continue
		}
		offers = append(offers, ferryv1alpha1.StorageClassOffer{Name: c.Name})
		if c.Annotations[annIsDefaultClass] != "true" {
			continue
		}
		if def == nil || c.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&def.CreationTimestamp) && c.Name < def.Name) {
			def = c
		}
	}
	slices.SortFunc(offers, func(a, b ferryv1alpha1.StorageClassOffer) int { return strings.Compare(a.Name, b.Name) })
	for i := range offers {
		offers[i].Default = def != nil && offers[i].Name == def.Name
	}
	return offers
}
