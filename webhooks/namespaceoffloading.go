package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// reservedNamespaces are never offloaded: the control plane's and ferry's
// own.
var reservedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", ferryv1alpha1.SystemNamespace}

// NamespaceOffloadingValidator refuses NamespaceOffloadings the controller
// could only fail on later: a name other than "offloading" (one per
// namespace), a reserved namespace, a cluster selector that does not parse
// or has a term matching nothing, and a change of the namespace mapping
// while twin namespaces exist (they would be orphaned under their old
// names).
type NamespaceOffloadingValidator struct {
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *NamespaceOffloadingValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	nso, old := &ferryv1alpha1.NamespaceOffloading{}, &ferryv1alpha1.NamespaceOffloading{}
	if resp, ok := decodeWrite(v.Decoder, req, nso, old); !ok {
		return resp
	}
	if req.Operation != admissionv1.Update {
		old = nil
	}
	if errs := ValidateNamespaceOffloading(nso, old); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	return admission.Allowed("")
}

// ValidateNamespaceOffloading checks nso, and with old (on update) the
// changes made to it.
func ValidateNamespaceOffloading(nso, old *ferryv1alpha1.NamespaceOffloading) field.ErrorList {
	var errs field.ErrorList
	if nso.Name != ferryv1alpha1.NamespaceOffloadingName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), nso.Name,
			fmt.Sprintf("must be %q: a namespace has at most one NamespaceOffloading", ferryv1alpha1.NamespaceOffloadingName)))
	}
	if slices.Contains(reservedNamespaces, nso.Namespace) && nso.DeletionTimestamp == nil {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "namespace"),
			fmt.Sprintf("%s is reserved: %v are never offloaded", nso.Namespace, reservedNamespaces)))
	}
	errs = append(errs, ValidateClusterSelector(nso.Spec.ClusterSelector, field.NewPath("spec", "clusterSelector"))...)
	if old != nil && len(twinNamespaces(old)) > 0 {
		spec := field.NewPath("spec")
		if nso.Spec.NamespaceMappingStrategy != old.Spec.NamespaceMappingStrategy {
			errs = append(errs, field.Forbidden(spec.Child("namespaceMappingStrategy"), fmt.Sprintf(
				"cannot change from %s to %s while twin namespaces exist (%v): unoffload the namespace first",
				old.Spec.NamespaceMappingStrategy, nso.Spec.NamespaceMappingStrategy, twinNamespaces(old))))
		}
		if nso.Spec.RemoteNamespaceName != old.Spec.RemoteNamespaceName {
			errs = append(errs, field.Forbidden(spec.Child("remoteNamespaceName"), fmt.Sprintf(
				"cannot change from %q to %q while twin namespaces exist (%v): unoffload the namespace first",
				old.Spec.RemoteNamespaceName, nso.Spec.RemoteNamespaceName, twinNamespaces(old))))
		}
	}
	return errs
}

// ValidateClusterSelector checks a cluster selector as the scheduler would
// parse it, and refuses terms without requirements: the scheduler matches
// no node with them, so the namespace would silently reach no cluster.
func ValidateClusterSelector(sel *corev1.NodeSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	var errs field.ErrorList
	terms := path.Child("nodeSelectorTerms")
	for i, t := range sel.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			errs = append(errs, field.Required(terms.Index(i), "a term without matchExpressions or matchFields matches no cluster"))
		}
	}
	if _, err := nodeaffinity.NewNodeSelector(sel, field.WithPath(path)); err != nil {
		var agg utilerrors.Aggregate
		if !errors.As(err, &agg) {
			return append(errs, field.Invalid(path, "", err.Error()))
		}
		for _, e := range agg.Errors() {
			var fe *field.Error
			if errors.As(e, &fe) {
				errs = append(errs, fe)
			} else {
				errs = append(errs, field.Invalid(path, "", e.Error()))
			}
		}
	}
	return errs
}

func twinNamespaces(nso *ferryv1alpha1.NamespaceOffloading) []string {
	var out []string
	for _, c := range nso.Status.Clusters {
		if c.TwinNamespace != "" {
			out = append(out, c.TwinNamespace)
		}
	}
	return out
}
