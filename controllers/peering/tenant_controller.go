package peering

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TenantReconciler gives each consumer peered with this provider a tenant
// namespace, a service account and a Role reaching that namespace only, and
// removes them all (revoking the consumer's tokens) when the ForeignCluster
// goes.
type TenantReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces;serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// No bind or escalate: RBAC lets the controller grant the consumer's Role
// because it holds every right in it (consumerRules) itself:
// +kubebuilder:rbac:groups=ferry.io,resources=resourceslices;twinnamespaces,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ferry.io,resources=resourceslices/status;twinnamespaces/status,verbs=get
// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create,resourceNames=ferry-consumer

// Reconcile makes the tenant of one consumer.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc ferryv1alpha1.ForeignCluster
	if err := r.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	tenant := TenantNamespaceOf(&fc)
	logger := log.FromContext(ctx).WithValues("consumer", fc.Spec.ClusterID, "tenant", tenant)

	if !fc.DeletionTimestamp.IsZero() || !isConsumer(&fc) {
		if !controllerutil.ContainsFinalizer(&fc, TenantFinalizer) {
			return ctrl.Result{}, nil
		}
		// Deleting the namespace deletes the service account, which
		// invalidates every token issued for it: the credential is revoked.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}
		if err := r.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete tenant namespace %s: %w", tenant, err)
		}
		logger.Info("Removed consumer tenant")
		controllerutil.RemoveFinalizer(&fc, TenantFinalizer)
		return ctrl.Result{}, r.Update(ctx, &fc)
	}

	if controllerutil.AddFinalizer(&fc, TenantFinalizer) {
		if err := r.Update(ctx, &fc); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	origin := map[string]string{ferryv1alpha1.LabelOriginCluster: string(fc.Spec.ClusterID)}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, ns, func() error {
		ns.Labels = mergeLabels(ns.Labels, origin)
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("ensure tenant namespace %s: %w", tenant, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.ConsumerServiceAccount, Namespace: tenant}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, sa, func() error {
		sa.Labels = mergeLabels(sa.Labels, origin)
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("ensure consumer service account: %w", err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: ConsumerRole, Namespace: tenant}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, role, func() error {
		role.Labels = mergeLabels(role.Labels, origin)
		role.Rules = consumerRules(fc.Spec.ClusterID)
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("ensure consumer role: %w", err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ConsumerRole, Namespace: tenant}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, binding, func() error {
		binding.Labels = mergeLabels(binding.Labels, origin)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ConsumerRole}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ferryv1alpha1.ConsumerServiceAccount, Namespace: tenant}}
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("ensure consumer role binding: %w", err)
	}
	return ctrl.Result{}, r.updateStatus(ctx, &fc, tenant)
}

// updateStatus tells, on the provider's side, the story of one consumer:
// Authenticated once its tenant and identity exist, ResourcesGranted as its
// ResourceSlice says. It writes only when something changed. Of a peer that
// is also a provider (peered both ways) the conditions tell the other
// direction, which the peer controller follows: the consumer's grant is read
// from its ResourceSlice instead (ferryctl status does).
func (r *TenantReconciler) updateStatus(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, tenant string) error {
	if isProvider(fc) {
		return nil
	}
	status := fc.Status.DeepCopy()
	status.ObservedGeneration = fc.Generation
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: ferryv1alpha1.ForeignClusterAuthenticated, Status: metav1.ConditionTrue, Reason: "TenantReady", ObservedGeneration: fc.Generation,
		Message: fmt.Sprintf("the consumer authenticates as %s/%s, which reaches namespace %s only", tenant, ferryv1alpha1.ConsumerServiceAccount, tenant),
	})
	granted := metav1.Condition{Type: ferryv1alpha1.ForeignClusterResourcesGranted, Status: metav1.ConditionFalse, Reason: "NotAsked",
		Message: "the consumer has not asked for resources", ObservedGeneration: fc.Generation}
	var slices ferryv1alpha1.ResourceSliceList
	if err := r.List(ctx, &slices, client.InNamespace(tenant)); err != nil {
		return fmt.Errorf("list ResourceSlices of %s: %w", tenant, err)
	}
	for _, s := range slices.Items {
		if c := meta.FindStatusCondition(s.Status.Conditions, ferryv1alpha1.ResourceSliceGranted); c != nil {
			granted.Status, granted.Reason, granted.Message = c.Status, c.Reason, resourceSummary(s.Status.Resources)
			if c.Status != metav1.ConditionTrue {
				granted.Message = c.Message
			}
		}
	}
	meta.SetStatusCondition(&status.Conditions, granted)
	return updateStatusIfChanged(ctx, r.Client, fc, status)
}

// consumerRules is all a consumer may do in its tenant namespace: ask for
// resources and twin namespaces, send its NetworkConfig (and change no other
// one), read the provider's, renew its own credential, and renew its Lease. In each twin
// namespace the provider makes for it, the consumer is bound to the
// ferry-twin-namespace ClusterRole; it gets nothing cluster-wide.
func consumerRules(consumer ferryv1alpha1.ClusterID) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"resourceslices/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"twinnamespaces"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"twinnamespaces/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"networkconfigs"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"networkconfigs"}, ResourceNames: []string{string(consumer)}, Verbs: []string{"update", "patch", "delete"}},
		// The consumer reports where it maps this cluster (status.podCIDRAtPeer),
		// which this cluster's gateway translates from.
		{APIGroups: []string{ferryv1alpha1.GroupVersion.Group}, Resources: []string{"networkconfigs/status"}, ResourceNames: []string{string(consumer)}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{ferryv1alpha1.ConsumerServiceAccount}, Verbs: []string{"create"}},
		// The consumer renews its Lease, which the provider's Fencer made
		// (docs/operations/failure-behaviour.md, "Failover and fencing").
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{ferryv1alpha1.ConsumerLeaseName}, Verbs: []string{"get", "update"}},
	}
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}

// SetupWithManager registers the reconciler; a grant re-reconciles the
// ForeignCluster of its consumer.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenant").
		For(&ferryv1alpha1.ForeignCluster{}).
		Watches(&ferryv1alpha1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(r.consumerOf)).
		// Deleting the consumer's ServiceAccount revokes its tokens; the
		// tenant gets a new, empty one at once, for a reissued credential.
		Watches(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(r.consumerOfServiceAccount)).
		Complete(r)
}

// consumerOfServiceAccount maps a tenant's consumer ServiceAccount to the
// ForeignCluster of its consumer.
func (r *TenantReconciler) consumerOfServiceAccount(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetName() != ferryv1alpha1.ConsumerServiceAccount {
		return nil
	}
	return r.consumersWhere(ctx, func(fc *ferryv1alpha1.ForeignCluster) bool { return TenantNamespaceOf(fc) == obj.GetNamespace() })
}

// consumerOf maps a ResourceSlice to the ForeignCluster of its consumer.
func (r *TenantReconciler) consumerOf(ctx context.Context, obj client.Object) []reconcile.Request {
	slice := obj.(*ferryv1alpha1.ResourceSlice)
	return r.consumersWhere(ctx, func(fc *ferryv1alpha1.ForeignCluster) bool { return fc.Spec.ClusterID == slice.Spec.ConsumerClusterID })
}

// consumersWhere are the consumer ForeignClusters match accepts.
func (r *TenantReconciler) consumersWhere(ctx context.Context, match func(*ferryv1alpha1.ForeignCluster) bool) []reconcile.Request {
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.List(ctx, &fcs); err != nil {
		log.FromContext(ctx).Error(err, "List ForeignClusters")
		return nil
	}
	var out []reconcile.Request
	for _, fc := range fcs.Items {
		if isConsumer(&fc) && match(&fc) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fc)})
		}
	}
	return out
}
