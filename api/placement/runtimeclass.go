package placement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// runtimeClassPath is where a pod's runtime class errors point.
var runtimeClassPath = field.NewPath("spec", "runtimeClassName")

// UsesVirtualRuntimeClass says whether a pod's spec.runtimeClassName is
// ferry's RuntimeClass, which opts it into virtual nodes.
func UsesVirtualRuntimeClass(runtimeClassName *string) bool {
	return runtimeClassName != nil && *runtimeClassName == ferryv1alpha1.RuntimeClassVirtual
}

// PodStrategyWithRuntimeClass is the strategy a pod of an offloaded
// namespace is placed by, given its spec.runtimeClassName: a pod of ferry's
// RuntimeClass runs remotely whatever the namespace's strategy (the opt-in
// widens it, where the annotation may only narrow), and its
// ferry.io/pod-offloading-strategy annotation, if any, must say Remote; any
// other pod is placed as PodStrategy says.
func PodStrategyWithRuntimeClass(namespaceStrategy ferryv1alpha1.PodOffloadingStrategy, annotations map[string]string, runtimeClassName *string) (ferryv1alpha1.PodOffloadingStrategy, *field.Error) {
	if !UsesVirtualRuntimeClass(runtimeClassName) {
		return PodStrategy(namespaceStrategy, annotations)
	}
	if value, ok := annotations[AnnotationPodOffloadingStrategy]; ok && value != string(ferryv1alpha1.PodOffloadingRemote) {
		return "", field.Invalid(field.NewPath("metadata", "annotations").Key(AnnotationPodOffloadingStrategy), value,
			fmt.Sprintf("spec.runtimeClassName %q runs the pod on virtual nodes: the annotation can only say %s", ferryv1alpha1.RuntimeClassVirtual, ferryv1alpha1.PodOffloadingRemote))
	}
	return ferryv1alpha1.PodOffloadingRemote, nil
}

// RuntimeClassNotOffloaded is the refusal of a pod of ferry's RuntimeClass
// in namespace, which is not offloaded: it could only wait for a virtual
// node that would not run it.
func RuntimeClassNotOffloaded(namespace string) *field.Error {
	return field.Forbidden(runtimeClassPath, fmt.Sprintf(
		"RuntimeClass %q runs pods on ferry's virtual nodes, but namespace %s is not offloaded (no NamespaceOffloading in force): offload it (ferryctl offload namespace %s) or leave runtimeClassName out",
		ferryv1alpha1.RuntimeClassVirtual, namespace, namespace))
}

// RemoteRuntimeClass is the RuntimeClass a pod's offloaded copy runs with
// in the provider: the pod's ferry.io/remote-runtime-class annotation when
// set; none (the provider's default runtime) for a pod of ferry's
// RuntimeClass; the pod's own runtimeClassName otherwise. It never is
// ferry's RuntimeClass, which means nothing to a provider. A malformed
// annotation is an error naming it.
func RemoteRuntimeClass(annotations map[string]string, runtimeClassName *string) (*string, *field.Error) {
	if value, ok := annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass]; ok {
		path := field.NewPath("metadata", "annotations").Key(ferryv1alpha1.AnnotationRemoteRuntimeClass)
		if msgs := validation.IsDNS1123Subdomain(value); len(msgs) > 0 {
			return nil, field.Invalid(path, value, fmt.Sprintf("a RuntimeClass name of the provider: %s", msgs[0]))
		}
		if value == ferryv1alpha1.RuntimeClassVirtual {
			return nil, field.Invalid(path, value, fmt.Sprintf("RuntimeClass %q is ferry's own, it cannot run a pod in the provider", value))
		}
		return &value, nil
	}
	if runtimeClassName == nil || UsesVirtualRuntimeClass(runtimeClassName) {
		return nil, nil
	}
	name := *runtimeClassName
	return &name, nil
}
