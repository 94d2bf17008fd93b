package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// PVCMutator remaps the new dynamically provisioned claims of offloaded
// namespaces to the virtual storage class, keeping the class they asked for
// in ferryv1alpha1.AnnotationRequestedStorageClass. Claims that are pre-bound
// (spec.volumeName), select a volume (spec.selector, with a warning), ask
// for no class (""), or live in a namespace whose
// pods stay Local are left alone, and so is every claim while the virtual
// storage class is not installed (a warning says so), because a claim of a
// missing class would never bind. It refuses claims whose ferry.io
// annotations do not validate.
type PVCMutator struct {
	// Reader reads NamespaceOffloadings and StorageClasses.
	Reader  client.Reader
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (m *PVCMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := m.Decoder.Decode(req, pvc); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	// Validated here on creation (one webhook call per claim); the
	// validating webhook checks updates.
	if errs := ValidateAnnotations("PersistentVolumeClaim", pvc.Annotations, "", ferryOwnedAnnotations["PersistentVolumeClaim"]...); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	sc := pvc.Spec.StorageClassName
	switch {
	case pvc.Spec.VolumeName != "":
		return admission.Allowed("pre-bound claim")
	case pvc.Spec.Selector != nil:
		// A selector picks an existing volume; the virtual class only
		// provisions. The claim keeps its class and binds here.
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"ferry: PersistentVolumeClaim %s has spec.selector, so it keeps its class and binds in this cluster only (the %q class provisions, it never matches existing volumes)", pvc.Name, ferryv1alpha1.StorageClassVirtual))
	case sc != nil && (*sc == "" || *sc == ferryv1alpha1.StorageClassVirtual):
		return admission.Allowed("")
	}
	var nso ferryv1alpha1.NamespaceOffloading
	key := client.ObjectKey{Namespace: req.Namespace, Name: ferryv1alpha1.NamespaceOffloadingName}
	if err := m.Reader.Get(ctx, key, &nso); apierrors.IsNotFound(err) {
		return admission.Allowed("namespace not offloaded")
	} else if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read NamespaceOffloading %s: %w", key, err))
	}
	if nso.DeletionTimestamp != nil || nso.Spec.PodOffloadingStrategy == ferryv1alpha1.PodOffloadingLocal {
		return admission.Allowed("the namespace's pods stay local")
	}
	var class storagev1.StorageClass
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: ferryv1alpha1.StorageClassVirtual}, &class); apierrors.IsNotFound(err) {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"ferry: storage class %q is not installed; PersistentVolumeClaim %s keeps its class and binds in this cluster only", ferryv1alpha1.StorageClassVirtual, pvc.Name))
	} else if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read StorageClass %s: %w", ferryv1alpha1.StorageClassVirtual, err))
	}
	mutated := pvc.DeepCopy()
	if mutated.Annotations == nil {
		mutated.Annotations = map[string]string{}
	}
	requested := ""
	if sc != nil {
		requested = *sc
	}
	mutated.Annotations[ferryv1alpha1.AnnotationRequestedStorageClass] = requested
	class.Name = ferryv1alpha1.StorageClassVirtual
	mutated.Spec.StorageClassName = &class.Name
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
