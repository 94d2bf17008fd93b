package webhooks

import (
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// decodeWrite decodes the object of a CREATE or UPDATE request into obj,
// and on UPDATE the old object into old (when old is not nil). For any
// other operation, or input that does not decode, it returns the response
// to answer with and false.
func decodeWrite(dec admission.Decoder, req admission.Request, obj, old runtime.Object) (admission.Response, bool) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), false
	}
	if err := dec.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err), false
	}
	if old != nil && req.Operation == admissionv1.Update {
		if err := dec.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err), false
		}
	}
	return admission.Response{}, true
}
