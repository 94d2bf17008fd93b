package node

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons of the VirtualNode's VirtualKubeletRunning condition.
const (
	ReasonRunning = "Running"
	ReasonStopped = "Stopped"
)

// VirtualNodeStatus is the status a VirtualNode should have: current with the
// Node registered as nodeName (empty: not yet), whether the virtual kubelet
// runs, and the provider's health, computed for vn.Generation. Conditions
// keep their LastTransitionTime while their status stays. changed says
// whether it differs from current.
func VirtualNodeStatus(current ferryv1alpha1.VirtualNodeStatus, generation int64, nodeName string, running bool, h Health, now metav1.Time) (status ferryv1alpha1.VirtualNodeStatus, changed bool) {
	status = *current.DeepCopy()
	if nodeName != "" {
		status.NodeName = nodeName
	}
	status.ObservedGeneration = generation
	runningCond := metav1.Condition{
		Type: ferryv1alpha1.VirtualNodeKubeletRunning, Status: metav1.ConditionTrue, Reason: ReasonRunning,
		Message: fmt.Sprintf("the virtual kubelet serves node %s", status.NodeName), ObservedGeneration: generation, LastTransitionTime: now,
	}
	if !running {
		runningCond.Status, runningCond.Reason, runningCond.Message = metav1.ConditionFalse, ReasonStopped, "the virtual kubelet stopped"
	}
	meta.SetStatusCondition(&status.Conditions, runningCond)
	if running {
		readyCond := metav1.Condition{
			Type: ferryv1alpha1.VirtualNodeNodeReady, Status: metav1.ConditionFalse, Reason: h.Reason,
			Message: h.Message, ObservedGeneration: generation, LastTransitionTime: now,
		}
		if h.Ready {
			readyCond.Status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&status.Conditions, readyCond)
	}
	return status, !apiequality.Semantic.DeepEqual(current, status)
}
