package install

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// UninstallOptions tune an uninstall.
type UninstallOptions struct {
	// Force uninstalls although peerings exist: their ForeignClusters are
	// deleted first (the controllers unpeer), and finalizers of ferry's
	// objects still there after Timeout are removed.
	Force bool
	// Timeout bounds each wait (custom resources gone, objects gone).
	Timeout time.Duration
	// DryRun prints what would be deleted and deletes nothing.
	DryRun bool
}

// ErrPeered refuses an uninstall while peerings exist.
var ErrPeered = errors.New("peerings exist")

// ErrNotInstalled says there is no inventory: nothing was installed by
// ferryctl in this cluster (or it was uninstalled).
var ErrNotInstalled = errors.New("no ferryctl install found")

// Uninstall removes exactly what install made, as its inventory lists:
// first the admission configurations (so that nothing refuses what
// follows), then every object of ferry's CRDs while the controllers still
// run to finalize them, then the workloads, waiting until their pods are
// gone (foreground deletion), so that no controller runs any more; then the
// objects of ferry's CRDs the controllers made again meanwhile (the local
// NetworkConfig), then the rest in the reverse of the apply order, CRDs and
// Namespaces last. Objects the install found already there are left. It
// refuses while ForeignClusters exist, unless opts.Force.
func (i *Installer) Uninstall(ctx context.Context, opts UninstallOptions) (removed int, err error) {
	if opts.Timeout <= 0 {
		return 0, errors.New("uninstall: the timeout must be positive")
	}
	inv, err := readInventory(ctx, i.Client, i.Namespace)
	if err != nil {
		return 0, err
	}
	if inv == nil {
		return 0, fmt.Errorf("%w: no ConfigMap %s/%s", ErrNotInstalled, i.Namespace, InventoryName)
	}
	peers, err := i.listCustom(ctx, schema.GroupVersionKind{Group: ferryv1alpha1.GroupVersion.Group, Version: ferryv1alpha1.GroupVersion.Version, Kind: "ForeignCluster"})
	if err != nil {
		return 0, err
	}
	if len(peers) > 0 && !opts.Force {
		var names []string
		for _, p := range peers {
			names = append(names, p.GetName())
		}
		return 0, fmt.Errorf("%w: ForeignClusters %s; unpeer them first (ferryctl unpeer) or pass --force, which deletes them and lets the controllers unpeer", ErrPeered, strings.Join(names, ", "))
	}
	var mine []Entry
	for _, e := range inv.Entries {
		if e.Created {
			mine = append(mine, e)
		}
	}
	mine = deletionOrder(mine)
	if opts.DryRun {
		for _, e := range mine {
			i.printf("  would delete %s\n", e)
		}
		if len(peers) > 0 {
			i.printf("  would delete %d ForeignClusters first (--force)\n", len(peers))
		}
		return 0, nil
	}

	var admission, workloads, rest []Entry
	for _, e := range mine {
		gv, _ := schema.ParseGroupVersion(e.APIVersion)
		switch stepOf(schema.GroupKind{Group: gv.Group, Kind: e.Kind}) {
		case stepAdmission:
			admission = append(admission, e)
		case stepWorkloads:
			workloads = append(workloads, e)
		default:
			rest = append(rest, e)
		}
	}
	start := time.Now()
	if err := i.deleteAll(ctx, admission, opts.Timeout); err != nil {
		return 0, fmt.Errorf("admission: %w", err)
	}
	i.printf("  ✓ %-26s %3d deleted in %s\n", stepAdmission, len(admission), time.Since(start).Round(100*time.Millisecond))
	removed = len(admission)

	kinds, err := i.customKinds(ctx, inv)
	if err != nil {
		return removed, err
	}
	start = time.Now()
	n, err := i.deleteCustomResources(ctx, kinds, opts)
	if err != nil {
		return removed, err
	}
	i.printf("  ✓ %-26s %3d deleted (ferry's objects, finalized by its controllers) in %s\n", "custom resources", n, time.Since(start).Round(100*time.Millisecond))

	// The controllers go before what they own: one still running makes
	// again what is deleted (the controller manager its local
	// NetworkConfig, within a second). Foreground: the Deployment is gone
	// only once its pods are.
	start = time.Now()
	if err := i.deleteAllPropagating(ctx, workloads, opts.Timeout, metav1.DeletePropagationForeground); err != nil {
		return removed, fmt.Errorf("%s: %w", stepWorkloads, err)
	}
	removed += len(workloads)
	i.printf("  ✓ %-26s %3d deleted (their pods gone) in %s\n", stepWorkloads, len(workloads), time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	n, err = i.deleteCustomResources(ctx, kinds, opts)
	if err != nil {
		return removed, fmt.Errorf("after the workloads: %w", err)
	}
	if n > 0 {
		i.printf("  ✓ %-26s %3d deleted (made again by the controllers before they stopped) in %s\n", "custom resources", n, time.Since(start).Round(100*time.Millisecond))
	}

	start = time.Now()
	if err := i.deleteAll(ctx, rest, opts.Timeout); err != nil {
		return removed, err
	}
	i.printf("  ✓ %-26s %3d deleted in %s\n", "the rest", len(rest), time.Since(start).Round(100*time.Millisecond))
	// The inventory goes with its namespace when the install made it;
	// otherwise it is deleted on its own, last.
	inventory := Entry{APIVersion: "v1", Kind: "ConfigMap", Namespace: i.Namespace, Name: InventoryName}
	if err := i.deleteAll(ctx, []Entry{inventory}, opts.Timeout); err != nil {
		return len(mine), err
	}
	return len(mine), nil
}

// customKinds are the kinds of the CRDs the install made.
func (i *Installer) customKinds(ctx context.Context, inv *Inventory) ([]schema.GroupVersionKind, error) {
	var kinds []schema.GroupVersionKind
	for _, e := range inv.Entries {
		if !e.Created || e.Kind != "CustomResourceDefinition" || !strings.HasPrefix(e.APIVersion, "apiextensions.k8s.io/") {
			continue
		}
		crd := e.object()
		if err := i.Client.Get(ctx, types.NamespacedName{Name: e.Name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read %s: %w", e, err)
		}
		if gvk, ok := storedKind(crd); ok {
			kinds = append(kinds, gvk)
		}
	}
	return kinds, nil
}

// deleteCustomResources deletes every object of kinds, in all namespaces,
// and waits for them to go while the controllers finalize them. An object
// made again under the same name (another UID) counts as gone: a
// controller still running made it, and the second pass, once the
// workloads are gone, deletes it. With opts.Force, finalizers still there
// after the timeout are removed; without, that is an error naming the
// objects.
func (i *Installer) deleteCustomResources(ctx context.Context, kinds []schema.GroupVersionKind, opts UninstallOptions) (int, error) {
	var all []*unstructured.Unstructured
	for _, gvk := range kinds {
		objs, err := i.listCustom(ctx, gvk)
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			if err := i.Client.Delete(ctx, o, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("delete %s %s: %w", gvk.Kind, key(o), err)
			}
		}
		all = append(all, objs...)
	}
	var left []*unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, i.poll(), opts.Timeout, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, o := range all {
			cur := o.DeepCopy()
			err := i.Client.Get(ctx, client.ObjectKeyFromObject(o), cur)
			switch {
			case apierrors.IsNotFound(err):
			case err == nil && cur.GetUID() != o.GetUID():
				// Made again by a controller: gone from this pass.
			default:
				// Still there, or not read (asked again).
				left = append(left, cur)
			}
		}
		return len(left) == 0, nil
	})
	if err == nil || len(left) == 0 {
		return len(all), err
	}
	var names []string
	for _, o := range left {
		names = append(names, fmt.Sprintf("%s %s (finalizers %v)", o.GetKind(), key(o), o.GetFinalizers()))
	}
	if !opts.Force {
		return 0, fmt.Errorf("still there after %s, are ferry's controllers running? %s; --force removes their finalizers", opts.Timeout, strings.Join(names, ", "))
	}
	for _, o := range left {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := i.Client.Patch(ctx, o, patch); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("remove the finalizers of %s %s: %w", o.GetKind(), key(o), err)
		}
		i.printf("  ! removed the finalizers of %s %s (--force)\n", o.GetKind(), key(o))
	}
	return len(all), nil
}

// listCustom lists every object of a kind; none when the kind is not served.
func (i *Installer) listCustom(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := i.Client.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for k := range list.Items {
		out = append(out, &list.Items[k])
	}
	return out, nil
}

// storedKind is the group, storage version and kind a CRD serves.
func storedKind(crd *unstructured.Unstructured) (schema.GroupVersionKind, bool) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return schema.GroupVersionKind{Group: group, Version: name, Kind: kind}, group != "" && kind != "" && name != ""
		}
	}
	return schema.GroupVersionKind{}, false
}

func key(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
