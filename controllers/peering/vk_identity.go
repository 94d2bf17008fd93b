package peering

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// virtualKubeletRole names the roles every virtual kubelet is bound to: the
// generated ClusterRole, and the generated Roles in ferry-system (its
// credential, the cluster identity) and kube-system (the client CA).
const virtualKubeletRole = "ferry-virtual-kubelet"

// identityFieldOwner is the field manager of the identities' objects.
const identityFieldOwner = client.FieldOwner("ferry-peering")

// VirtualKubeletIdentity is the ServiceAccount, in the VirtualNode's
// namespace, the virtual kubelet of a virtual node runs as:
// ferry-vk-<virtual node>. Each virtual kubelet has its own, so the
// ValidatingAdmissionPolicy ferry-virtual-kubelet-restriction
// (manifests/rbac) can hold it to its own Node, Lease, VirtualNode and pods,
// as NodeRestriction holds kubelets; with one shared identity, any virtual
// kubelet could rewrite every other's node. The bindings carry the same name.
func VirtualKubeletIdentity(virtualNode string) string { return "ferry-vk-" + virtualNode }

// identityBindings are where a virtual kubelet's identity is bound: its
// ClusterRole binding (namespace "") and its Role bindings.
func identityBindings() []string {
	return []string{"", ferryv1alpha1.SystemNamespace, metav1.NamespaceSystem}
}

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;roles,verbs=bind,resourceNames=ferry-virtual-kubelet

// ensureVirtualKubeletIdentity applies the ServiceAccount of a virtual node's
// virtual kubelet and binds it to the virtual kubelet's roles. The
// controller manager may bind those roles only (bind with resourceNames),
// not hand out rights it holds itself.
func ensureVirtualKubeletIdentity(ctx context.Context, c client.Client, vn types.NamespacedName) error {
	name := VirtualKubeletIdentity(vn.Name)
	labels := map[string]string{ferryv1alpha1.LabelManagedBy: "ferry", "app.kubernetes.io/name": "ferry-virtual-kubelet", "app.kubernetes.io/instance": vn.Name}
	sa := corev1ac.ServiceAccount(name, vn.Namespace).WithLabels(labels)
	if err := c.Apply(ctx, sa, identityFieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("apply virtual kubelet ServiceAccount %s/%s: %w", vn.Namespace, name, err)
	}
	subject := rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(name).WithNamespace(vn.Namespace)
	for _, ns := range identityBindings() {
		var err error
		if ns == "" {
			crb := rbacv1ac.ClusterRoleBinding(name).WithLabels(labels).WithSubjects(subject).
				WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(virtualKubeletRole))
			err = c.Apply(ctx, crb, identityFieldOwner, client.ForceOwnership)
		} else {
			rb := rbacv1ac.RoleBinding(name, ns).WithLabels(labels).WithSubjects(subject).
				WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(virtualKubeletRole))
			err = c.Apply(ctx, rb, identityFieldOwner, client.ForceOwnership)
		}
		if err != nil {
			return fmt.Errorf("bind virtual kubelet %s/%s in %q: %w", vn.Namespace, name, ns, err)
		}
	}
	return nil
}

// removeVirtualKubeletIdentity deletes what ensureVirtualKubeletIdentity
// made; objects already gone are no error.
func removeVirtualKubeletIdentity(ctx context.Context, c client.Client, vn types.NamespacedName) error {
	name := VirtualKubeletIdentity(vn.Name)
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: vn.Namespace}}}
	for _, ns := range identityBindings() {
		if ns == "" {
			objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		} else {
			objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		}
	}
	var errs []error
	for _, o := range objs {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete %T %s: %w", o, client.ObjectKeyFromObject(o), err))
		}
	}
	return errors.Join(errs...)
}
