package fencing

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

// Renewer runs on a consumer (leader-elected, like the other controllers):
// for each provider it renews this cluster's Lease in its tenant namespace
// there every T/4. When a provider that self-fences has not seen a renewal
// for T + margin and spec.fencing.outOfService is on, it marks the
// provider's virtual nodes out of service. When the provider answers again
// it first deletes the provider's stale ShadowPods (whose pod here is gone,
// replaced, or no longer on the provider's virtual node), and only then
// renews the Lease (which unfences the provider) and removes the taint.
type Renewer struct {
	// Client reads ForeignClusters and Nodes (the cache) and taints Nodes.
	Client client.Client
	// APIReader reads this cluster's pods past the cache.
	APIReader client.Reader
	// ClusterID of this cluster, the Lease's holder.
	ClusterID ferryv1alpha1.ClusterID
	// Providers hands out the provider clients.
	Providers *peering.ProviderClients
	// Tick is how often the provider list is looked at (1 s when zero).
	Tick time.Duration
	// Recorder emits events on the provider's ForeignCluster; nil records
	// none.
	Recorder events.EventRecorder

	mu    sync.Mutex
	loops map[string]context.CancelFunc
}

// NeedLeaderElection: only the leader renews and taints, so the one that
// decides to fail over is the one that knows when it last renewed.
func (r *Renewer) NeedLeaderElection() bool { return true }

// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Start runs one loop per provider until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	tick := r.Tick
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		r.sync(ctx)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, stop := range r.loops {
				stop()
			}
			r.mu.Unlock()
			return nil
		case <-t.C:
		}
	}
}

func (r *Renewer) sync(ctx context.Context) {
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.Client.List(ctx, &fcs); err != nil {
		log.FromContext(ctx).Error(err, "List ForeignClusters")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loops == nil {
		r.loops = map[string]context.CancelFunc{}
	}
	want := map[string]bool{}
	for _, fc := range fcs.Items {
		if fc.Spec.IsProvider() && fc.DeletionTimestamp.IsZero() {
			want[fc.Name] = true
		}
	}
	for name, stop := range r.loops {
		if !want[name] {
			stop()
			delete(r.loops, name)
		}
	}
	for name := range want {
		if _, ok := r.loops[name]; !ok {
			lctx, stop := context.WithCancel(ctx)
			r.loops[name] = stop
			go r.loop(lctx, name)
		}
	}
}

// loop renews one provider's Lease. Its clock starts at its own start: a
// new leader knows of no renewal before it, so it waits T + margin from
// then, which is later than the provider fences for any renewal it missed.
func (r *Renewer) loop(ctx context.Context, name string) {
	logger := log.FromContext(ctx).WithValues("provider", name)
	lastRenewal := time.Now()
	providerFences := false
	for {
		var fc ferryv1alpha1.ForeignCluster
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &fc); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Read ForeignCluster")
			sleep(ctx, time.Second)
			continue
		}
		f := fc.Spec.Fencing
		T := time.Duration(f.LeaseDuration()) * time.Second
		margin := time.Duration(f.SafetyMargin()) * time.Second
		period := RenewPeriod(T)
		fences, err := r.renewOnce(ctx, &fc, T, period)
		if err == nil {
			lastRenewal, providerFences = time.Now(), fences
		} else if ctx.Err() == nil {
			logger.V(1).Info("Lease not renewed", "err", err.Error(), "since", time.Since(lastRenewal).Round(time.Millisecond))
			if f.OutOfService {
				if fail, _ := ConsumerFailsOver(time.Since(lastRenewal), T, margin, providerFences); fail {
					if n, err := r.setOutOfService(ctx, &fc, true); err != nil {
						logger.Error(err, "Mark the provider's virtual nodes out of service")
					} else if n > 0 {
						logger.Info("Marked the provider's virtual nodes out of service: no Lease renewal for T + margin", "nodes", n,
							"sinceRenewal", time.Since(lastRenewal).Round(time.Millisecond), "leaseDuration", T, "margin", margin)
						msg := fmt.Sprintf("no renewal of this cluster's Lease on the provider for %s (T %s + margin %s): its virtual nodes are out of service (%s), their pods run elsewhere",
							time.Since(lastRenewal).Round(time.Second), T, margin, ferryv1alpha1.TaintOutOfService)
						r.report(ctx, &fc, true, ReasonOutOfService, msg)
					}
				}
			}
		}
		wait := period
		if err != nil {
			wait = min(period, time.Second)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// renewOnce renews the Lease, after the stale ShadowPods are gone when the
// provider's nodes are out of service, and then lifts the taint. It tells
// whether the provider self-fences.
func (r *Renewer) renewOnce(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, T, timeout time.Duration) (bool, error) {
	prov, err := r.Providers.For(ctx, fc)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, max(timeout, time.Second))
	defer cancel()
	leases := prov.Kube.CoordinationV1().Leases(prov.TenantNamespace)
	lease, err := leases.Get(ctx, ferryv1alpha1.ConsumerLeaseName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read Lease %s/%s on the provider: %w", prov.TenantNamespace, ferryv1alpha1.ConsumerLeaseName, err)
	}
	outOfService, err := r.outOfServiceNodes(ctx, fc)
	if err != nil {
		return false, err
	}
	if len(outOfService) > 0 {
		n, err := r.removeStale(ctx, fc, prov)
		if err != nil {
			return false, fmt.Errorf("remove stale ShadowPods before renewing: %w", err)
		}
		log.FromContext(ctx).Info("Provider back: removed its stale ShadowPods before renewing the Lease", "provider", fc.Name, "removed", n.removed,
			"twinNamespaces", n.twins, "shadowPods", n.seen, "alreadyDeleting", n.deleting)
	}
	now := metav1.NewMicroTime(time.Now())
	secs := int32(T / time.Second)
	holder := string(r.ClusterID)
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &secs, &now
	if lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &now
	}
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return false, fmt.Errorf("renew Lease %s/%s on the provider: %w", prov.TenantNamespace, ferryv1alpha1.ConsumerLeaseName, err)
	}
	if len(outOfService) > 0 {
		if _, err := r.setOutOfService(ctx, fc, false); err != nil {
			return false, err
		}
		log.FromContext(ctx).Info("Provider back: Lease renewed and out-of-service taint removed", "provider", fc.Name)
		r.report(ctx, fc, false, ReasonLeaseRenewed, "the provider answers again: its stale ShadowPods were removed, the Lease renewed and the out-of-service taint lifted")
	}
	return updated.Annotations[ferryv1alpha1.AnnotationSelfFencing] == "true", nil
}

// ReasonOutOfService: the consumer marked the provider's virtual nodes out
// of service.
const ReasonOutOfService = "OutOfService"

// report sets the OutOfService condition of the provider's ForeignCluster here
// and emits an event; a failure is logged (the taint is what acts).
func (r *Renewer) report(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, fenced bool, reason, msg string) {
	st := metav1.ConditionFalse
	eventType := corev1.EventTypeNormal
	if fenced {
		st, eventType = metav1.ConditionTrue, corev1.EventTypeWarning
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur ferryv1alpha1.ForeignCluster
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(fc), &cur); err != nil {
			return err
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: ferryv1alpha1.ForeignClusterOutOfService, Status: st, Reason: reason, Message: msg, ObservedGeneration: cur.Generation})
		return r.Client.Status().Update(ctx, &cur)
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "Report the out-of-service state", "provider", fc.Name)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(fc, nil, eventType, reason, "Failover", "%s", msg)
	}
}

// virtualNodes are this cluster's Nodes standing for the provider.
func (r *Renewer) virtualNodes(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{
		ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: string(fc.Spec.ClusterID)}); err != nil {
		return nil, fmt.Errorf("list the virtual nodes of %s: %w", fc.Spec.ClusterID, err)
	}
	return nodes.Items, nil
}

func (r *Renewer) outOfServiceNodes(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) ([]string, error) {
	nodes, err := r.virtualNodes(ctx, fc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if n.Annotations[ferryv1alpha1.AnnotationOutOfServiceBy] != "" && slices.ContainsFunc(n.Spec.Taints, isOutOfService) {
			out = append(out, n.Name)
		}
	}
	return out, nil
}

func isOutOfService(t corev1.Taint) bool {
	return t.Key == ferryv1alpha1.TaintOutOfService && t.Effect == corev1.TaintEffectNoExecute
}

// setOutOfService adds (or removes) the out-of-service taint on the
// provider's virtual nodes, and tells on how many it changed. A taint
// ferry did not set (an admin's) is never removed.
func (r *Renewer) setOutOfService(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, on bool) (int, error) {
	nodes, err := r.virtualNodes(ctx, fc)
	if err != nil {
		return 0, err
	}
	changed := 0
	for i := range nodes {
		n := &nodes[i]
		has := slices.ContainsFunc(n.Spec.Taints, isOutOfService)
		ours := n.Annotations[ferryv1alpha1.AnnotationOutOfServiceBy] != ""
		patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
		switch {
		case on && !has:
			now := metav1.Now()
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ferryv1alpha1.TaintOutOfService, Value: ferryv1alpha1.TaintOutOfServiceValue, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[ferryv1alpha1.AnnotationOutOfServiceBy] = now.UTC().Format(time.RFC3339)
		case !on && has && ours:
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isOutOfService)
			delete(n.Annotations, ferryv1alpha1.AnnotationOutOfServiceBy)
		default:
			continue
		}
		if err := r.Client.Patch(ctx, n, patch); err != nil {
			return changed, fmt.Errorf("set out-of-service=%v on node %s: %w", on, n.Name, err)
		}
		changed++
	}
	return changed, nil
}

// removeStale deletes the provider's ShadowPods of this cluster whose pod
// here is gone, was replaced (another UID), is being deleted, or no longer
// stands on one of the provider's virtual nodes: what failover ran
// elsewhere.
// staleCount is what removeStale saw and did.
type staleCount struct{ twins, seen, deleting, removed int }

func (r *Renewer) removeStale(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, prov *peering.Provider) (staleCount, error) {
	var n staleCount
	nodes, err := r.virtualNodes(ctx, fc)
	if err != nil {
		return n, err
	}
	onProvider := map[string]bool{}
	for _, n := range nodes {
		onProvider[n.Name] = true
	}
	var twins ferryv1alpha1.TwinNamespaceList
	if err := prov.Client.List(ctx, &twins, client.InNamespace(prov.TenantNamespace)); err != nil {
		return n, fmt.Errorf("list TwinNamespaces on the provider: %w", err)
	}
	n.twins = len(twins.Items)
	for _, tw := range twins.Items {
		var sps ferryv1alpha1.ShadowPodList
		if err := prov.Client.List(ctx, &sps, client.InNamespace(tw.Name), client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: string(r.ClusterID)}); err != nil {
			return n, fmt.Errorf("list ShadowPods in %s on the provider: %w", tw.Name, err)
		}
		n.seen += len(sps.Items)
		for i := range sps.Items {
			sp := &sps.Items[i]
			if !sp.DeletionTimestamp.IsZero() {
				n.deleting++
				continue
			}
			stale, err := r.stale(ctx, sp, onProvider)
			if err != nil {
				return n, err
			}
			if !stale {
				continue
			}
			if err := prov.Client.Delete(ctx, sp, client.Preconditions{UID: &sp.UID}); client.IgnoreNotFound(err) != nil {
				return n, fmt.Errorf("delete stale ShadowPod %s/%s on the provider: %w", sp.Namespace, sp.Name, err)
			}
			n.removed++
		}
	}
	return n, nil
}

func (r *Renewer) stale(ctx context.Context, sp *ferryv1alpha1.ShadowPod, onProvider map[string]bool) (bool, error) {
	ns, name := sp.Labels[ferryv1alpha1.LabelOriginNamespace], sp.Labels[ferryv1alpha1.LabelOriginName]
	if ns == "" || name == "" {
		return false, nil
	}
	var pod corev1.Pod
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read pod %s/%s: %w", ns, name, err)
	}
	uid := sp.Labels[ferryv1alpha1.LabelOriginUID]
	return (uid != "" && uid != string(pod.UID)) || !pod.DeletionTimestamp.IsZero() || !onProvider[pod.Spec.NodeName], nil
}
