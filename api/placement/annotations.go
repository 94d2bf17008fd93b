// Package placement holds ferry's placement rules as pure functions over the
// API: which strategy a pod is placed by, whether a claim asks for data
// gravity, which providers a cluster selector picks and how a node tells
// where it runs. The pod webhook, the scheduler plugins and the offloading
// controllers all read policy through it, so they cannot disagree.
package placement

import (
	"fmt"
	"slices"
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
	// AnnotationDataGravity, on a PVC, "true" makes its data, once bound,
	// pull the pods of its namespace toward the cluster that holds it,
	// weighted by its size (the DataGravity scheduler plugin).
	AnnotationDataGravity = "ferry.io/data-gravity"
)

// strategies are the accepted pod offloading strategies.
var strategies = []ferryv1alpha1.PodOffloadingStrategy{
	ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PodOffloadingLocalAndRemote,
}

// AllowedNarrowing lists, per namespace strategy, the pod strategies it
// admits.
func AllowedNarrowing(ns ferryv1alpha1.PodOffloadingStrategy) []ferryv1alpha1.PodOffloadingStrategy {
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
	allowed := AllowedNarrowing(namespaceStrategy)
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
