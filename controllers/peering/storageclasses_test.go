package peering

import (
	"fmt"
	"reflect"
	"testing"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestVirtualNodeStorageClassesMapOnlyWhatTheProviderOffers(t *testing.T) {
	offers := []ferryv1alpha1.StorageClassOffer{{Name: "ssd"}, {Name: "standard", Default: true}}
	type vnc = ferryv1alpha1.VirtualNodeStorageClass
	for name, tc := range map[string]struct {
		offers        []ferryv1alpha1.StorageClassOffer
		classMap      map[string]string
		want          []vnc
		wantUnoffered []string
	}{
		"nothing offered": {},
		"nothing offered, a map entry reported": {
			classMap: map[string]string{"fast": "ssd"}, wantUnoffered: []string{"fast=ssd"},
		},
		"offers under their own names, the default also as \"\"": {
			offers: offers,
			want:   []vnc{{Name: "", ProviderClass: "standard"}, {Name: "ssd", ProviderClass: "ssd"}, {Name: "standard", ProviderClass: "standard"}},
		},
		"map entries added, replacing an offer of the same name, unoffered ones reported": {
			offers:   offers,
			classMap: map[string]string{"fast": "ssd", "gold": "platinum", "standard": "ssd"},
			want: []vnc{
				// The provider's default serves claims asking for the
				// default, even when a map entry takes its name.
				{Name: "", ProviderClass: "standard"},
				{Name: "fast", ProviderClass: "ssd"},
				{Name: "ssd", ProviderClass: "ssd"},
				{Name: "standard", ProviderClass: "ssd"},
			},
			wantUnoffered: []string{"gold=platinum"},
		},
		"an entry for \"\" picks the class serving the default": {
			offers:   offers,
			classMap: map[string]string{"": "ssd"},
			want:     []vnc{{Name: "", ProviderClass: "ssd"}, {Name: "ssd", ProviderClass: "ssd"}, {Name: "standard", ProviderClass: "standard"}},
		},
		"an entry for \"\" naming an unoffered class is reported, the default kept": {
			offers:        offers,
			classMap:      map[string]string{"": "gold"},
			want:          []vnc{{Name: "", ProviderClass: "standard"}, {Name: "ssd", ProviderClass: "ssd"}, {Name: "standard", ProviderClass: "standard"}},
			wantUnoffered: []string{`""=gold`},
		},
	} {
		classes, unoffered, leftOut := virtualNodeStorageClasses(tc.offers, tc.classMap)
		if !reflect.DeepEqual(classes, tc.want) {
			t.Errorf("%s: classes = %+v, want %+v", name, classes, tc.want)
		}
		if !reflect.DeepEqual(unoffered, tc.wantUnoffered) {
			t.Errorf("%s: unoffered = %q, want %q", name, unoffered, tc.wantUnoffered)
		}
		if leftOut != nil {
			t.Errorf("%s: left out %q", name, leftOut)
		}
	}
}

func TestVirtualNodeStorageClassesKeepsTheVirtualNodeValid(t *testing.T) {
	var offers []ferryv1alpha1.StorageClassOffer
	for i := range maxVirtualNodeStorageClasses + 2 {
		offers = append(offers, ferryv1alpha1.StorageClassOffer{Name: fmt.Sprintf("class-%03d", i), Default: i == 0})
	}
	classes, _, leftOut := virtualNodeStorageClasses(offers, nil)
	if len(classes) != maxVirtualNodeStorageClasses {
		t.Fatalf("%d classes, want the %d a VirtualNode holds", len(classes), maxVirtualNodeStorageClasses)
	}
	if classes[0].Name != "" || classes[0].ProviderClass != "class-000" {
		t.Errorf("first class %+v, want the default kept", classes[0])
	}
	// 67 entries ("" and 66 offers): the last three by name go.
	if want := []string{"class-063", "class-064", "class-065"}; !reflect.DeepEqual(leftOut, want) {
		t.Errorf("left out %q, want %q", leftOut, want)
	}
	if got, want := someOf(leftOut), "class-063, class-064, class-065"; got != want {
		t.Errorf("someOf = %q, want %q", got, want)
	}
}

func TestSomeOfBoundsTheMessage(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	if got, want := someOf(names), "a, b, c, d, e, f, g, h and 2 more"; got != want {
		t.Errorf("someOf = %q, want %q", got, want)
	}
}
