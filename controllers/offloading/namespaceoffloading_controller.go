package offloading

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

// NamespaceOffloadingReconciler extends, on a consumer, each namespace with
// a NamespaceOffloading to the providers its clusterSelector picks: it asks
// each for a twin namespace (a TwinNamespace in this consumer's tenant
// namespace there), reports the providers' answers in the status, and marks
// the namespace ferry.io/offloading-enabled unless every selected provider
// refused its twin. A provider that is no longer
// selected, and every provider when the NamespaceOffloading is deleted, is
// drained first (the namespace's pods on its virtual node deleted and gone)
// and only then loses the twin namespace.
type NamespaceOffloadingReconciler struct {
	client.Client
	// ClusterID of this (the consumer) cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Providers hands out the clients for each peered provider.
	Providers *peering.ProviderClients
	// PollInterval is how soon a cluster that is Pending, Terminating or
	// unreachable is looked at again (3s when zero).
	PollInterval time.Duration
	// ResyncPeriod is how often a settled offloading re-reads its providers'
	// answers (5m when zero).
	ResyncPeriod time.Duration
	// ProviderTimeout bounds each request to a provider, so an unreachable
	// one does not hold up the others (5s when zero).
	ProviderTimeout time.Duration
}

// Condition reasons of a NamespaceOffloading (Ready, ClustersSelected) and
// of its clusters (Ready). A cluster's Ready condition otherwise carries the
// provider's own reason (e.g. NamespaceConflict, ReservedName).
const (
	// ReasonForbiddenNamespace: the namespace is one ferry never offloads.
	ReasonForbiddenNamespace = "ForbiddenNamespace"
	// ReasonInvalidClusterSelector: spec.clusterSelector does not parse;
	// the message names the field.
	ReasonInvalidClusterSelector = "InvalidClusterSelector"
	// ReasonNoClusterSelected: no peered provider's virtual node matches.
	ReasonNoClusterSelected = "NoClusterSelected"
	// ReasonClustersSelected: the message lists the selected providers.
	ReasonClustersSelected = "ClustersSelected"
	// ReasonNamespaceMappingChanged: twins exist under another name than
	// spec.namespaceMappingStrategy now gives; they are kept as they are.
	ReasonNamespaceMappingChanged = "NamespaceMappingChanged"
	// ReasonClustersNotReady: some selected cluster's twin is not Ready yet.
	ReasonClustersNotReady = "ClustersNotReady"
	// ReasonUnoffloading: the NamespaceOffloading is being deleted.
	ReasonUnoffloading = "Unoffloading"
	// ReasonReady: every selected cluster's twin is Ready.
	ReasonReady = "Ready"
	// ReasonWaitingForProvider: the TwinNamespace is asked for, the provider
	// has not answered yet.
	ReasonWaitingForProvider = "WaitingForProvider"
	// ReasonProviderUnreachable: the provider could not be asked; retried.
	ReasonProviderUnreachable = "ProviderUnreachable"
	// ReasonNamespaceConflict: the twin namespace's name is taken (the
	// provider's reason when it has the namespace already; this cluster's
	// when another of its namespaces asked for the same twin).
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonDraining: the namespace's pods on the provider's virtual node are
	// being deleted.
	ReasonDraining = "Draining"
	// ReasonDeleting: the provider is deleting the twin namespace.
	ReasonDeleting = "Deleting"
	// ReasonVolumesHeld: claims of the namespace keep their data in the
	// provider's twin namespace; it is not deleted until they are.
	ReasonVolumesHeld = "VolumesHeld"
)

// +kubebuilder:rbac:groups=ferry.io,resources=namespaceoffloadings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=namespaceoffloadings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=namespaceoffloadings/finalizers,verbs=update
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete

// Reconcile brings one namespace's offloading in line with its spec.
func (r *NamespaceOffloadingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var nso ferryv1alpha1.NamespaceOffloading
	if err := r.Get(ctx, req.NamespacedName, &nso); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := nso.Status.DeepCopy()
	status.ObservedGeneration = nso.Generation

	if err := ValidateNamespace(nso.Namespace); err != nil {
		// Nothing was ever made for it: no finalizer, no label, no twin.
		meta.RemoveStatusCondition(&status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected)
		setCondition(status, nso.Generation, ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonForbiddenNamespace, err.Error())
		return ctrl.Result{}, r.writeStatus(ctx, &nso, status)
	}
	if !nso.DeletionTimestamp.IsZero() {
		return r.unoffload(ctx, &nso, status)
	}

	sel, err := placement.NewClusterSelector(nso.Spec.ClusterSelector)
	if err != nil {
		// Bad input freezes the offloading: no twin is added or drained,
		// and new pods stay local until the selector is fixed.
		meta.RemoveStatusCondition(&status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected)
		setCondition(status, nso.Generation, ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonInvalidClusterSelector, err.Error())
		if err := r.setNamespaceLabel(ctx, nso.Namespace, false); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.writeStatus(ctx, &nso, status)
	}
	if controllerutil.AddFinalizer(&nso, ferryv1alpha1.NamespaceOffloadingFinalizer) {
		if err := r.Update(ctx, &nso); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	nodes, err := r.virtualNodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	selected := selectedClusters(nodes, sel, r.ClusterID)
	want := TwinNamespaceName(&nso.Spec, nso.Namespace, r.ClusterID)

	clusters := map[ferryv1alpha1.ClusterID]ferryv1alpha1.ClusterOffloadingStatus{}
	for _, c := range status.Clusters {
		clusters[c.ClusterID] = c
	}
	for _, id := range selected {
		clusters[id] = r.ensureTwin(ctx, &nso, clusters[id], id, want)
	}
	for id, c := range clusters {
		if slices.Contains(selected, id) {
			continue
		}
		c, done, err := r.drain(ctx, &nso, c, id)
		if err != nil {
			return ctrl.Result{}, err
		}
		if done {
			delete(clusters, id)
		} else {
			clusters[id] = c
		}
	}
	status.Clusters = sortedClusters(clusters)
	setOffloadingConditions(status, &nso.Spec, selected, want, nso.Generation)
	// The label follows the providers' answers: a namespace every selected
	// provider refused (a twin name taken there, reserved...) is left as it
	// was, its new pods placed on this cluster's nodes, not sent to virtual
	// nodes where they could never run; the label comes back once a
	// provider gives the twin (the refusal is looked at again).
	if err := r.setNamespaceLabel(ctx, nso.Namespace, !everySelectedFailed(status.Clusters, selected)); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, &nso, status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.nextLook(status)}, nil
}

// unoffload stops new pods from being offloaded (the label goes first, so a
// Deployment's replacements of drained pods stay local), drains every
// provider that may hold a twin, and lets the NamespaceOffloading go once
// all twins are gone.
func (r *NamespaceOffloadingReconciler) unoffload(ctx context.Context, nso *ferryv1alpha1.NamespaceOffloading, status *ferryv1alpha1.NamespaceOffloadingStatus) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nso, ferryv1alpha1.NamespaceOffloadingFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.setNamespaceLabel(ctx, nso.Namespace, false); err != nil {
		return ctrl.Result{}, err
	}
	clusters := map[ferryv1alpha1.ClusterID]ferryv1alpha1.ClusterOffloadingStatus{}
	for _, c := range status.Clusters {
		clusters[c.ClusterID] = c
	}
	// A twin may exist that the status missed (made, then the status write
	// failed): every peered provider is asked, not only the recorded ones.
	nodes, err := r.virtualNodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, id := range selectedClusters(nodes, placement.AllClusters(), r.ClusterID) {
		if _, ok := clusters[id]; !ok {
			clusters[id] = ferryv1alpha1.ClusterOffloadingStatus{ClusterID: id}
		}
	}
	remaining := map[ferryv1alpha1.ClusterID]ferryv1alpha1.ClusterOffloadingStatus{}
	for id, c := range clusters {
		c, done, err := r.drain(ctx, nso, c, id)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			remaining[id] = c
		}
	}
	status.Clusters = sortedClusters(remaining)
	if len(remaining) > 0 {
		meta.RemoveStatusCondition(&status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected)
		setCondition(status, nso.Generation, ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonUnoffloading,
			fmt.Sprintf("draining and removing the twin namespaces in %s", clusterList(status.Clusters)))
		if err := r.writeStatus(ctx, nso, status); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.pollInterval()}, nil
	}
	log.FromContext(ctx).Info("Unoffloaded namespace", "namespace", nso.Namespace)
	controllerutil.RemoveFinalizer(nso, ferryv1alpha1.NamespaceOffloadingFinalizer)
	if err := r.Update(ctx, nso); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// ensureTwin asks one selected provider for the twin namespace and returns
// its answer as the cluster's status. A twin this namespace already has there
// is kept even under another name (the mapping strategy changed): a second
// one is never made.
func (r *NamespaceOffloadingReconciler) ensureTwin(ctx context.Context, nso *ferryv1alpha1.NamespaceOffloading, cur ferryv1alpha1.ClusterOffloadingStatus, id ferryv1alpha1.ClusterID, want string) ferryv1alpha1.ClusterOffloadingStatus {
	st := *cur.DeepCopy()
	st.ClusterID = id
	if st.Phase == "" || st.Phase == ferryv1alpha1.OffloadingTerminating {
		// Terminating: selected again while draining; the twin (if still
		// there) is taken back as is.
		st.Phase = ferryv1alpha1.OffloadingPending
	}
	unreachable := func(err error) ferryv1alpha1.ClusterOffloadingStatus {
		setClusterCondition(&st, nso.Generation, metav1.ConditionUnknown, ReasonProviderUnreachable, err.Error())
		return st
	}
	prov, err := r.Providers.ForCluster(ctx, id)
	if err != nil {
		return unreachable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.providerTimeout())
	defer cancel()
	twins, err := r.ownTwins(ctx, prov, nso.Namespace)
	if err != nil {
		return unreachable(fmt.Errorf("list TwinNamespaces in %s on %s: %w", prov.TenantNamespace, id, err))
	}
	var tw *ferryv1alpha1.TwinNamespace
	for i := range twins {
		if tw == nil || twins[i].Name == want {
			tw = &twins[i]
		}
	}
	if tw == nil {
		tw = &ferryv1alpha1.TwinNamespace{
			ObjectMeta: metav1.ObjectMeta{Name: want, Namespace: prov.TenantNamespace, Labels: r.originLabels(nso.Namespace)},
			Spec:       ferryv1alpha1.TwinNamespaceSpec{ConsumerClusterID: r.ClusterID, ConsumerNamespace: nso.Namespace},
		}
		st.TwinNamespace = want
		err := prov.Client.Create(ctx, tw)
		if apierrors.IsAlreadyExists(err) {
			// Asked for by another namespace of this cluster (two
			// SelectedNames alike): never taken over.
			var other ferryv1alpha1.TwinNamespace
			msg := fmt.Sprintf("twin namespace %s in cluster %s is already asked for by another namespace", want, id)
			if err := prov.Client.Get(ctx, client.ObjectKeyFromObject(tw), &other); err == nil && other.Spec.ConsumerNamespace != "" {
				msg = fmt.Sprintf("twin namespace %s in cluster %s is already asked for by namespace %s", want, id, other.Spec.ConsumerNamespace)
			}
			st.Phase = ferryv1alpha1.OffloadingFailed
			setClusterCondition(&st, nso.Generation, metav1.ConditionFalse, ReasonNamespaceConflict, msg)
			return st
		}
		if err != nil {
			return unreachable(fmt.Errorf("create TwinNamespace %s/%s on %s: %w", tw.Namespace, tw.Name, id, err))
		}
		log.FromContext(ctx).Info("Asked provider for a twin namespace", "provider", id, "twinNamespace", want)
	}
	st.TwinNamespace = tw.Name
	st.Phase = tw.Status.Phase
	if st.Phase == "" {
		st.Phase = ferryv1alpha1.OffloadingPending
	}
	if c := meta.FindStatusCondition(tw.Status.Conditions, ferryv1alpha1.TwinNamespaceReady); c != nil {
		setClusterCondition(&st, nso.Generation, c.Status, c.Reason, c.Message)
	} else {
		setClusterCondition(&st, nso.Generation, metav1.ConditionUnknown, ReasonWaitingForProvider,
			fmt.Sprintf("asked cluster %s for twin namespace %s; no answer yet", id, tw.Name))
	}
	return st
}

// drain takes the namespace out of one provider: its pods on the provider's
// virtual node are deleted (the virtual kubelet removes the remote pods,
// then the local ones) and, once none is left, the twin namespace is
// deleted. done says the provider holds nothing of the namespace any more;
// a provider this cluster no longer peers with is done at once (it removes
// the consumer's tenant, twins included, itself).
func (r *NamespaceOffloadingReconciler) drain(ctx context.Context, nso *ferryv1alpha1.NamespaceOffloading, cur ferryv1alpha1.ClusterOffloadingStatus, id ferryv1alpha1.ClusterID) (_ ferryv1alpha1.ClusterOffloadingStatus, done bool, _ error) {
	logger := log.FromContext(ctx).WithValues("provider", id)
	st := *cur.DeepCopy()
	st.ClusterID = id
	prov, err := r.Providers.ForCluster(ctx, id)
	if errors.Is(err, peering.ErrNotPeered) {
		logger.Info("Provider is no longer peered; its tenant cleanup removes the twin namespace", "twinNamespace", st.TwinNamespace)
		return st, true, nil
	}
	if err != nil {
		setClusterCondition(&st, nso.Generation, metav1.ConditionUnknown, ReasonProviderUnreachable, err.Error())
		return st, false, nil
	}
	st.Phase = ferryv1alpha1.OffloadingTerminating

	nodes, err := peering.VirtualNodesOf(ctx, r.Client, id)
	if err != nil {
		return st, false, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(nso.Namespace)); err != nil {
		return st, false, fmt.Errorf("list pods of %s: %w", nso.Namespace, err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !nodes[p.Spec.NodeName] {
			continue
		}
		left++
		if p.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return st, false, fmt.Errorf("drain pod %s/%s from %s: %w", p.Namespace, p.Name, p.Spec.NodeName, err)
			}
			logger.Info("Draining offloaded pod", "pod", client.ObjectKeyFromObject(p))
		}
	}
	if left > 0 {
		setClusterCondition(&st, nso.Generation, metav1.ConditionFalse, ReasonDraining,
			fmt.Sprintf("waiting for %d pod(s) on the virtual nodes of %s to go before removing the twin namespace", left, id))
		return st, false, nil
	}

	held, err := r.claimsHeldBy(ctx, nso.Namespace, id)
	if err != nil {
		return st, false, err
	}
	if len(held) > 0 {
		setClusterCondition(&st, nso.Generation, metav1.ConditionFalse, ReasonVolumesHeld,
			fmt.Sprintf("%s keep data in cluster %s: the twin namespace is kept until they are deleted (ferry never deletes data by unoffloading)", strings.Join(held, ", "), id))
		return st, false, nil
	}

	pctx, cancel := context.WithTimeout(ctx, r.providerTimeout())
	defer cancel()
	twins, err := r.ownTwins(pctx, prov, nso.Namespace)
	if err != nil {
		setClusterCondition(&st, nso.Generation, metav1.ConditionUnknown, ReasonProviderUnreachable,
			fmt.Sprintf("list TwinNamespaces in %s on %s: %v", prov.TenantNamespace, id, err))
		return st, false, nil
	}
	if len(twins) == 0 {
		if st.TwinNamespace != "" {
			logger.Info("Twin namespace removed", "twinNamespace", st.TwinNamespace)
		}
		return st, true, nil
	}
	for i := range twins {
		tw := &twins[i]
		if !tw.DeletionTimestamp.IsZero() {
			continue
		}
		if err := prov.Client.Delete(pctx, tw); client.IgnoreNotFound(err) != nil {
			setClusterCondition(&st, nso.Generation, metav1.ConditionUnknown, ReasonProviderUnreachable,
				fmt.Sprintf("delete TwinNamespace %s/%s on %s: %v", tw.Namespace, tw.Name, id, err))
			return st, false, nil
		}
		logger.Info("Asked provider to remove the twin namespace", "twinNamespace", tw.Name)
	}
	st.TwinNamespace = twins[0].Name
	setClusterCondition(&st, nso.Generation, metav1.ConditionFalse, ReasonDeleting,
		fmt.Sprintf("waiting for cluster %s to delete twin namespace %s", id, st.TwinNamespace))
	return st, false, nil
}

// claimsHeldBy names the claims of namespace whose volumes live in cluster
// id (the storage fabric's volumes labelled with the provider), and the
// released volumes of claims already deleted.
func (r *NamespaceOffloadingReconciler) claimsHeldBy(ctx context.Context, namespace string, id ferryv1alpha1.ClusterID) ([]string, error) {
	var pvs corev1.PersistentVolumeList
	if err := r.List(ctx, &pvs, client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(id)}); err != nil {
		return nil, fmt.Errorf("list volumes in cluster %s: %w", id, err)
	}
	var held []string
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		cr := pv.Spec.ClaimRef
		if cr == nil || cr.Namespace != namespace {
			continue
		}
		if pv.Status.Phase == corev1.VolumeReleased {
			// Its claim is gone; the volume waits for its provider claim's
			// deletion, or is kept (reclaim policy Retain) until deleted.
			held = append(held, fmt.Sprintf("volume %s (released, reclaim policy %s)", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy))
			continue
		}
		held = append(held, "claim "+cr.Name)
	}
	slices.Sort(held)
	return held, nil
}

// ownTwins lists the TwinNamespaces this cluster asked a provider for on
// behalf of namespace: by their origin labels, checked against their spec.
func (r *NamespaceOffloadingReconciler) ownTwins(ctx context.Context, prov *peering.Provider, namespace string) ([]ferryv1alpha1.TwinNamespace, error) {
	var list ferryv1alpha1.TwinNamespaceList
	if err := prov.Client.List(ctx, &list, client.InNamespace(prov.TenantNamespace), client.MatchingLabels(r.originLabels(namespace))); err != nil {
		return nil, err
	}
	out := list.Items[:0]
	for _, tw := range list.Items {
		if tw.Spec.ConsumerClusterID == r.ClusterID && tw.Spec.ConsumerNamespace == namespace {
			out = append(out, tw)
		}
	}
	return out, nil
}

func (r *NamespaceOffloadingReconciler) originLabels(namespace string) map[string]string {
	return map[string]string{ferryv1alpha1.LabelOriginCluster: string(r.ClusterID), ferryv1alpha1.LabelOriginNamespace: namespace}
}

// virtualNodes lists this cluster's virtual nodes from the cache.
func (r *NamespaceOffloadingReconciler) virtualNodes(ctx context.Context) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingLabels{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}); err != nil {
		return nil, fmt.Errorf("list virtual nodes: %w", err)
	}
	return nodes.Items, nil
}

// setNamespaceLabel puts ferry.io/offloading-enabled=true on the namespace,
// or takes it off; ferry's admission webhooks act only where it is.
func (r *NamespaceOffloadingReconciler) setNamespaceLabel(ctx context.Context, name string, enabled bool) error {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	_, has := ns.Labels[ferryv1alpha1.LabelOffloadingEnabled]
	if enabled == has && (!enabled || ns.Labels[ferryv1alpha1.LabelOffloadingEnabled] == "true") {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if enabled {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[ferryv1alpha1.LabelOffloadingEnabled] = "true"
	} else {
		delete(ns.Labels, ferryv1alpha1.LabelOffloadingEnabled)
	}
	if err := r.Patch(ctx, &ns, patch); err != nil {
		return fmt.Errorf("label namespace %s %s=%t: %w", name, ferryv1alpha1.LabelOffloadingEnabled, enabled, err)
	}
	log.FromContext(ctx).Info("Labelled namespace", "namespace", name, ferryv1alpha1.LabelOffloadingEnabled, enabled)
	return nil
}

// writeStatus writes status when it differs from the stored one.
func (r *NamespaceOffloadingReconciler) writeStatus(ctx context.Context, nso *ferryv1alpha1.NamespaceOffloading, status *ferryv1alpha1.NamespaceOffloadingStatus) error {
	if equality.Semantic.DeepEqual(&nso.Status, status) {
		return nil
	}
	nso.Status = *status
	if err := r.Status().Update(ctx, nso); err != nil {
		return fmt.Errorf("update status of %s/%s: %w", nso.Namespace, nso.Name, err)
	}
	return nil
}

// nextLook is when to look again: soon while a cluster is on its way
// (Pending, Terminating, unreachable), and very soon just after asking, as
// providers answer in well under a second; later when one failed (someone
// may resolve the conflict); at the resync period when all is settled.
func (r *NamespaceOffloadingReconciler) nextLook(status *ferryv1alpha1.NamespaceOffloadingStatus) time.Duration {
	next := r.resyncPeriod()
	for _, c := range status.Clusters {
		ready := meta.FindStatusCondition(c.Conditions, ferryv1alpha1.ConditionReady)
		switch {
		case ready != nil && ready.Reason == ReasonWaitingForProvider && time.Since(ready.LastTransitionTime.Time) < 5*time.Second:
			next = min(next, quickLook)
		case c.Phase == ferryv1alpha1.OffloadingPending || c.Phase == ferryv1alpha1.OffloadingTerminating ||
			ready == nil || ready.Status == metav1.ConditionUnknown:
			next = min(next, r.pollInterval())
		case c.Phase == ferryv1alpha1.OffloadingFailed:
			next = min(next, 10*r.pollInterval())
		}
	}
	return next
}

// quickLook is the first look after asking a provider for a twin namespace.
const quickLook = 500 * time.Millisecond

func (r *NamespaceOffloadingReconciler) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 3 * time.Second
}

func (r *NamespaceOffloadingReconciler) resyncPeriod() time.Duration {
	if r.ResyncPeriod > 0 {
		return r.ResyncPeriod
	}
	return 5 * time.Minute
}

func (r *NamespaceOffloadingReconciler) providerTimeout() time.Duration {
	if r.ProviderTimeout > 0 {
		return r.ProviderTimeout
	}
	return 5 * time.Second
}

// SetupWithManager registers the reconciler. Besides NamespaceOffloadings
// (spec changes only, not its own status writes) it follows virtual nodes
// appearing, going or changing labels (the selection changes), and the
// deletion of pods bound to a node in a namespace being drained. Nodes and
// Pods come from the informers the manager already runs for the grant
// controller, so following them costs no second cache.
func (r *NamespaceOffloadingReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("namespaceoffloading").
		For(&ferryv1alpha1.NamespaceOffloading{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.everyOffloading), builder.WithPredicates(virtualNodeSelectionChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.drainingOffloading), builder.WithPredicates(boundPodDeleted())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// everyOffloading maps a virtual node change to every NamespaceOffloading.
func (r *NamespaceOffloadingReconciler) everyOffloading(ctx context.Context, _ client.Object) []reconcile.Request {
	var list ferryv1alpha1.NamespaceOffloadingList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "List NamespaceOffloadings after a virtual node change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, nso := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nso)})
	}
	return out
}

// drainingOffloading maps a deleted pod to its namespace's NamespaceOffloading
// when that is draining a cluster, the only time a pod's going matters.
func (r *NamespaceOffloadingReconciler) drainingOffloading(ctx context.Context, obj client.Object) []reconcile.Request {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: ferryv1alpha1.NamespaceOffloadingName}
	var nso ferryv1alpha1.NamespaceOffloading
	if err := r.Get(ctx, key, &nso); err != nil {
		return nil
	}
	draining := !nso.DeletionTimestamp.IsZero() || slices.ContainsFunc(nso.Status.Clusters, func(c ferryv1alpha1.ClusterOffloadingStatus) bool {
		return c.Phase == ferryv1alpha1.OffloadingTerminating
	})
	if !draining {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// virtualNodeSelectionChanged passes virtual nodes that appear, go or
// change labels; their status heartbeats do not pass.
func virtualNodeSelectionChanged() predicate.Predicate {
	virtual := func(o client.Object) bool {
		return o.GetLabels()[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return virtual(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return virtual(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return (virtual(e.ObjectOld) || virtual(e.ObjectNew)) &&
				(!equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
					e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero())
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// boundPodDeleted passes the deletion of pods that were bound to a node.
func boundPodDeleted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			p, ok := e.Object.(*corev1.Pod)
			return ok && p.Spec.NodeName != ""
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
