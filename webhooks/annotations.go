package webhooks

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Annotations users put on pods and PVCs.
const (
	// AnnotationPodOffloadingStrategy, on a pod, narrows its namespace's
	// podOffloadingStrategy: Local keeps a pod of a LocalAndRemote namespace
	// on this cluster's nodes, Remote sends it to the selected providers. It
	// cannot widen it (a pod of a Local namespace stays local).
	AnnotationPodOffloadingStrategy = "ferry.io/pod-offloading-strategy"
	// AnnotationDataGravity, on a PVC, "true" makes its data pull the pods
	// using it toward the cluster that holds it, weighted by its size.
	AnnotationDataGravity = "ferry.io/data-gravity"
)

var strategies = []ferryv1alpha1.PodOffloadingStrategy{
	ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PodOffloadingLocalAndRemote,
}

// allowedNarrowing lists, per namespace strategy, the pod strategies it
// admits.
func allowedNarrowing(ns ferryv1alpha1.PodOffloadingStrategy) []ferryv1alpha1.PodOffloadingStrategy {
	if ns == ferryv1alpha1.PodOffloadingLocalAndRemote || ns == "" {
		return strategies
	}
	return []ferryv1alpha1.PodOffloadingStrategy{ns}
}

// PodStrategy is the strategy a pod is placed by: its namespace's, or the
// narrower one its annotation asks for. The error names the annotation and
// the accepted values.
func PodStrategy(namespaceStrategy ferryv1alpha1.PodOffloadingStrategy, annotations map[string]string) (ferryv1alpha1.PodOffloadingStrategy, *field.Error) {
	value, ok := annotations[AnnotationPodOffloadingStrategy]
	if !ok {
		return namespaceStrategy, nil
	}
	path := field.NewPath("metadata", "annotations").Key(AnnotationPodOffloadingStrategy)
	s := ferryv1alpha1.PodOffloadingStrategy(value)
	if !slices.Contains(strategies, s) {
		return "", field.NotSupported(path, value, strategyNames(strategies))
	}
	allowed := allowedNarrowing(namespaceStrategy)
	if !slices.Contains(allowed, s) {
		return "", field.Invalid(path, value, fmt.Sprintf("the namespace's podOffloadingStrategy is %s: a pod may narrow it, not widen it (accepted: %s)",
			namespaceStrategy, strings.Join(strategyNames(allowed), ", ")))
	}
	return s, nil
}

func strategyNames(s []ferryv1alpha1.PodOffloadingStrategy) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = string(s[i])
	}
	return out
}

// DataGravity says whether a PVC's annotation asks for data gravity.
func DataGravity(annotations map[string]string) (bool, *field.Error) {
	value, ok := annotations[AnnotationDataGravity]
	if !ok {
		return false, nil
	}
	switch value {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, field.NotSupported(field.NewPath("metadata", "annotations").Key(AnnotationDataGravity), value, []string{"true", "false"})
}

// userAnnotations are the ferry.io/ annotations users may set, per kind.
var userAnnotations = map[string][]string{
	"Pod":                   {AnnotationPodOffloadingStrategy},
	"PersistentVolumeClaim": {AnnotationDataGravity},
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
		case k == AnnotationPodOffloadingStrategy:
			if _, err := PodStrategy(namespaceStrategy, annotations); err != nil {
				errs = append(errs, err)
			}
		case k == AnnotationDataGravity:
			if _, err := DataGravity(annotations); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}
