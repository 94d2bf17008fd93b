package peering

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// The controller manager, as its own ServiceAccount with the generated
// roles, gives each virtual kubelet its identity and takes it away; it may
// bind the virtual kubelet's roles and no other.
func TestVirtualKubeletIdentityIsBoundByTheControllerManagerAlone(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	for _, f := range []string{"serviceaccounts.yaml", "rolebindings.yaml"} {
		if out, err := c.Kubectl(ctx, "apply", "--server-side", "-n", ferryv1alpha1.SystemNamespace,
			"-f", filepath.Join("..", "..", "manifests", "controller-manager", f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:ferry-system:ferry-controller-manager",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry-system", "system:authenticated"}}
	cm, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	vn := types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-eu"}
	for range 2 { // idempotent
		if err := ensureVirtualKubeletIdentity(ctx, cm, vn); err != nil {
			t.Fatal(err)
		}
	}
	name := "ferry-vk-ferry-eu"
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: vn.Namespace, Name: name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name}},
	}
	for _, o := range objs {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
	crb := objs[1].(*rbacv1.ClusterRoleBinding)
	if crb.RoleRef.Name != "ferry-virtual-kubelet" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != name || crb.Subjects[0].Namespace != vn.Namespace {
		t.Errorf("ClusterRoleBinding binds %v to %s", crb.Subjects, crb.RoleRef.Name)
	}

	// bind is limited to the virtual kubelet's roles: cluster-admin is
	// refused, though the controller manager may create bindings.
	admin := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ferry-vk-escalation"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: vn.Namespace, Name: name}}}
	if err := cm.Create(ctx, admin); !apierrors.IsForbidden(err) {
		t.Errorf("the controller manager bound cluster-admin: %v", err)
	}

	for range 2 { // gone already is no error
		if err := removeVirtualKubeletIdentity(ctx, cm, vn); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s left behind: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
}
