// Package v1alpha1 holds ferry's API types, group ferry.io, version v1alpha1:
// the objects two peered clusters exchange to run one cluster's pods in the other.
//
// It depends on k8s.io/api and k8s.io/apimachinery only, so any client can
// import it cheaply.
//
// +kubebuilder:object:generate=true
// +groupName=ferry.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every ferry kind.
	GroupVersion = schema.GroupVersion{Group: "ferry.io", Version: "v1alpha1"}

	// SchemeBuilder registers ferry's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds ferry's kinds to a scheme; clients need it to decode them.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are the kinds each *_types.go file registers in its init.
	knownTypes []runtime.Object
)

// register records kinds (object and list) for AddToScheme.
func register(objects ...runtime.Object) {
	knownTypes = append(knownTypes, objects...)
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
