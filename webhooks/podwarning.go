package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// PodAnnotationWarner admits every pod it is asked about, warning about the
// ferry.io/ annotations a pod carries that have no effect because its
// namespace is not offloaded (not labelled ferry.io/offloading-enabled: no
// NamespaceOffloading, or one that failed or is being deleted). The API
// server calls it only for such pods (manifests/webhook: a namespaceSelector
// and a matchCondition on the annotations), so ordinary pods cost nothing.
type PodAnnotationWarner struct {
	// Reader reads NamespaceOffloadings.
	Reader client.Reader
}

// Handle implements admission.Handler.
func (w *PodAnnotationWarner) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, err := decodePlaced(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var nso ferryv1alpha1.NamespaceOffloading
	key := types.NamespacedName{Namespace: req.Namespace, Name: ferryv1alpha1.NamespaceOffloadingName}
	found := &nso
	switch err := w.Reader.Get(ctx, key, &nso); {
	case apierrors.IsNotFound(err):
		found = nil
	case err != nil:
		// Only a warning is at stake: the pod is admitted, unannotated.
		return admission.Allowed("").WithWarnings(fmt.Sprintf("ferry could not read NamespaceOffloading %s to check the pod's ferry.io annotations: %v", key, err))
	}
	return admission.Allowed("").WithWarnings(notOffloadedWarnings(req.Namespace, pod.Annotations, found)...)
}

// notOffloadedWarnings are the warnings for a pod of namespace, which is not
// labelled ferry.io/offloading-enabled, carrying annotations: one per
// ferry.io/ annotation users set on pods, saying it has no effect and why,
// from nso (nil: the namespace has none).
func notOffloadedWarnings(namespace string, annotations map[string]string, nso *ferryv1alpha1.NamespaceOffloading) []string {
	why := fmt.Sprintf("namespace %s is not offloaded (it has no NamespaceOffloading): the pod runs on this cluster's nodes", namespace)
	switch {
	case nso == nil:
	case nso.DeletionTimestamp != nil:
		why = fmt.Sprintf("namespace %s is being unoffloaded (its NamespaceOffloading is being deleted): the pod runs on this cluster's nodes", namespace)
	default:
		state := "not Ready yet"
		if ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady); ready != nil {
			state = fmt.Sprintf("%s: %s", ready.Reason, ready.Message)
		}
		why = fmt.Sprintf("namespace %s is not labelled %s, its NamespaceOffloading %s/%s is not in force (%s): the pod runs on this cluster's nodes",
			namespace, ferryv1alpha1.LabelOffloadingEnabled, namespace, nso.Name, state)
	}
	var out []string
	for _, k := range userAnnotations["Pod"] {
		if v, ok := annotations[k]; ok {
			out = append(out, fmt.Sprintf("%s: %q has no effect: %s", field.NewPath("metadata", "annotations").Key(k), v, why))
		}
	}
	slices.Sort(out)
	return out
}
