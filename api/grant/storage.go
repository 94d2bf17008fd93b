package grant

import (
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// StorageClassOffers are the storage classes a provider lets its consumers'
// claims use: every class but ferry's own virtual one (a claim offloaded
// there would be offloaded again), sorted by name, the default
// (placement.DefaultStorageClass) marked.
func StorageClassOffers(classes []storagev1.StorageClass) []ferryv1alpha1.StorageClassOffer {
	var offers []ferryv1alpha1.StorageClassOffer
	for i := range classes {
		c := &classes[i]
		if c.Provisioner == ferryv1alpha1.ProvisionerVirtual || !c.DeletionTimestamp.IsZero() {
			continue
		}
		offers = append(offers, ferryv1alpha1.StorageClassOffer{Name: c.Name})
	}
	def := placement.DefaultStorageClass(classes)
	slices.SortFunc(offers, func(a, b ferryv1alpha1.StorageClassOffer) int { return strings.Compare(a.Name, b.Name) })
	for i := range offers {
		offers[i].Default = def != nil && offers[i].Name == def.Name
	}
	return offers
}
