package offload

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"
)

// The steps of a pod's claim, as the harness's watches of claims and volumes
// see them (bench-storage): in the cluster where the pod is created, and, for
// an offloaded pod, in the provider.
const (
	claimSelected       stage = "claim-selected"        // the scheduler picked the first pod's node for the claim (volume.kubernetes.io/selected-node)
	claimHanded         stage = "claim-handed"          // kube-controller-manager handed it to its provisioner (volume.kubernetes.io/storage-provisioner)
	claimVolume         stage = "volume"                // the provisioner created the claim's volume
	claimBound          stage = "claim-bound"           // the claim is Bound
	remoteClaim         stage = "remote-claim"          // the provider claim standing for it exists
	remoteClaimSelected stage = "remote-claim-selected" // the provider's scheduler picked the remote pod's node for it
	remoteClaimHanded   stage = "remote-claim-handed"   // the provider's kube-controller-manager handed it to its provisioner
	remoteVolume        stage = "remote-volume"         // the provider's provisioner created its volume
	remoteClaimBound    stage = "remote-claim-bound"    // the provider claim is Bound
)

// claimPrefix is the prefix of a StatefulSet pod's claim from the template
// named "data" (claimWorkload.statefulSet): claim data-POD.
const claimPrefix = "data-"

// claimStages are the stages of a run with claims, in the order a pod
// reaches them: directly, or offloaded (remote).
func claimStages(remote bool) []stage {
	if !remote {
		return []stage{created, claimSelected, claimHanded, claimVolume, claimBound, bound, running}
	}
	return []stage{created, claimSelected, claimHanded, remoteClaim, claimVolume, claimBound, bound, shadowed, remoteCreated,
		remoteClaimSelected, remoteClaimHanded, remoteVolume, remoteClaimBound, remoteBound, remoteRunning, running}
}

// watchClaims marks, for each claim data-POD of namespace whose pod is named
// with prefix, under the pod's name, the first time a watch sees it (seen,
// unless empty), its selected node, its hand-over to a provisioner and it
// Bound.
func watchClaims(ctx context.Context, wg *sync.WaitGroup, kube kubernetes.Interface, namespace, prefix string, tl *timeline, seen, selected, handed, boundStage stage) cache.InformerSynced {
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "persistentvolumeclaims", namespace, fields.Everything())
	return runInformer(ctx, wg, lw, &corev1.PersistentVolumeClaim{}, func(obj any) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		pod, ok := claimPod(pvc.Name, prefix)
		if !ok {
			return
		}
		now := time.Now()
		if seen != "" {
			tl.mark(pod, seen, now)
		}
		if pvc.Annotations[volumehelpers.AnnSelectedNode] != "" {
			tl.mark(pod, selected, now)
		}
		if pvc.Annotations[volumehelpers.AnnStorageProvisioner] != "" {
			tl.mark(pod, handed, now)
		}
		if pvc.Status.Phase == corev1.ClaimBound {
			tl.mark(pod, boundStage, now)
		}
	})
}

// watchVolumes marks, under the pod's name, the first time a watch sees a
// volume made for a claim data-POD of namespace whose pod is named with
// prefix.
func watchVolumes(ctx context.Context, wg *sync.WaitGroup, kube kubernetes.Interface, namespace, prefix string, tl *timeline, s stage) cache.InformerSynced {
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "persistentvolumes", "", fields.Everything())
	return runInformer(ctx, wg, lw, &corev1.PersistentVolume{}, func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != namespace {
			return
		}
		if pod, ok := claimPod(pv.Spec.ClaimRef.Name, prefix); ok {
			tl.mark(pod, s, time.Now())
		}
	})
}

// claimPod is the pod of claim data-POD when POD starts with prefix.
func claimPod(claim, prefix string) (string, bool) {
	pod, ok := strings.CutPrefix(claim, claimPrefix)
	return pod, ok && strings.HasPrefix(pod, prefix)
}

// shares says, for a run with claims, what part of the mean time from
// created to running each step between two consecutive stages took, over
// the pods that reached every stage; "" for other runs.
func (res *runResult) shares() string {
	if !slices.Contains(res.stages, claimSelected) {
		return ""
	}
	steps := make([][2]stage, 0, len(res.stages)-1)
	for i := 1; i < len(res.stages); i++ {
		steps = append(steps, [2]stage{res.stages[i-1], res.stages[i]})
	}
	means, n := res.timeline.meanSteps(steps)
	if n == 0 {
		return ""
	}
	var total time.Duration
	for _, m := range means {
		total += m
	}
	parts := make([]string, len(steps))
	for i, step := range steps {
		parts[i] = fmt.Sprintf("%s %.0f%% (%s)", step[1], 100*means[i].Seconds()/total.Seconds(), ms(means[i]))
	}
	return fmt.Sprintf("%s total over %d pods; %s", ms(total), n, strings.Join(parts, ", "))
}

// meanSteps is, over the pods that reached every stage of steps, the mean
// time of each step, and the number of those pods.
func (tl *timeline) meanSteps(steps [][2]stage) ([]time.Duration, int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	sums := make([]time.Duration, len(steps))
	n := 0
pods:
	for _, stages := range tl.at {
		for _, step := range steps {
			if _, ok := stages[step[0]]; !ok {
				continue pods
			}
			if _, ok := stages[step[1]]; !ok {
				continue pods
			}
		}
		for i, step := range steps {
			sums[i] += stages[step[1]].Sub(stages[step[0]])
		}
		n++
	}
	if n > 0 {
		for i := range sums {
			sums[i] /= time.Duration(n)
		}
	}
	return sums, n
}
