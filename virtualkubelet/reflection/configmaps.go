package reflection

import (
	"bytes"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rootCAConfigMap is the ConfigMap every namespace gets with its cluster's
// root CA: the provider publishes its own in the twin namespace.
const rootCAConfigMap = "kube-root-ca.crt"

// configMapTranslator reflects ConfigMaps, all but the root CA one. The
// remote copy has the local one's data, binary data and immutability; nothing
// is left to the provider. An immutable copy cannot be updated: the API
// server refuses the update, and only recreating the copy repairs it.
type configMapTranslator struct{}

var _ translator = configMapTranslator{}

func (configMapTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	cm, ok := local.(*corev1.ConfigMap)
	if !ok {
		return nil, "", fmt.Errorf("reflect a ConfigMap: got a %T", local)
	}
	if cm.Name == rootCAConfigMap {
		return nil, "the provider publishes its own root CA ConfigMap", nil
	}
	c := cm.DeepCopy()
	return &corev1.ConfigMap{
		ObjectMeta: remoteMeta(env, cm, twinNamespace),
		Data:       c.Data,
		BinaryData: c.BinaryData,
		Immutable:  c.Immutable,
	}, "", nil
}

func (configMapTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*corev1.ConfigMap), remote.(*corev1.ConfigMap)
	return metaEqual(w, r) &&
		maps.Equal(w.Data, r.Data) &&
		maps.EqualFunc(w.BinaryData, r.BinaryData, bytes.Equal) &&
		ptr.Deref(w.Immutable, false) == ptr.Deref(r.Immutable, false)
}

func (configMapTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*corev1.ConfigMap).DeepCopy(), remote.(*corev1.ConfigMap).DeepCopy()
	mergeMeta(w, merged)
	merged.Data = w.Data
	merged.BinaryData = w.BinaryData
	merged.Immutable = w.Immutable
	return merged
}
