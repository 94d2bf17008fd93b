package move

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/storage"
)

// copying provisions the target claim, runs the pods and follows the copy;
// a verified copy moves on to switching.
func (r *Reconciler) copying(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (ctrl.Result, error) {
	if mv.Spec.Revert {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonCancelled, "cancelled by spec.revert before the claim was re-pointed")
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonClaimNotFound, fmt.Sprintf("claim %s was deleted during the copy", mv.Spec.ClaimName))
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
	}
	if string(pvc.UID) != mv.Status.ClaimUID || pvc.Spec.VolumeName != mv.Status.Source.Volume {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonClaimNotMovable, fmt.Sprintf("claim %s was made again or re-bound during the copy", pvc.Name))
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(mv.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pods of %s: %w", mv.Namespace, err)
	}
	if using := PodsUsing(pods.Items, pvc.Name); len(using) > 0 {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonWorkloadRunning, fmt.Sprintf("pods %s started using claim %s during the copy: the copy is abandoned, the claim is unchanged", strings.Join(using, ", "), pvc.Name))
	}
	src, err := r.sideOf(ctx, mv, mv.Status.Source.Cluster)
	if err != nil {
		return r.retryOrFail(ctx, mv, err)
	}
	dst, err := r.sideOf(ctx, mv, mv.Spec.TargetCluster)
	if err != nil {
		return r.retryOrFail(ctx, mv, err)
	}
	target, err := r.ensureTargetClaim(ctx, mv, pvc, dst)
	if err != nil {
		return r.retryOrFail(ctx, mv, err)
	}
	if dst.local && target.Status.Phase != corev1.ClaimBound {
		// The real provisioner provisions on the node picked; one that hands
		// the claim back (drops the node) has no room there.
		if target.Annotations[volumehelpers.AnnSelectedNode] == "" {
			return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonInsufficientCapacity, fmt.Sprintf("cluster %s could not provision claim %s/%s of class %s: %s",
				dst.cluster, target.Namespace, target.Name, ptr.Deref(target.Spec.StorageClassName, ""), r.lastWarning(ctx, dst, target.Name)))
		}
		if time.Since(target.CreationTimestamp.Time) > r.Options.ProvisionTimeout {
			return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonInsufficientCapacity, fmt.Sprintf("claim %s/%s of class %s is not bound after %s: %s",
				target.Namespace, target.Name, ptr.Deref(target.Spec.StorageClassName, ""), r.Options.ProvisionTimeout, r.lastWarning(ctx, dst, target.Name)))
		}
		if mv.Status.Target.Claim == dst.namespace+"/"+target.Name {
			return ctrl.Result{RequeueAfter: r.Options.Poll}, nil
		}
	}
	if mv.Status.Target.Claim != dst.namespace+"/"+target.Name {
		return ctrl.Result{Requeue: true}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
			st.Target.Claim = dst.namespace + "/" + target.Name
		})
	}

	// The serve pod, where the data is.
	_, srcClaim, _ := strings.Cut(mv.Status.Source.Claim, "/")
	serveSpec := r.moverPod(mv, podName(mv, roleServe, 0), roleServe,
		[]string{"serve", "--dir=/data", fmt.Sprintf("--listen=:%d", MoverPort)}, srcClaim, true)
	// Only a fetch with the serve pod's token gets the data.
	serveSpec.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvToken, Value: newToken()}}
	serve, err := r.ensurePod(ctx, src, serveSpec)
	if err != nil {
		return ctrl.Result{}, err
	}
	if serve != nil && podGone(serve) {
		// Serving again is harmless: the fetch of this attempt fails and the
		// next one starts from an empty target.
		if err := r.deletePod(ctx, src, serve.Name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.Options.Poll}, nil
	}
	serveIP, ready := podIPReady(serve)
	if !ready {
		return r.waitPlaced(ctx, mv, serve, "the serve pod in cluster "+string(src.cluster))
	}
	route := RouteOf(r.Options.ClusterID, src.cluster, dst.cluster)
	from := ""
	if route.Relay {
		local, _ := r.sideOf(ctx, mv, r.Options.ClusterID)
		serveHere, err := r.reach(ctx, src.cluster, serveIP, r.Options.ClusterID)
		if err != nil {
			return r.retryOrFail(ctx, mv, err)
		}
		relay, err := r.ensurePod(ctx, local, r.moverPod(mv, podName(mv, roleRelay, 0), roleRelay,
			[]string{"relay", fmt.Sprintf("--listen=:%d", MoverPort), fmt.Sprintf("--to=%s:%d", serveHere, MoverPort)}, "", false))
		if err != nil {
			return ctrl.Result{}, err
		}
		if relay != nil && podGone(relay) {
			return ctrl.Result{RequeueAfter: r.Options.Poll}, r.deletePod(ctx, local, relay.Name)
		}
		relayIP, ready := podIPReady(relay)
		if !ready {
			return r.waitPlaced(ctx, mv, relay, "the relay pod in this cluster")
		}
		if from, err = r.reach(ctx, r.Options.ClusterID, relayIP, dst.cluster); err != nil {
			return r.retryOrFail(ctx, mv, err)
		}
	} else if from, err = r.reach(ctx, src.cluster, serveIP, dst.cluster); err != nil {
		return r.retryOrFail(ctx, mv, err)
	}

	// The fetch pod, where the data goes.
	if mv.Status.Attempts == 0 {
		return ctrl.Result{Requeue: true}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) { st.Attempts = 1 })
	}
	name := podName(mv, roleFetch, mv.Status.Attempts)
	if mv.Status.Attempts > 1 && mv.Status.CopyPod == "" {
		// Never two fetches at once (a new fetch ends the one being served):
		// the last attempt's pod must be gone first.
		if gone, err := r.podGone(ctx, dst, podName(mv, roleFetch, mv.Status.Attempts-1)); err != nil || !gone {
			return ctrl.Result{RequeueAfter: r.Options.Poll}, err
		}
	}
	spec := r.moverPod(mv, name, roleFetch, []string{"fetch", "--dir=/data", fmt.Sprintf("--from=%s:%d", from, MoverPort)}, target.Name, false)
	spec.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvToken, Value: envValue(serve, EnvToken)}}
	if node := target.Annotations[volumehelpers.AnnSelectedNode]; dst.local && node != "" {
		spec.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	fetch, err := r.ensurePod(ctx, dst, spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	seen := ""
	if fetch != nil {
		seen = fetch.Name + "/" + string(fetch.UID)
	}
	switch {
	case fetch == nil && mv.Status.CopyPod == "":
		return ctrl.Result{RequeueAfter: r.Options.Poll}, nil
	case fetch == nil || (mv.Status.CopyPod != "" && mv.Status.CopyPod != seen):
		return r.attemptFailed(ctx, mv, dst, name, fmt.Sprintf("the fetch pod %s was deleted", name))
	case fetch.Status.Phase == corev1.PodFailed || !fetch.DeletionTimestamp.IsZero():
		msg, code, _ := terminated(fetch)
		return r.attemptFailed(ctx, mv, dst, name, fmt.Sprintf("the fetch pod %s failed (exit code %d): %s", name, code, strings.TrimSpace(msg)))
	case fetch.Status.Phase == corev1.PodSucceeded:
		msg, _, _ := terminated(fetch)
		res, err := ParseResult(msg)
		if err != nil {
			return r.attemptFailed(ctx, mv, dst, name, fmt.Sprintf("the fetch pod %s ended without a verified digest: %v", name, err))
		}
		r.event(mv, corev1.EventTypeNormal, ferryv1alpha1.MoveReasonSwitching, fmt.Sprintf("copied and verified %d bytes in %d files (sha256 %s); re-pointing claim %s", res.Bytes, res.Files, res.SHA256, mv.Spec.ClaimName))
		return ctrl.Result{Requeue: true}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
			st.Phase = ferryv1alpha1.MoveSwitching
			st.Digest, st.Files = res.SHA256, res.Files
			st.Progress = ferryv1alpha1.VolumeMoveProgress{BytesCopied: res.Bytes, TotalBytes: res.Bytes, BytesPerSecond: st.Progress.BytesPerSecond}
			setReady(st, mv, metav1.ConditionFalse, ferryv1alpha1.MoveReasonSwitching, fmt.Sprintf("copy verified (sha256 %s); re-pointing the claim", res.SHA256))
		})
	}
	if mv.Status.CopyPod == "" {
		if err := r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) { st.CopyPod = seen }); err != nil {
			return ctrl.Result{}, err
		}
	}
	if fetch.Status.Phase != corev1.PodRunning {
		return r.waitPlaced(ctx, mv, fetch, "the fetch pod in cluster "+string(dst.cluster))
	}
	p, ok := ParseProgress(r.lastLog(ctx, dst, fetch.Name))
	if ok {
		want := ferryv1alpha1.VolumeMoveProgress{BytesCopied: p.Bytes, TotalBytes: p.TotalBytes, BytesPerSecond: p.BytesPerSecond, EtaSeconds: p.EtaSeconds}
		if want != mv.Status.Progress || readyReason(mv) != ferryv1alpha1.MoveReasonCopying {
			if err := r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
				st.Progress = want
				setReady(st, mv, metav1.ConditionFalse, ferryv1alpha1.MoveReasonCopying, fmt.Sprintf("attempt %d: copying from cluster %s to %s", st.Attempts, src.cluster, dst.cluster))
			}); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{RequeueAfter: r.Options.Poll}, nil
}

func readyReason(mv *ferryv1alpha1.VolumeMove) string {
	for _, c := range mv.Status.Conditions {
		if c.Type == ferryv1alpha1.VolumeMoveReady {
			return c.Reason
		}
	}
	return ""
}

// attemptFailed ends one copy attempt: the next one starts from an empty
// target, or, past the bound, the move fails.
func (r *Reconciler) attemptFailed(ctx context.Context, mv *ferryv1alpha1.VolumeMove, dst side, name, why string) (ctrl.Result, error) {
	logger(ctx, mv).Info("copy attempt failed", "attempt", mv.Status.Attempts, "why", why)
	if mv.Status.Attempts >= r.Options.MaxAttempts {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonCopyFailed, fmt.Sprintf("%d copy attempts failed; the last: %s", mv.Status.Attempts, why))
	}
	if err := r.deletePod(ctx, dst, name); err != nil {
		return ctrl.Result{}, err
	}
	r.event(mv, corev1.EventTypeWarning, ferryv1alpha1.MoveReasonCopyFailed, fmt.Sprintf("attempt %d: %s; starting again from an empty target", mv.Status.Attempts, why))
	return ctrl.Result{Requeue: true}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
		st.Attempts++
		st.CopyPod = ""
		st.Progress = ferryv1alpha1.VolumeMoveProgress{}
		setReady(st, mv, metav1.ConditionFalse, ferryv1alpha1.MoveReasonCopying, fmt.Sprintf("attempt %d failed (%s); attempt %d starts from an empty target", st.Attempts-1, why, st.Attempts))
	})
}

// waitPlaced waits for a pod to run, up to the provision timeout: a pod
// not placed by then (no node with room, a target claim not provisioned)
// fails the move.
func (r *Reconciler) waitPlaced(ctx context.Context, mv *ferryv1alpha1.VolumeMove, pod *corev1.Pod, what string) (ctrl.Result, error) {
	since := mv.Status.StartTime
	if pod != nil {
		since = &pod.CreationTimestamp
	}
	if since == nil || time.Since(since.Time) < r.Options.ProvisionTimeout {
		return ctrl.Result{RequeueAfter: r.Options.Poll}, nil
	}
	why := "it did not start"
	reason := ferryv1alpha1.MoveReasonCopyFailed
	if msg, ok := unschedulable(pod); ok {
		why, reason = "it cannot be placed: "+msg, ferryv1alpha1.MoveReasonInsufficientCapacity
	} else if pod != nil {
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				why = w.Reason + ": " + w.Message
			}
		}
		if pod.Status.Phase == corev1.PodPending && pod.Spec.NodeName == "" {
			reason = ferryv1alpha1.MoveReasonInsufficientCapacity
		}
	}
	return ctrl.Result{}, r.fail(ctx, mv, reason, fmt.Sprintf("%s is not running after %s: %s", what, r.Options.ProvisionTimeout, why))
}

// retryOrFail retries a transient error; a refusal (the namespace no
// longer offloaded, a provider unpeered) fails the move.
func (r *Reconciler) retryOrFail(ctx context.Context, mv *ferryv1alpha1.VolumeMove, err error) (ctrl.Result, error) {
	var ref *refusal
	if errors.As(err, &ref) {
		return ctrl.Result{}, r.fail(ctx, mv, ref.reason, ref.msg)
	}
	if errors.Is(err, storage.ErrNotPeered) {
		return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonTargetUnreachable, err.Error())
	}
	return ctrl.Result{}, err
}

// ensureTargetClaim makes the claim the copy goes to: in this cluster a
// claim of the requested real class in the storage namespace, pinned to a
// real node; in a provider a claim of its class in the twin namespace,
// named as the user's (the name offloaded pods mount).
func (r *Reconciler) ensureTargetClaim(ctx context.Context, mv *ferryv1alpha1.VolumeMove, pvc *corev1.PersistentVolumeClaim, dst side) (*corev1.PersistentVolumeClaim, error) {
	name := pvc.Name
	if dst.local {
		name = targetVolumeName(mv)
	}
	got := &corev1.PersistentVolumeClaim{}
	err := dst.c.Client.Get(ctx, types.NamespacedName{Namespace: dst.namespace, Name: name}, got)
	if err == nil {
		if got.Labels[LabelVolumeMove] != mv.Namespace+"."+mv.Name {
			return nil, refuse(ferryv1alpha1.MoveReasonClaimNotMovable, "claim %s/%s already exists in cluster %s (the kept source of an earlier move? confirm or revert that one first)", dst.namespace, name, dst.cluster)
		}
		return got, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read claim %s/%s in cluster %s: %w", dst.namespace, name, dst.cluster, err)
	}
	labels := storage.OriginLabels(r.Options.ClusterID, pvc)
	labels[LabelVolumeMove] = mv.Namespace + "." + mv.Name
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: dst.namespace, Name: name, Labels: labels}}
	if dst.local {
		class, err := r.realClass(ctx, storage.RequestedClass(pvc))
		if err != nil {
			return nil, refuse(ferryv1alpha1.MoveReasonClassNotOffered, "cluster %s: %v", dst.cluster, err)
		}
		node, err := r.realNode(ctx)
		if err != nil {
			return nil, err
		}
		claim.Annotations = map[string]string{volumehelpers.AnnSelectedNode: node}
		claim.Spec = storage.ClaimSpecFor(pvc, class)
	} else {
		class, err := r.providerClass(ctx, dst.cluster, storage.RequestedClass(pvc))
		if err != nil {
			return nil, err
		}
		claim.Spec = storage.ClaimSpecFor(pvc, class)
	}
	if err := dst.c.Client.Create(ctx, claim); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil, refuse(ferryv1alpha1.MoveReasonInsufficientCapacity, "cluster %s refused claim %s/%s: %v", dst.cluster, dst.namespace, name, err)
		}
		return nil, fmt.Errorf("create claim %s/%s in cluster %s: %w", dst.namespace, name, dst.cluster, err)
	}
	return claim, nil
}

// realNode picks the real node of this cluster the copy lands on: the
// first Ready, schedulable one by name.
func (r *Reconciler) realNode(ctx context.Context) (string, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	var names []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if placement.IsVirtualNode(n) || n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				names = append(names, n.Name)
			}
		}
	}
	if len(names) == 0 {
		return "", refuse(ferryv1alpha1.MoveReasonInsufficientCapacity, "this cluster has no Ready schedulable real node to hold the data")
	}
	sort.Strings(names)
	return names[0], nil
}

// targetVolumeName names the volume standing for the copy, and in this
// cluster its real claim too (the real-claim collector keeps a real claim
// whose volume has its name).
func targetVolumeName(mv *ferryv1alpha1.VolumeMove) string { return "pvc-" + string(mv.UID) }

// reach is the address at which cluster to reaches pod ip of cluster from.
func (r *Reconciler) reach(ctx context.Context, from ferryv1alpha1.ClusterID, ip string, to ferryv1alpha1.ClusterID) (string, error) {
	if from == to || r.Options.NetworkDisabled {
		return ip, nil
	}
	provider := from
	if from == r.Options.ClusterID {
		provider = to
	}
	peer := &ferryv1alpha1.NetworkConfig{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: charts.Namespace, Name: string(provider)}, peer); err != nil {
		return "", fmt.Errorf("read NetworkConfig %s/%s: %w", charts.Namespace, provider, err)
	}
	if from == r.Options.ClusterID {
		local := &ferryv1alpha1.NetworkConfig{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: charts.Namespace, Name: string(r.Options.ClusterID)}, local); err != nil {
			return "", fmt.Errorf("read NetworkConfig %s/%s: %w", charts.Namespace, r.Options.ClusterID, err)
		}
		if peer.Status.PodCIDRAtPeer == "" {
			return "", fmt.Errorf("cluster %s has not reported where it sees this cluster's pods yet (NetworkConfig %s status.podCIDRAtPeer)", provider, provider)
		}
		return Translate(ip, local.Spec.PodCIDR, peer.Status.PodCIDRAtPeer)
	}
	if to != r.Options.ClusterID {
		return "", fmt.Errorf("pods of cluster %s do not reach pods of cluster %s directly", from, to)
	}
	if peer.Status.RemappedPodCIDR == "" {
		return "", fmt.Errorf("the pods of cluster %s are not mapped here yet (NetworkConfig %s status.remappedPodCIDR)", provider, provider)
	}
	return Translate(ip, peer.Spec.PodCIDR, peer.Status.RemappedPodCIDR)
}

// fail ends a move that changed nothing of the user's claim: what it
// staged is removed.
func (r *Reconciler) fail(ctx context.Context, mv *ferryv1alpha1.VolumeMove, reason, msg string) error {
	if err := r.cleanup(ctx, mv, true); err != nil {
		return err
	}
	failures.WithLabelValues(reason).Inc()
	r.event(mv, corev1.EventTypeWarning, reason, msg)
	logger(ctx, mv).Info("move failed", "reason", reason, "message", msg)
	return r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
		st.Phase = ferryv1alpha1.MoveFailed
		st.CopyPod = ""
		st.CompletionTime = ptr.To(metav1.Now())
		setReady(st, mv, metav1.ConditionFalse, reason, msg+"; claim "+mv.Spec.ClaimName+" is unchanged and everything staged was removed")
	})
}

// cleanup deletes the move's pods and, with target, the claim it staged
// for the copy (never one a volume of a re-pointed claim stands for).
func (r *Reconciler) cleanup(ctx context.Context, mv *ferryv1alpha1.VolumeMove, target bool) error {
	selector := client.MatchingLabels{LabelVolumeMove: mv.Namespace + "." + mv.Name}
	var errs []error
	for _, cluster := range []ferryv1alpha1.ClusterID{mv.Status.Source.Cluster, mv.Spec.TargetCluster, r.Options.ClusterID} {
		if cluster == "" {
			continue
		}
		s, err := r.sideOf(ctx, mv, cluster)
		var ref *refusal
		if errors.Is(err, storage.ErrNotPeered) || errors.As(err, &ref) {
			continue // the provider removes the twin namespace itself
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		if !s.local {
			if err := s.c.Client.DeleteAllOf(ctx, &ferryv1alpha1.ShadowPod{}, client.InNamespace(s.namespace), selector); err != nil && !apierrors.IsNotFound(err) {
				// The twin role may not allow deletecollection: one by one.
				var sps ferryv1alpha1.ShadowPodList
				if err := s.c.Client.List(ctx, &sps, client.InNamespace(s.namespace), selector); err != nil {
					errs = append(errs, fmt.Errorf("list ShadowPods of the move in cluster %s: %w", cluster, err))
				}
				for i := range sps.Items {
					if err := s.c.Client.Delete(ctx, &sps.Items[i]); client.IgnoreNotFound(err) != nil {
						errs = append(errs, fmt.Errorf("delete ShadowPod %s/%s in cluster %s: %w", s.namespace, sps.Items[i].Name, cluster, err))
					}
				}
			}
		} else {
			var pods corev1.PodList
			if err := s.c.Client.List(ctx, &pods, client.InNamespace(s.namespace), selector); err != nil {
				errs = append(errs, fmt.Errorf("list pods of the move: %w", err))
			}
			for i := range pods.Items {
				if err := s.c.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
					errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", s.namespace, pods.Items[i].Name, err))
				}
			}
		}
		if !target || cluster != mv.Spec.TargetCluster {
			continue
		}
		var claims corev1.PersistentVolumeClaimList
		if err := s.c.Client.List(ctx, &claims, client.InNamespace(s.namespace), selector); err != nil {
			errs = append(errs, fmt.Errorf("list claims of the move in cluster %s: %w", cluster, err))
			continue
		}
		for i := range claims.Items {
			c := &claims.Items[i]
			if err := s.c.Client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete claim %s/%s in cluster %s: %w", c.Namespace, c.Name, cluster, err))
			}
		}
	}
	return errors.Join(errs...)
}

// lastWarning is the last Warning event on the object named name at s
// ("no event says why" when there is none).
func (r *Reconciler) lastWarning(ctx context.Context, s side, name string) string {
	if s.c.Kube == nil {
		return "no event says why"
	}
	evs, err := s.c.Kube.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",type=Warning"})
	if err != nil || len(evs.Items) == 0 {
		return "no event says why"
	}
	last := evs.Items[0]
	for _, e := range evs.Items[1:] {
		if e.LastTimestamp.After(last.LastTimestamp.Time) || e.EventTime.After(last.EventTime.Time) {
			last = e
		}
	}
	return last.Reason + ": " + last.Message
}

// podGone says whether the pod named name, and at a provider its
// ShadowPod, no longer exist at s (deleting it again if needed).
func (r *Reconciler) podGone(ctx context.Context, s side, name string) (bool, error) {
	pod, err := r.getPod(ctx, s, name)
	if err != nil {
		return false, err
	}
	if !s.local {
		var sp ferryv1alpha1.ShadowPod
		if err := s.c.Client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, &sp); err == nil {
			return false, r.deletePod(ctx, s, name)
		} else if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("read ShadowPod %s/%s in cluster %s: %w", s.namespace, name, s.cluster, err)
		}
	}
	if pod != nil {
		return false, r.deletePod(ctx, s, name)
	}
	return true, nil
}
