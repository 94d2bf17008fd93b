package webhooks

import (
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// userAnnotations are the ferry.io/ annotations users may set, per kind.
var userAnnotations = map[string][]string{
	"Pod":                   {placement.AnnotationPodOffloadingStrategy, ferryv1alpha1.AnnotationConsumerAPIServer, ferryv1alpha1.AnnotationRemoteRuntimeClass},
	"PersistentVolumeClaim": {placement.AnnotationDataGravity, ferryv1alpha1.AnnotationSkipReflection, ferryv1alpha1.AnnotationAllowReflection},
}

// ValidateAnnotations checks every ferry.io/ annotation of an object of
// kind (Pod or PersistentVolumeClaim) in a namespace offloaded with
// namespaceStrategy: unknown ones are refused, naming the known ones, and
// each known one is parsed. Annotations ferry itself writes (recorded under
// ferryOwned) are left to their writer.
func ValidateAnnotations(kind string, annotations map[string]string, namespaceStrategy ferryv1alpha1.PodOffloadingStrategy, ferryOwned ...string) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	known := userAnnotations[kind]
	for _, k := range keys {
		if !strings.HasPrefix(k, ferryv1alpha1.KeyPrefix) || slices.Contains(ferryOwned, k) {
			continue
		}
		path := field.NewPath("metadata", "annotations").Key(k)
		switch {
		case !slices.Contains(known, k):
			errs = append(errs, field.NotSupported(path, k, known))
		case k == placement.AnnotationPodOffloadingStrategy:
			if _, err := placement.PodStrategy(namespaceStrategy, annotations); err != nil {
				errs = append(errs, err)
			}
		case k == ferryv1alpha1.AnnotationRemoteRuntimeClass:
			if _, err := placement.RemoteRuntimeClass(annotations, nil); err != nil {
				errs = append(errs, err)
			}
		case k == placement.AnnotationDataGravity:
			if _, err := placement.DataGravity(annotations); err != nil {
				errs = append(errs, err)
			}
		case k == ferryv1alpha1.AnnotationSkipReflection, k == ferryv1alpha1.AnnotationAllowReflection, k == ferryv1alpha1.AnnotationConsumerAPIServer:
			if v := annotations[k]; v != "true" && v != "false" {
				errs = append(errs, field.NotSupported(path, v, []string{"true", "false"}))
			}
		}
	}
	return errs
}
