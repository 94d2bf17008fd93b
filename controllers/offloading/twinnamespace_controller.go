package offloading

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psaapi "k8s.io/pod-security-admission/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ferry-io/ferry/api/podsecurity"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

// Reasons of a TwinNamespace's Ready condition.
const (
	ReasonTwinReady        = "NamespaceReady"
	ReasonNotInTenant      = "NotInTenantNamespace"
	ReasonConsumerMismatch = "ConsumerMismatch"
	ReasonReservedName     = "ReservedName"
	ReasonTwinTerminating  = "Terminating"
)

// TwinNamespaceReconciler answers, on a provider, consumers' requests for
// twin namespaces: it creates the namespace with the consumer's origin
// labels and a RoleBinding granting the consumer ferry-twin-namespace there,
// refuses names it must not give (reserved, taken by anyone else), and
// deletes the namespace with the request. It never adopts, changes or
// deletes a namespace it did not make for that very consumer namespace.
type TwinNamespaceReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=ferry.io,resources=twinnamespaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=twinnamespaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=ferry-twin-namespace

// Reconcile answers one request.
func (r *TwinNamespaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tw ferryv1alpha1.TwinNamespace
	if err := r.Get(ctx, req.NamespacedName, &tw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx).WithValues("consumer", tw.Spec.ConsumerClusterID, "twinNamespace", tw.Name)
	status := tw.Status.DeepCopy()
	status.ObservedGeneration = tw.Generation

	if !tw.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&tw, ferryv1alpha1.TwinNamespaceFinalizer) {
			return ctrl.Result{}, nil
		}
		gone, err := r.deleteNamespace(ctx, &tw)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !gone {
			setTwinStatus(status, tw.Generation, ferryv1alpha1.OffloadingTerminating, metav1.ConditionFalse, ReasonTwinTerminating,
				fmt.Sprintf("deleting namespace %s and everything in it", tw.Name))
			return ctrl.Result{}, r.writeStatus(ctx, &tw, status)
		}
		logger.Info("Twin namespace removed")
		controllerutil.RemoveFinalizer(&tw, ferryv1alpha1.TwinNamespaceFinalizer)
		return ctrl.Result{}, r.Update(ctx, &tw)
	}

	if reason, msg, err := r.refusal(ctx, &tw); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		logger.Info("Refused twin namespace", "reason", reason, "message", msg)
		setTwinStatus(status, tw.Generation, ferryv1alpha1.OffloadingFailed, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, r.writeStatus(ctx, &tw, status)
	}
	if controllerutil.AddFinalizer(&tw, ferryv1alpha1.TwinNamespaceFinalizer) {
		if err := r.Update(ctx, &tw); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.List(ctx, &fcs); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ForeignClusters: %w", err)
	}
	level := podsecurity.LevelOf(fcs.Items, tw.Spec.ConsumerClusterID)
	labels := twinLabels(&tw)
	maps.Copy(labels, podsecurity.NamespaceLabels(level))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tw.Name, Labels: labels}}
	if err := r.Create(ctx, ns); err == nil {
		logger.Info("Created twin namespace", "podSecurity", level)
	} else if !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create namespace %s: %w", tw.Name, err)
	} else if err := r.enforce(ctx, tw.Name, labels); err != nil {
		return ctrl.Result{}, err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: peering.ConsumerRole, Namespace: tw.Name}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, binding, func() error {
		binding.Labels = twinLabels(&tw)
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ferryv1alpha1.TwinNamespaceClusterRole}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ferryv1alpha1.ConsumerServiceAccount, Namespace: tw.Namespace}}
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("bind the consumer in namespace %s: %w", tw.Name, err)
	}
	setTwinStatus(status, tw.Generation, ferryv1alpha1.OffloadingReady, metav1.ConditionTrue, ReasonTwinReady,
		fmt.Sprintf("namespace %s is ready for consumer %s's namespace %s", tw.Name, tw.Spec.ConsumerClusterID, tw.Spec.ConsumerNamespace))
	return ctrl.Result{}, r.writeStatus(ctx, &tw, status)
}

// enforce puts the pod security labels of labels on the existing twin
// namespace name when they differ (the consumer's level changed, or someone
// changed them).
func (r *TwinNamespaceReconciler) enforce(ctx context.Context, name string, labels map[string]string) error {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		return fmt.Errorf("read namespace %s: %w", name, err)
	}
	patched := ns.DeepCopy()
	if patched.Labels == nil {
		patched.Labels = map[string]string{}
	}
	for _, key := range []string{psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel} {
		patched.Labels[key] = labels[key]
	}
	if maps.Equal(patched.Labels, ns.Labels) {
		return nil
	}
	if err := r.Patch(ctx, patched, client.MergeFrom(&ns)); err != nil {
		return fmt.Errorf("label namespace %s with its pod security level: %w", name, err)
	}
	log.FromContext(ctx).Info("Set the twin namespace's pod security level", "level", labels[psaapi.EnforceLevelLabel])
	return nil
}

// refusal says why tw must not be answered with a namespace, or "".
func (r *TwinNamespaceReconciler) refusal(ctx context.Context, tw *ferryv1alpha1.TwinNamespace) (reason, message string, _ error) {
	var tenant corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: tw.Namespace}, &tenant); err != nil {
		return "", "", client.IgnoreNotFound(err)
	}
	owner := tenant.Labels[ferryv1alpha1.LabelOriginCluster]
	switch {
	case owner == "":
		return ReasonNotInTenant, fmt.Sprintf("namespace %s is not a consumer's tenant namespace: TwinNamespaces are answered in tenant namespaces only", tw.Namespace), nil
	case owner != string(tw.Spec.ConsumerClusterID):
		return ReasonConsumerMismatch, fmt.Sprintf("spec.consumerClusterID %q: tenant namespace %s belongs to consumer %q", tw.Spec.ConsumerClusterID, tw.Namespace, owner), nil
	}
	if msg := reservedTwinName(tw.Name); msg != "" {
		return ReasonReservedName, msg, nil
	}
	var ns corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: tw.Name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("read namespace %s: %w", tw.Name, err)
	case !isTwinOf(&ns, tw):
		return ReasonNamespaceConflict, fmt.Sprintf("metadata.name: namespace %s already exists in this cluster and was not made for consumer %s's namespace %s; choose another name (namespaceMappingStrategy DefaultName or SelectedName)",
			tw.Name, tw.Spec.ConsumerClusterID, tw.Spec.ConsumerNamespace), nil
	}
	return "", "", nil
}

// reservedTwinName says why name cannot be a twin namespace, or "".
func reservedTwinName(name string) string {
	switch {
	case name == metav1.NamespaceDefault, name == ferryv1alpha1.SystemNamespace, strings.HasPrefix(name, "kube-"):
		return fmt.Sprintf("metadata.name: %s is reserved for the provider's own use (default, kube-*, %s, ferry-tenant-*)", name, ferryv1alpha1.SystemNamespace)
	case strings.HasPrefix(name, peering.TenantNamespace("")):
		return fmt.Sprintf("metadata.name: %s is reserved for ferry's tenant namespaces (ferry-tenant-*)", name)
	}
	return ""
}

func twinLabels(tw *ferryv1alpha1.TwinNamespace) map[string]string {
	return map[string]string{
		ferryv1alpha1.LabelOriginCluster:   string(tw.Spec.ConsumerClusterID),
		ferryv1alpha1.LabelOriginNamespace: tw.Spec.ConsumerNamespace,
	}
}

// isTwinOf tells whether ns was made for tw's consumer namespace.
func isTwinOf(ns *corev1.Namespace, tw *ferryv1alpha1.TwinNamespace) bool {
	return ns.Labels[ferryv1alpha1.LabelOriginCluster] == string(tw.Spec.ConsumerClusterID) &&
		ns.Labels[ferryv1alpha1.LabelOriginNamespace] == tw.Spec.ConsumerNamespace
}

// deleteNamespace deletes tw's namespace if it is ours, and reports whether
// nothing of it is left.
func (r *TwinNamespaceReconciler) deleteNamespace(ctx context.Context, tw *ferryv1alpha1.TwinNamespace) (gone bool, _ error) {
	var ns corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: tw.Name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read namespace %s: %w", tw.Name, err)
	case !isTwinOf(&ns, tw):
		return true, nil // someone else's: never touched
	case !ns.DeletionTimestamp.IsZero():
		return false, nil
	}
	if err := r.Delete(ctx, &ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete namespace %s: %w", tw.Name, err)
	}
	return false, nil
}

func setTwinStatus(status *ferryv1alpha1.TwinNamespaceStatus, generation int64, phase ferryv1alpha1.OffloadingPhase, s metav1.ConditionStatus, reason, message string) {
	status.Phase = phase
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: ferryv1alpha1.TwinNamespaceReady, Status: s, Reason: reason, Message: message, ObservedGeneration: generation})
}

func (r *TwinNamespaceReconciler) writeStatus(ctx context.Context, tw *ferryv1alpha1.TwinNamespace, status *ferryv1alpha1.TwinNamespaceStatus) error {
	if equality.Semantic.DeepEqual(&tw.Status, status) {
		return nil
	}
	tw.Status = *status
	if err := r.Status().Update(ctx, tw); err != nil {
		return fmt.Errorf("update status of TwinNamespace %s/%s: %w", tw.Namespace, tw.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler; a twin namespace's changes (its
// deletion finishing, a conflicting namespace going) wake its request.
func (r *TwinNamespaceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("twinnamespace").
		For(&ferryv1alpha1.TwinNamespace{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.requestsFor)).
		// Spec changes only (podSecurity): a ForeignCluster's status
		// changes with every health transition.
		Watches(&ferryv1alpha1.ForeignCluster{}, handler.EnqueueRequestsFromMapFunc(r.requestsOfConsumer),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// requestsOfConsumer maps a ForeignCluster to its consumer's TwinNamespaces:
// their pod security level follows its podSecurity.
func (r *TwinNamespaceReconciler) requestsOfConsumer(ctx context.Context, obj client.Object) []reconcile.Request {
	var list ferryv1alpha1.TwinNamespaceList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, tw := range list.Items {
		if tw.Spec.ConsumerClusterID == obj.(*ferryv1alpha1.ForeignCluster).Spec.ClusterID {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&tw)})
		}
	}
	return out
}

// requestsFor maps a namespace to the TwinNamespaces asking for its name.
func (r *TwinNamespaceReconciler) requestsFor(ctx context.Context, obj client.Object) []reconcile.Request {
	var list ferryv1alpha1.TwinNamespaceList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, tw := range list.Items {
		if tw.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&tw)})
		}
	}
	return out
}
