package hostpath

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func TestExpandGrowsWithinTheNodesRoom(t *testing.T) {
	p, _ := newProvisioner(t)
	fast := class("fast", map[string]string{ParameterCapacity: "10Gi"}, nil)
	provision := func(name, size string) *corev1.PersistentVolume {
		t.Helper()
		pv, _, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: fast, PVName: name, PVC: claim(name, size), SelectedNodeName: "n-1"})
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	a, _ := provision("pvc-a", "4Gi"), provision("pvc-b", "4Gi")

	got, err := p.Expand(t.Context(), a, fast, resource.MustParse("6Gi"))
	if err != nil || got.Cmp(resource.MustParse("6Gi")) != 0 {
		t.Fatalf("Expand to 6Gi with 6Gi free for it: %s, %v", got.String(), err)
	}
	if got, err := p.Expand(t.Context(), a, fast, resource.MustParse("5Gi")); err != nil || got.Cmp(resource.MustParse("6Gi")) != 0 {
		t.Errorf("Expand below its size: %s, %v; want 6Gi kept (volumes never shrink)", got.String(), err)
	}
	_, err = p.Expand(t.Context(), a, fast, resource.MustParse("7Gi"))
	if !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "node n-1 is out of class fast: 6Gi of its 10Gi capacity free for volume pvc-a, which asks for 7Gi") {
		t.Errorf("Expand beyond the node's room: %v, want ErrInfeasible naming node, class and sizes", err)
	}
	// What a grown volume takes counts against the next claim.
	if _, state, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: fast, PVName: "pvc-c", PVC: claim("c", "1Gi"), SelectedNodeName: "n-1"}); err == nil || state != controller.ProvisioningReschedule {
		t.Errorf("Provision 1Gi on a full node: %v, %v; want it handed back", state, err)
	}

	other := a.DeepCopy()
	other.Name = "elsewhere"
	if _, err := p.Expand(t.Context(), other, fast, resource.MustParse("1Gi")); err == nil || errors.Is(err, ErrInfeasible) {
		t.Errorf("Expand of a volume it did not make: %v, want a refusal", err)
	}
	// A volume made before the provisioner started takes what it says.
	q, _ := newProvisioner(t)
	old := a.DeepCopy()
	old.Spec.HostPath.Path = q.root + "/" + old.Name
	if got, err := q.Expand(t.Context(), old, fast, resource.MustParse("10Gi")); err != nil || got.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("Expand of a volume unknown to this process: %s, %v", got.String(), err)
	}
}

func boundClaim(request, capacity string) *corev1.PersistentVolumeClaim {
	c := claim("data", request)
	c.Spec.VolumeName = "pvc-1"
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
		Conditions: []corev1.PersistentVolumeClaimCondition{{Type: "Other", Status: corev1.ConditionTrue}}}
	return c
}

func TestResizeStatuses(t *testing.T) {
	now := metav1.Now()
	if _, needed := NeedsResize(boundClaim("1Gi", "1Gi")); needed {
		t.Error("a claim at its capacity needs no resize")
	}
	pending := boundClaim("2Gi", "1Gi")
	pending.Status.Phase = corev1.ClaimPending
	if _, needed := NeedsResize(pending); needed {
		t.Error("a claim not bound is not resized")
	}
	c := boundClaim("2Gi", "1Gi")
	size, needed := NeedsResize(c)
	if !needed || size.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Fatalf("NeedsResize: %s %v, want 2Gi", size.String(), needed)
	}

	in := ResizeInProgress(c, size, now)
	if in.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress {
		t.Errorf("in progress: statuses %v", in.Status.AllocatedResourceStatuses)
	}
	if got := in.Status.AllocatedResources[corev1.ResourceStorage]; got.Cmp(size) != 0 {
		t.Errorf("in progress: allocated %s, want 2Gi", got.String())
	}
	if !hasCondition(in, corev1.PersistentVolumeClaimResizing) || !hasCondition(in, "Other") {
		t.Errorf("in progress: conditions %v, want Resizing and the others kept", in.Status.Conditions)
	}
	if c.Status.AllocatedResourceStatuses != nil {
		t.Error("ResizeInProgress changed its argument")
	}

	done := ResizeFinished(in, size)
	if got := done.Status.Capacity[corev1.ResourceStorage]; got.Cmp(size) != 0 {
		t.Errorf("finished: capacity %s, want 2Gi", got.String())
	}
	if done.Status.AllocatedResourceStatuses != nil || hasCondition(done, corev1.PersistentVolumeClaimResizing) || !hasCondition(done, "Other") {
		t.Errorf("finished: statuses %v, conditions %v; want no resize status or condition, the others kept", done.Status.AllocatedResourceStatuses, done.Status.Conditions)
	}
	if _, needed := NeedsResize(done); needed {
		t.Error("a finished resize needs another")
	}

	refused := ResizeInfeasible(in, "node n-1 is out of class fast", now)
	if refused.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInfeasible ||
		!hasCondition(refused, corev1.PersistentVolumeClaimControllerResizeError) || hasCondition(refused, corev1.PersistentVolumeClaimResizing) {
		t.Errorf("infeasible: statuses %v, conditions %v", refused.Status.AllocatedResourceStatuses, refused.Status.Conditions)
	}
	if got := refused.Status.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("infeasible: capacity %s, want 1Gi kept", got.String())
	}
	// The user lowers the request back to the capacity: settled at it.
	refused.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	if size, needed := NeedsResize(refused); !needed || size.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("recovery: %s %v, want settled at 1Gi", size.String(), needed)
	}
}

func hasCondition(c *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, x := range c.Status.Conditions {
		if x.Type == t {
			return true
		}
	}
	return false
}
