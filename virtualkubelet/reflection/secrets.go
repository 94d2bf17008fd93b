package reflection

import (
	"bytes"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretTranslator reflects Secrets, all but tokens: a service-account
// token Secret holds a consumer token, useless on the provider and not to be
// leaked (the provider's token controller owns that type), and a bootstrap
// token lets nodes join the consumer. The remote copy has the local one's
// type, data and immutability (StringData is write-only: the API server folds
// it into Data); nothing is left to the provider.
//
// The type and an immutable Secret's data cannot change on the API server:
// merge still applies them, the update is refused, and only recreating the
// copy repairs it.
type secretTranslator struct{}

var _ translator = secretTranslator{}

func (secretTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	s, ok := local.(*corev1.Secret)
	if !ok {
		return nil, "", fmt.Errorf("reflect a Secret: got a %T", local)
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		return nil, "a service-account token of the consumer is useless on the provider and is not to be leaked", nil
	case corev1.SecretTypeBootstrapToken:
		return nil, "a bootstrap token of the consumer is not to be leaked", nil
	}
	c := s.DeepCopy()
	return &corev1.Secret{
		ObjectMeta: remoteMeta(env, s, twinNamespace),
		Type:       c.Type,
		Data:       c.Data,
		Immutable:  c.Immutable,
	}, "", nil
}

func (secretTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*corev1.Secret), remote.(*corev1.Secret)
	return metaEqual(w, r) &&
		secretType(w) == secretType(r) &&
		maps.EqualFunc(w.Data, r.Data, bytes.Equal) &&
		ptr.Deref(w.Immutable, false) == ptr.Deref(r.Immutable, false)
}

func (secretTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*corev1.Secret).DeepCopy(), remote.(*corev1.Secret).DeepCopy()
	mergeMeta(w, merged)
	merged.Type = secretType(w)
	merged.Data = w.Data
	merged.StringData = nil
	merged.Immutable = w.Immutable
	return merged
}

// secretType is s's type as the API server defaults it.
func secretType(s *corev1.Secret) corev1.SecretType {
	if s.Type == "" {
		return corev1.SecretTypeOpaque
	}
	return s.Type
}
