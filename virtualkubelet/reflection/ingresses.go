package reflection

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ingressClassAnnotation is the deprecated way of naming an Ingress's class,
// still honoured by most controllers.
const ingressClassAnnotation = "kubernetes.io/ingress.class"

// ingressTranslator reflects Ingresses. The remote copy has the local one's
// spec, its class (the ingressClassName field and the deprecated annotation
// alike) mapped through Env.IngressClasses: an unmapped class is dropped, so
// the provider's default class serves the copy. The status is the provider's
// ingress controller's, and so is the class it defaults when none is mapped:
// neither is compared, and merge keeps them.
type ingressTranslator struct{}

var _ translator = ingressTranslator{}

func (ingressTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	ing, ok := local.(*networkingv1.Ingress)
	if !ok {
		return nil, "", fmt.Errorf("reflect an Ingress: got a %T", local)
	}
	meta := remoteMeta(env, ing, twinNamespace)
	spec := ing.Spec.DeepCopy()
	annotated := false
	if class, ok := meta.Annotations[ingressClassAnnotation]; ok {
		annotated = true
		if to := mapClass(env.IngressClasses, class); to != "" {
			meta.Annotations[ingressClassAnnotation] = to
		} else {
			delete(meta.Annotations, ingressClassAnnotation)
		}
	}
	// An Ingress with the annotation alone keeps it alone: the API server
	// refuses a field that differs from it.
	if spec.IngressClassName != nil || !annotated {
		spec.IngressClassName = nil
		if to := mapClass(env.IngressClasses, ptr.Deref(ing.Spec.IngressClassName, "")); to != "" {
			spec.IngressClassName = &to
		}
	}
	return &networkingv1.Ingress{ObjectMeta: meta, Spec: *spec}, "", nil
}

func (ingressTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*networkingv1.Ingress), remote.(*networkingv1.Ingress)
	if !metaEqual(w, r) {
		return false
	}
	rs := r.Spec
	if w.Spec.IngressClassName == nil {
		// The provider's default class.
		rs.IngressClassName = nil
	}
	return equality.Semantic.DeepEqual(w.Spec, rs)
}

func (ingressTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*networkingv1.Ingress).DeepCopy(), remote.(*networkingv1.Ingress).DeepCopy()
	mergeMeta(w, merged)
	class := merged.Spec.IngressClassName
	merged.Spec = w.Spec
	if merged.Spec.IngressClassName == nil {
		merged.Spec.IngressClassName = class
	}
	return merged
}
