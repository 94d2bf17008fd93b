package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateClusterID says why id cannot be a ClusterID (a DNS label, as the
// type's schema says), naming field. Controllers, ferryctl and discovery all
// check IDs with it.
func ValidateClusterID(field, id string) error {
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, id, errs[0])
	}
	return nil
}
