package node

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestVirtualNodeStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	healthy := NewHealth(1, t0.Time)
	unhealthy := healthy
	unhealthy.Observe(errFake, t1.Time)

	st, changed := VirtualNodeStatus(ferryv1alpha1.VirtualNodeStatus{}, 1, "node-a", true, healthy, t0)
	if !changed || st.NodeName != "node-a" || st.ObservedGeneration != 1 {
		t.Fatalf("first status %+v changed=%v", st, changed)
	}
	running := meta.FindStatusCondition(st.Conditions, ferryv1alpha1.VirtualNodeKubeletRunning)
	ready := meta.FindStatusCondition(st.Conditions, ferryv1alpha1.VirtualNodeNodeReady)
	if running == nil || running.Status != metav1.ConditionTrue || ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != ReasonProviderReachable {
		t.Fatalf("conditions %+v", st.Conditions)
	}

	// Nothing new: no change, even later.
	if again, changed := VirtualNodeStatus(st, 1, "node-a", true, healthy, t1); changed {
		t.Errorf("unchanged inputs changed the status: %+v", again)
	}
	// New generation.
	if next, changed := VirtualNodeStatus(st, 2, "node-a", true, healthy, t1); !changed || next.ObservedGeneration != 2 {
		t.Errorf("generation 2: %+v changed=%v", next, changed)
	}
	// Provider down: NodeReady False since t1, VirtualKubeletRunning untouched.
	down, changed := VirtualNodeStatus(st, 1, "node-a", true, unhealthy, t1)
	ready = meta.FindStatusCondition(down.Conditions, ferryv1alpha1.VirtualNodeNodeReady)
	running = meta.FindStatusCondition(down.Conditions, ferryv1alpha1.VirtualNodeKubeletRunning)
	if !changed || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonProviderUnreachable || !ready.LastTransitionTime.Equal(&t1) || !running.LastTransitionTime.Equal(&t0) {
		t.Errorf("provider down: %+v changed=%v", down.Conditions, changed)
	}
	// The input is not modified.
	if r := meta.FindStatusCondition(st.Conditions, ferryv1alpha1.VirtualNodeNodeReady); r.Status != metav1.ConditionTrue {
		t.Error("VirtualNodeStatus modified its input")
	}
	// Stopped: VirtualKubeletRunning False, NodeReady left as it was.
	stopped, changed := VirtualNodeStatus(st, 1, "", false, healthy, t1)
	running = meta.FindStatusCondition(stopped.Conditions, ferryv1alpha1.VirtualNodeKubeletRunning)
	if !changed || running.Status != metav1.ConditionFalse || running.Reason != ReasonStopped || stopped.NodeName != "node-a" {
		t.Errorf("stopped: %+v changed=%v", stopped, changed)
	}
}
