package fabric

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// IPAMConfigMap, in ferry-system, holds the IPAM's allocations under
// ipamKey, as JSON holder -> CIDR. Writes carry the resourceVersion read,
// so two writers (a restarted manager, a second replica) never both win.
const (
	IPAMConfigMap = "ferry-ipam"
	ipamKey       = "allocations"
)

// stored is the persisted allocation table, with the version it was read at.
type stored struct {
	holders map[string]netip.Prefix
	cm      *corev1.ConfigMap // nil when it does not exist yet
}

// loadAllocations reads the table from the API server (not a cache: the
// resourceVersion must be the latest for the write to be safe).
func loadAllocations(ctx context.Context, r client.Reader) (stored, error) {
	var cm corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: IPAMConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		return stored{holders: map[string]netip.Prefix{}}, nil
	}
	if err != nil {
		return stored{}, fmt.Errorf("read ConfigMap %s/%s: %w", ferryv1alpha1.SystemNamespace, IPAMConfigMap, err)
	}
	s := stored{holders: map[string]netip.Prefix{}, cm: &cm}
	if raw := cm.Data[ipamKey]; raw != "" {
		var table map[string]string
		if err := json.Unmarshal([]byte(raw), &table); err != nil {
			return stored{}, fmt.Errorf("ConfigMap %s/%s key %s: %w", ferryv1alpha1.SystemNamespace, IPAMConfigMap, ipamKey, err)
		}
		for k, v := range table {
			// A bad entry is dropped and reallocated, never fatal.
			if p, err := netip.ParsePrefix(v); err == nil && p == p.Masked() {
				s.holders[k] = p
			}
		}
	}
	return s, nil
}

// saveAllocations writes holders if they differ from what was read. A
// conflict (someone wrote in between) is returned; the caller starts over.
func saveAllocations(ctx context.Context, c client.Client, s stored, holders map[string]netip.Prefix) error {
	if maps.Equal(s.holders, holders) && s.cm != nil {
		return nil
	}
	table := make(map[string]string, len(holders))
	for k, p := range holders {
		table[k] = p.String()
	}
	raw, err := json.Marshal(table) // sorted keys: stable bytes
	if err != nil {
		return err
	}
	if s.cm == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: IPAMConfigMap,
				Labels: map[string]string{ferryv1alpha1.LabelNetworkConfig: ferryv1alpha1.NetworkConfigLocal}},
			Data: map[string]string{ipamKey: string(raw)},
		}
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", ferryv1alpha1.SystemNamespace, IPAMConfigMap, err)
		}
		return nil
	}
	cm := s.cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[ipamKey] = string(raw)
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", ferryv1alpha1.SystemNamespace, IPAMConfigMap, err)
	}
	return nil
}
