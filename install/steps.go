package install

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// step is a group of objects applied together, in the order of steps.
type step int

const (
	stepCRDs step = iota
	stepNamespaces
	stepRBAC
	stepConfig
	stepWorkloads
	stepAdmission
	nSteps
)

var stepNames = [nSteps]string{"CustomResourceDefinitions", "Namespaces", "RBAC", "configuration", "workloads", "admission"}

func (s step) String() string { return stepNames[s] }

func stepOf(gvk schema.GroupKind) step {
	switch gvk {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return stepCRDs
	case schema.GroupKind{Kind: "Namespace"}:
		return stepNamespaces
	case schema.GroupKind{Kind: "ServiceAccount"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
		schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:
		return stepRBAC
	case schema.GroupKind{Group: "apps", Kind: "Deployment"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"},
		schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return stepWorkloads
	}
	if gvk.Group == "admissionregistration.k8s.io" {
		return stepAdmission
	}
	return stepConfig
}

// bySteps groups objects by step, keeping their order within a step.
func bySteps(objs []*unstructured.Unstructured) [nSteps][]*unstructured.Unstructured {
	var out [nSteps][]*unstructured.Unstructured
	for _, o := range objs {
		s := stepOf(o.GroupVersionKind().GroupKind())
		out[s] = append(out[s], o)
	}
	return out
}

// deletionOrder sorts entries for removal: admission first (so that nothing
// refuses the deletions that follow), then the reverse of the apply order,
// CRDs and Namespaces last.
func deletionOrder(entries []Entry) []Entry {
	out := append([]Entry(nil), entries...)
	rank := func(e Entry) int {
		gv, _ := schema.ParseGroupVersion(e.APIVersion)
		s := stepOf(schema.GroupKind{Group: gv.Group, Kind: e.Kind})
		if s == stepAdmission {
			return -int(nSteps)
		}
		return -int(s)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}
