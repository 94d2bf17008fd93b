// Package hostpath is the test bed's storage driver: it provisions each
// PersistentVolume as a directory on the test machine, pinned to the node
// the scheduler picked. It plugs into sig-storage-lib-external-provisioner,
// so kube-controller-manager's PV controller, kube-scheduler's VolumeBinding
// and ferry's storage fabric work against it as against a node-local CSI
// driver, while a test can see each volume's data on disk and run a node out
// of space.
package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// ParameterCapacity is the StorageClass parameter bounding the storage the
// class may provision on one node (a quantity, e.g. "10Gi"), so a test can
// make a node run out: a claim that does not fit is handed back to the
// scheduler. Without it a node never runs out.
const ParameterCapacity = "capacity"

// LabelHostname is the node label volumes are pinned by. Its value is taken
// to be the node's name, as on the test bed's kwok nodes and its real ones
// (whose kubelet sets it from --hostname-override, the node's name).
const LabelHostname = "kubernetes.io/hostname"

// Provisioner makes hostPath volumes as directories <root>/<volume name>.
// It keeps what each node holds per class in memory: it lives as long as the
// cluster it serves.
type Provisioner struct {
	root string

	mu        sync.Mutex
	allocated map[string]allocation // by volume name
}

// allocation is the storage one volume takes from its class on its node.
type allocation struct {
	class, node string
	size        resource.Quantity
}

var _ controller.Provisioner = (*Provisioner)(nil)

// New returns a Provisioner making its volumes under root, which it creates.
func New(root string) (*Provisioner, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create volume root %s: %w", root, err)
	}
	return &Provisioner{root: root, allocated: map[string]allocation{}}, nil
}

// Provision creates the claim's directory and returns its volume: the
// claim's request as capacity, its access and volume modes, the class's
// reclaim policy, and, when the scheduler selected a node, required node
// affinity to that node. A claim that does not fit in the class's capacity
// on the node is handed back to the scheduler (ProvisioningReschedule).
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	claim := klog.KObj(o.PVC)
	size, ok := o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s: no storage request", claim)
	}
	limit, err := capacityLimit(o.StorageClass)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	node := o.SelectedNodeName

	p.mu.Lock()
	defer p.mu.Unlock()
	if limit != nil && node != "" {
		used := p.usedLocked(o.StorageClass.Name, node, o.PVName)
		if free := freeOf(*limit, used); free.Cmp(size) < 0 {
			return nil, controller.ProvisioningReschedule, fmt.Errorf(
				"node %s is out of class %s: %s of its %s capacity free, claim %s asks for %s",
				node, o.StorageClass.Name, free.String(), limit.String(), claim, size.String())
		}
	}
	dir := filepath.Join(p.root, o.PVName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s: create volume directory: %w", claim, err)
	}
	p.allocated[o.PVName] = allocation{class: o.StorageClass.Name, node: node, size: size}
	klog.FromContext(ctx).Info("Provisioned volume", "volume", o.PVName, "claim", claim, "node", node, "size", size.String(), "dir", dir)

	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaimPolicy(o.StorageClass),
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
			},
			NodeAffinity: pinnedTo(node),
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory. A volume this provisioner did not
// make (another source, or a directory elsewhere) is left alone.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	dir := filepath.Join(p.root, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		return &controller.IgnoredError{Reason: fmt.Sprintf("volume %s is not a directory %s made", pv.Name, p.root)}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete directory of volume %s: %w", pv.Name, err)
	}
	p.mu.Lock()
	delete(p.allocated, pv.Name)
	p.mu.Unlock()
	klog.FromContext(ctx).Info("Deleted volume", "volume", pv.Name, "dir", dir)
	return nil
}

// usedLocked is the storage volumes of class take on node, the volume named
// except (being provisioned again) left out.
func (p *Provisioner) usedLocked(class, node, except string) resource.Quantity {
	var used resource.Quantity
	for name, a := range p.allocated {
		if name != except && a.class == class && a.node == node {
			used.Add(a.size)
		}
	}
	return used
}

// freeOf is what is left of limit once used is taken, never below zero.
func freeOf(limit, used resource.Quantity) resource.Quantity {
	free := limit.DeepCopy()
	free.Sub(used)
	if free.Sign() < 0 {
		return resource.Quantity{Format: limit.Format}
	}
	return free
}

// capacityLimit reads the class's parameters: nil when it sets no capacity.
// An unknown parameter is refused, so a misspelt limit does not silently
// leave nodes unbounded.
func capacityLimit(class *storagev1.StorageClass) (*resource.Quantity, error) {
	var limit *resource.Quantity
	for key, value := range class.Parameters {
		if key != ParameterCapacity {
			return nil, fmt.Errorf("storage class %s: unknown parameter %q (the only one is %q)", class.Name, key, ParameterCapacity)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("storage class %s: parameter %s %q: %w", class.Name, ParameterCapacity, value, err)
		}
		limit = &q
	}
	return limit, nil
}

// reclaimPolicy is the class's, Delete when it sets none (as the API
// server defaults it).
func reclaimPolicy(class *storagev1.StorageClass) corev1.PersistentVolumeReclaimPolicy {
	if class.ReclaimPolicy != nil {
		return *class.ReclaimPolicy
	}
	return corev1.PersistentVolumeReclaimDelete
}

// pinnedTo is the required node affinity to node, or none when no node was
// selected (a claim of a class binding immediately).
func pinnedTo(node string) *corev1.VolumeNodeAffinity {
	if node == "" {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
}

// PinnedNode is the node a volume's required node affinity names by
// LabelHostname (the node its directory is on), or "" when it names none.
func PinnedNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
