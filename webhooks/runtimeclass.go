package webhooks

import (
	"context"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
)

// PodRuntimeClassGuard refuses pods of ferry's RuntimeClass in namespaces
// that are not offloaded (not labelled ferry.io/offloading-enabled): the
// RuntimeClass's node selector would hold them on virtual nodes, whose
// virtual kubelets do not run pods of namespaces not offloaded. The API
// server calls it only for such pods (manifests/webhook: a namespaceSelector
// and a matchCondition on spec.runtimeClassName), so other pods cost nothing;
// in offloaded namespaces PodMutator places them.
type PodRuntimeClassGuard struct{}

// Handle implements admission.Handler.
func (g *PodRuntimeClassGuard) Handle(_ context.Context, req admission.Request) admission.Response {
	pod, err := decodePlaced(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !placement.UsesVirtualRuntimeClass(pod.Spec.RuntimeClassName) {
		return admission.Allowed("")
	}
	return admission.Denied(placement.RuntimeClassNotOffloaded(req.Namespace).Error())
}
