package webhooks

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ferryOwnedAnnotations are the ferry.io/ annotations ferry writes itself,
// per kind; users' values there are overwritten, not validated.
var ferryOwnedAnnotations = map[string][]string{
	"Pod":                   {AnnotationAppliedPolicy, placement.AnnotationDeletionCostSet},
	"PersistentVolumeClaim": {ferryv1alpha1.AnnotationRequestedStorageClass},
}

// AnnotationValidator checks the ferry.io/ annotations of pods or PVCs
// (Kind) in offloaded namespaces (on update; the mutating webhooks check
// them on creation): a key ferry does not know is refused with
// the known ones, a known one must parse, and a pod's offloading strategy,
// which its node affinity was set from, cannot change after creation. On
// update only annotations that change are checked, so an object admitted
// before the webhook was installed can still be updated.
type AnnotationValidator struct {
	// Kind is Pod or PersistentVolumeClaim.
	Kind string
	// Reader reads NamespaceOffloadings.
	Reader  client.Reader
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (v *AnnotationValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj, old := &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadata{}
	if resp, ok := decodeWrite(v.Decoder, req, obj, old); !ok {
		return resp
	}
	annotations := obj.Annotations
	if req.Operation == admissionv1.Update {
		if v.Kind == "Pod" && old.Annotations[placement.AnnotationPodOffloadingStrategy] != obj.Annotations[placement.AnnotationPodOffloadingStrategy] {
			path := field.NewPath("metadata", "annotations").Key(placement.AnnotationPodOffloadingStrategy)
			return admission.Denied(field.Forbidden(path, "immutable: the pod's node affinity was set from it at creation; recreate the pod instead").Error())
		}
		if v.Kind == "Pod" && old.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass] != obj.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass] {
			path := field.NewPath("metadata", "annotations").Key(ferryv1alpha1.AnnotationRemoteRuntimeClass)
			return admission.Denied(field.Forbidden(path, "immutable: a pod's RuntimeClass cannot change, in the provider either; recreate the pod instead").Error())
		}
		annotations = changed(old.Annotations, obj.Annotations)
		if len(annotations) == 0 {
			return admission.Allowed("")
		}
	}
	var strategy ferryv1alpha1.PodOffloadingStrategy
	if v.Kind == "Pod" {
		var nso ferryv1alpha1.NamespaceOffloading
		key := client.ObjectKey{Namespace: req.Namespace, Name: ferryv1alpha1.NamespaceOffloadingName}
		switch err := v.Reader.Get(ctx, key, &nso); {
		case apierrors.IsNotFound(err):
			strategy = ferryv1alpha1.PodOffloadingLocal // not offloaded: a pod may only stay local
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read NamespaceOffloading %s: %w", key, err))
		default:
			strategy = nso.Spec.PodOffloadingStrategy
		}
	}
	if errs := ValidateAnnotations(v.Kind, annotations, strategy, ferryOwnedAnnotations[v.Kind]...); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	return admission.Allowed("")
}

// changed are the annotations of now that old did not have with that value.
func changed(old, now map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range now {
		if prev, ok := old[k]; !ok || prev != v {
			out[k] = v
		}
	}
	return out
}
