package grant

import (
	"reflect"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestStorageClassOffers(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	class := func(name, provisioner string, def bool, created metav1.Time) storagev1.StorageClass {
		c := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Provisioner: provisioner}
		if def {
			c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		return c
	}
	for name, tc := range map[string]struct {
		classes []storagev1.StorageClass
		want    []ferryv1alpha1.StorageClassOffer
	}{
		"none": {nil, nil},
		"ferry's own class is never offered": {
			[]storagev1.StorageClass{class("ferry", ferryv1alpha1.ProvisionerVirtual, true, t0), class("standard", "csi.example", false, t0)},
			[]ferryv1alpha1.StorageClassOffer{{Name: "standard"}},
		},
		"sorted, the default marked": {
			[]storagev1.StorageClass{class("standard", "csi.example", true, t0), class("fast", "csi.example", false, t0)},
			[]ferryv1alpha1.StorageClassOffer{{Name: "fast"}, {Name: "standard", Default: true}},
		},
		"of two defaults, the newest": {
			[]storagev1.StorageClass{class("old", "csi.example", true, t0), class("new", "csi.example", true, metav1.NewTime(t0.Add(time.Minute)))},
			[]ferryv1alpha1.StorageClassOffer{{Name: "new", Default: true}, {Name: "old"}},
		},
		"the beta annotation marks a default too, as the API server reads it": {
			[]storagev1.StorageClass{func() storagev1.StorageClass {
				c := class("legacy", "csi.example", false, t0)
				c.Annotations = map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}
				return c
			}(), class("fast", "csi.example", false, t0)},
			[]ferryv1alpha1.StorageClassOffer{{Name: "fast"}, {Name: "legacy", Default: true}},
		},
		"a class being deleted is neither offered nor the default": {
			[]storagev1.StorageClass{func() storagev1.StorageClass {
				c := class("going", "csi.example", true, metav1.NewTime(t0.Add(time.Minute)))
				c.DeletionTimestamp = &t0
				return c
			}(), class("standard", "csi.example", true, t0)},
			[]ferryv1alpha1.StorageClassOffer{{Name: "standard", Default: true}},
		},
		"of two defaults made at once, the first by name": {
			[]storagev1.StorageClass{class("b", "csi.example", true, t0), class("a", "csi.example", true, t0)},
			[]ferryv1alpha1.StorageClassOffer{{Name: "a", Default: true}, {Name: "b"}},
		},
	} {
		if got := StorageClassOffers(tc.classes); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
