package install

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InventoryName is the ConfigMap, in the install's namespace, listing what an
// install applied; uninstall removes what it lists as created.
const InventoryName = "ferry-install"

// inventoryKey holds the entries as JSON in the ConfigMap's data.
const inventoryKey = "objects"

// Entry is one object an install applied.
type Entry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Created is true when the install made the object; false when it was
	// there before and the install only applied its fields (uninstall then
	// leaves it).
	Created bool `json:"created"`
}

// String is kind namespace/name, as in the progress lines.
func (e Entry) String() string {
	if e.Namespace == "" {
		return e.Kind + " " + e.Name
	}
	return e.Kind + " " + e.Namespace + "/" + e.Name
}

func (e Entry) key() string {
	gv, _ := schema.ParseGroupVersion(e.APIVersion)
	return gv.Group + "/" + e.Kind + "/" + e.Namespace + "/" + e.Name
}

func (e Entry) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(e.APIVersion)
	u.SetKind(e.Kind)
	u.SetNamespace(e.Namespace)
	u.SetName(e.Name)
	return u
}

func entryOf(u *unstructured.Unstructured, created bool) Entry {
	return Entry{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Created: created}
}

// Inventory is what the last install applied.
type Inventory struct {
	Namespace string
	Version   string
	Entries   []Entry
}

func (inv *Inventory) find(e Entry) (Entry, bool) {
	if inv == nil {
		return Entry{}, false
	}
	for _, x := range inv.Entries {
		if x.key() == e.key() {
			return x, true
		}
	}
	return Entry{}, false
}

// readInventory reads the inventory; nil without error when there is none.
func readInventory(ctx context.Context, c client.Reader, namespace string) (*Inventory, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: InventoryName}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the install's inventory ConfigMap %s/%s: %w", namespace, InventoryName, err)
	}
	inv := &Inventory{Namespace: namespace, Version: cm.Data["version"]}
	if err := json.Unmarshal([]byte(cm.Data[inventoryKey]), &inv.Entries); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s data.%s: %w", namespace, InventoryName, inventoryKey, err)
	}
	return inv, nil
}

// writeInventory stores the inventory by server-side apply.
func writeInventory(ctx context.Context, c client.Client, inv *Inventory) error {
	entries := append([]Entry(nil), inv.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].key() < entries[j].key() })
	raw, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace(inv.Namespace)
	cm.SetName(InventoryName)
	cm.SetLabels(map[string]string{LabelManagedBy: ManagedBy, "app.kubernetes.io/part-of": "ferry"})
	cm.SetAnnotations(map[string]string{"ferry.io/description": "what ferryctl install applied; ferryctl uninstall removes the objects listed as created"})
	if err := unstructured.SetNestedStringMap(cm.Object, map[string]string{"version": inv.Version, inventoryKey: string(raw)}, "data"); err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(cm), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("write the install's inventory ConfigMap %s/%s: %w", inv.Namespace, InventoryName, err)
	}
	return nil
}
