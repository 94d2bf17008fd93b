// Package v1alpha1 holds ferry's API types, group ferry.io, version v1alpha1:
// the objects two peered clusters exchange to run one cluster's pods in the other.
//
// +kubebuilder:object:generate=true
// +groupName=ferry.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every ferry kind.
	GroupVersion = schema.GroupVersion{Group: "ferry.io", Version: "v1alpha1"}

	// SchemeBuilder registers ferry's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds ferry's kinds to a scheme; clients need it to decode them.
	AddToScheme = SchemeBuilder.AddToScheme
)
