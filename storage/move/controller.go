package move

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

// Finalizer holds a VolumeMove until what it staged is removed.
const Finalizer = "storage.ferry.io/volume-move"

// Cluster is the access to one cluster: a client, and a clientset for pod
// logs.
type Cluster struct {
	Client client.Client
	Kube   kubernetes.Interface
}

// Clusters hands out the access to providers (the consumer's credential).
type Clusters interface {
	// Provider is provider id's access, or an error wrapping
	// storage.ErrNotPeered.
	Provider(ctx context.Context, id ferryv1alpha1.ClusterID) (*Cluster, error)
}

// Options configure the controller.
type Options struct {
	// ClusterID of this cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Namespace is the storage namespace (real claims, this cluster's
	// mover pods).
	Namespace string
	// Image of ferry-volume-mover, and its pull policy.
	Image      string
	PullPolicy corev1.PullPolicy
	// NetworkDisabled: pod addresses pass between clusters unchanged.
	NetworkDisabled bool
	// MaxAttempts is how many copies are started before the move fails (5
	// when zero).
	MaxAttempts int32
	// ProvisionTimeout bounds the wait for the target claim and the pods to
	// be placed (2m when zero).
	ProvisionTimeout time.Duration
	// Poll is how often a running copy is looked at (2s when zero).
	Poll time.Duration
}

// Reconciler moves volumes.
type Reconciler struct {
	// Client of this cluster (cached) and Kube, its clientset (logs).
	Client   client.Client
	Kube     kubernetes.Interface
	Clusters Clusters
	Recorder events.EventRecorder
	Options  Options
}

// +kubebuilder:rbac:groups=ferry.io,resources=volumemoves,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=volumemoves/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=volumemoves/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

func (o *Options) defaults() {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.ProvisionTimeout == 0 {
		o.ProvisionTimeout = 2 * time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
}

// refusal is a check that failed before anything changed.
type refusal struct{ reason, msg string }

func (e *refusal) Error() string { return e.msg }

func refuse(reason, format string, args ...any) error {
	return &refusal{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// Reconcile drives one VolumeMove.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Options.defaults()
	mv := &ferryv1alpha1.VolumeMove{}
	if err := r.Client.Get(ctx, req.NamespacedName, mv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, mv)
	}
	switch mv.Status.Phase {
	case "", ferryv1alpha1.MovePending:
		return r.start(ctx, mv)
	case ferryv1alpha1.MoveCopying:
		return r.copying(ctx, mv)
	case ferryv1alpha1.MoveSwitching:
		return r.switching(ctx, mv)
	case ferryv1alpha1.MoveAwaitingConfirmation:
		return r.awaiting(ctx, mv)
	}
	// Done: nothing is held any more.
	if controllerutil.ContainsFinalizer(mv, Finalizer) {
		patch := client.MergeFrom(mv.DeepCopy())
		controllerutil.RemoveFinalizer(mv, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, mv, patch))
	}
	return ctrl.Result{}, nil
}

// start checks the move and, when nothing refuses it, records its source
// and target and moves on to copying.
func (r *Reconciler) start(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (ctrl.Result, error) {
	pvc, pv, source, err := r.check(ctx, mv)
	var ref *refusal
	if errors.As(err, &ref) {
		failures.WithLabelValues(ref.reason).Inc()
		r.event(mv, corev1.EventTypeWarning, ref.reason, ref.msg)
		return ctrl.Result{}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
			st.Phase = ferryv1alpha1.MoveRefused
			setReady(st, mv, metav1.ConditionFalse, ref.reason, ref.msg)
			st.CompletionTime = ptr.To(metav1.Now())
		})
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !controllerutil.ContainsFinalizer(mv, Finalizer) {
		patch := client.MergeFrom(mv.DeepCopy())
		controllerutil.AddFinalizer(mv, Finalizer)
		if err := r.Client.Patch(ctx, mv, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to VolumeMove %s/%s: %w", mv.Namespace, mv.Name, err)
		}
	}
	r.event(mv, corev1.EventTypeNormal, ferryv1alpha1.MoveReasonProvisioning, fmt.Sprintf("moving claim %s (volume %s) from cluster %s to %s", pvc.Name, pv.Name, source.Cluster, mv.Spec.TargetCluster))
	return ctrl.Result{}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
		st.Phase = ferryv1alpha1.MoveCopying
		st.ClaimUID = string(pvc.UID)
		st.Source = source
		st.Target = ferryv1alpha1.VolumeMoveEndpoint{Cluster: mv.Spec.TargetCluster}
		st.StartTime = ptr.To(metav1.Now())
		setReady(st, mv, metav1.ConditionFalse, ferryv1alpha1.MoveReasonProvisioning, fmt.Sprintf("provisioning the target claim in cluster %s", mv.Spec.TargetCluster))
	})
}

// check runs every refusal, in order, before anything is changed.
func (r *Reconciler) check(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, ferryv1alpha1.VolumeMoveEndpoint, error) {
	var none ferryv1alpha1.VolumeMoveEndpoint
	var moves ferryv1alpha1.VolumeMoveList
	if err := r.Client.List(ctx, &moves, client.InNamespace(mv.Namespace)); err != nil {
		return nil, nil, none, fmt.Errorf("list VolumeMoves of %s: %w", mv.Namespace, err)
	}
	if first := ActiveMoveBefore(moves.Items, mv); first != nil {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonMoveInProgress, "VolumeMove %s already moves claim %s (phase %s): wait for it, or confirm or revert it",
			first.Name, mv.Spec.ClaimName, orPending(first.Status.Phase))
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); apierrors.IsNotFound(err) {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonClaimNotFound, "claim %s/%s does not exist", mv.Namespace, mv.Spec.ClaimName)
	} else if err != nil {
		return nil, nil, none, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
	}
	if ptr.Deref(pvc.Spec.StorageClassName, "") != ferryv1alpha1.StorageClassVirtual || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || !pvc.DeletionTimestamp.IsZero() {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonClaimNotMovable, "claim %s/%s must be a bound claim of storage class %s (it is %s, class %q)",
			pvc.Namespace, pvc.Name, ferryv1alpha1.StorageClassVirtual, pvc.Status.Phase, ptr.Deref(pvc.Spec.StorageClassName, ""))
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(mv.Namespace)); err != nil {
		return nil, nil, none, fmt.Errorf("list pods of %s: %w", mv.Namespace, err)
	}
	if using := PodsUsing(pods.Items, pvc.Name); len(using) > 0 {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonWorkloadRunning, "pods %s use claim %s: stop them first (scale the workload to 0)", strings.Join(using, ", "), pvc.Name)
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nil, nil, none, fmt.Errorf("read volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, pvc.Namespace, pvc.Name, err)
	}
	source := ferryv1alpha1.VolumeMoveEndpoint{Volume: pv.Name}
	if ref, ok := storage.RemoteRefOf(pv); ok {
		source.Cluster, source.Claim = ref.Cluster, ref.Namespace+"/"+ref.Name
	} else if ns, name, ok := storage.BackingClaimOf(pv); ok {
		source.Cluster, source.Claim = r.Options.ClusterID, ns+"/"+name
	} else {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonClaimNotMovable, "volume %s of claim %s/%s was not made by ferry's storage fabric", pv.Name, pvc.Namespace, pvc.Name)
	}
	if source.Cluster == mv.Spec.TargetCluster {
		return nil, nil, none, refuse(ferryv1alpha1.MoveReasonAlreadyThere, "the data of claim %s/%s is already in cluster %s", pvc.Namespace, pvc.Name, source.Cluster)
	}
	for _, cluster := range []ferryv1alpha1.ClusterID{source.Cluster, mv.Spec.TargetCluster} {
		if cluster == r.Options.ClusterID {
			continue
		}
		if _, err := r.Clusters.Provider(ctx, cluster); err != nil {
			return nil, nil, none, refuse(ferryv1alpha1.MoveReasonTargetUnreachable, "cluster %s: %v", cluster, err)
		}
		if _, err := r.twin(ctx, mv.Namespace, cluster); err != nil {
			return nil, nil, none, err
		}
	}
	if err := r.checkClass(ctx, pvc, mv.Spec.TargetCluster); err != nil {
		return nil, nil, none, err
	}
	return pvc, pv, source, nil
}

// checkClass refuses a target that does not serve the class the claim
// asked for.
func (r *Reconciler) checkClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim, target ferryv1alpha1.ClusterID) error {
	requested := storage.RequestedClass(pvc)
	if target == r.Options.ClusterID {
		if _, err := r.realClass(ctx, requested); err != nil {
			return refuse(ferryv1alpha1.MoveReasonClassNotOffered, "cluster %s: %v", target, err)
		}
		return nil
	}
	_, err := r.providerClass(ctx, target, requested)
	return err
}

// providerClass is the provider's class serving requested, from its
// virtual nodes.
func (r *Reconciler) providerClass(ctx context.Context, target ferryv1alpha1.ClusterID, requested string) (string, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(target)}); err != nil {
		return "", fmt.Errorf("list the virtual nodes of %s: %w", target, err)
	}
	var problems []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !placement.IsVirtualNode(n) {
			continue
		}
		classes, _, err := placement.NodeStorageClasses(n)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		c, err := placement.ResolveStorageClass(classes, requested)
		if err == nil {
			return c, nil
		}
		problems = append(problems, fmt.Sprintf("node %s: %v", n.Name, err))
	}
	if len(problems) == 0 {
		return "", refuse(ferryv1alpha1.MoveReasonTargetUnreachable, "cluster %s has no virtual node here", target)
	}
	return "", refuse(ferryv1alpha1.MoveReasonClassNotOffered, "cluster %s does not serve the claim's class: %s", target, strings.Join(problems, "; "))
}

// realClass resolves a class of this cluster as the provisioner does.
func (r *Reconciler) realClass(ctx context.Context, requested string) (string, error) {
	p := storage.NewProvisioner(r.Client, nil, storage.Options{ClusterID: r.Options.ClusterID, Namespace: r.Options.Namespace})
	c, err := p.RealClass(ctx, requested)
	if err != nil {
		return "", err
	}
	return c.Name, nil
}

// twin is the claim's namespace's twin in cluster; an error refuses.
func (r *Reconciler) twin(ctx context.Context, namespace string, cluster ferryv1alpha1.ClusterID) (string, error) {
	var nso ferryv1alpha1.NamespaceOffloading
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)
	if apierrors.IsNotFound(err) {
		return "", refuse(ferryv1alpha1.MoveReasonNamespaceNotOffloaded, "namespace %s is not offloaded: a claim goes to cluster %s only through its twin namespace there", namespace, cluster)
	} else if err != nil {
		return "", fmt.Errorf("read NamespaceOffloading of %s: %w", namespace, err)
	}
	for _, c := range nso.Status.Clusters {
		if c.ClusterID == cluster && c.Phase == ferryv1alpha1.OffloadingReady && c.TwinNamespace != "" {
			return c.TwinNamespace, nil
		}
	}
	return "", refuse(ferryv1alpha1.MoveReasonNamespaceNotOffloaded, "namespace %s is not offloaded to cluster %s (no Ready twin namespace there)", namespace, cluster)
}

// sideOf is where a move's pods run in cluster.
func (r *Reconciler) sideOf(ctx context.Context, mv *ferryv1alpha1.VolumeMove, cluster ferryv1alpha1.ClusterID) (side, error) {
	if cluster == r.Options.ClusterID {
		return side{cluster: cluster, local: true, namespace: r.Options.Namespace, c: &Cluster{Client: r.Client, Kube: r.Kube}}, nil
	}
	c, err := r.Clusters.Provider(ctx, cluster)
	if err != nil {
		return side{}, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	twin, err := r.twin(ctx, mv.Namespace, cluster)
	if err != nil {
		return side{}, err
	}
	return side{cluster: cluster, namespace: twin, c: c}, nil
}

// setStatus writes the status change to mv.
func (r *Reconciler) setStatus(ctx context.Context, mv *ferryv1alpha1.VolumeMove, change func(*ferryv1alpha1.VolumeMoveStatus)) error {
	before := mv.DeepCopy()
	change(&mv.Status)
	mv.Status.ObservedGeneration = mv.Generation
	if err := r.Client.Status().Patch(ctx, mv, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("update status of VolumeMove %s/%s: %w", mv.Namespace, mv.Name, err)
	}
	return nil
}

func setReady(st *ferryv1alpha1.VolumeMoveStatus, mv *ferryv1alpha1.VolumeMove, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ferryv1alpha1.VolumeMoveReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: mv.Generation})
}

func (r *Reconciler) event(mv *ferryv1alpha1.VolumeMove, kind, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(mv, nil, kind, reason, "Move", "%s", msg)
	}
}

func orPending(p ferryv1alpha1.VolumeMovePhase) ferryv1alpha1.VolumeMovePhase {
	if p == "" {
		return ferryv1alpha1.MovePending
	}
	return p
}

// logger is the move's logger.
func logger(ctx context.Context, mv *ferryv1alpha1.VolumeMove) interface {
	Info(string, ...any)
} {
	return log.FromContext(ctx).WithValues("volumeMove", mv.Namespace+"/"+mv.Name, "claim", mv.Spec.ClaimName)
}
