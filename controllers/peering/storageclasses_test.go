package peering

import (
	"reflect"
	"testing"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestVirtualNodeStorageClassesMapOnlyWhatTheProviderOffers(t *testing.T) {
	offers := []ferryv1alpha1.StorageClassOffer{{Name: "ssd"}, {Name: "standard", Default: true}}
	classes, unoffered := virtualNodeStorageClasses(offers, map[string]string{"fast": "ssd", "gold": "platinum", "standard": "ssd"})
	want := []ferryv1alpha1.VirtualNodeStorageClass{
		// The provider's default serves claims asking for the default,
		// even when a map entry takes its name.
		{Name: "", ProviderClass: "standard"},
		{Name: "fast", ProviderClass: "ssd"},
		{Name: "ssd", ProviderClass: "ssd"},
		// A map entry replaces the offer of the same local name.
		{Name: "standard", ProviderClass: "ssd"},
	}
	if !reflect.DeepEqual(classes, want) {
		t.Errorf("classes = %+v, want %+v", classes, want)
	}
	if !reflect.DeepEqual(unoffered, []string{"gold=platinum"}) {
		t.Errorf("unoffered = %v, want gold=platinum", unoffered)
	}
	if classes, _ := virtualNodeStorageClasses(nil, nil); classes != nil {
		t.Errorf("no offers: %+v", classes)
	}
}
