package offloading

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func runningRemote() *corev1.Pod {
	start := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop-home", Generation: 3},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.9.0.7", HostIPs: []corev1.HostIP{{IP: "10.9.0.7"}},
			PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}, StartTime: &start,
			QOSClass:           corev1.PodQOSBestEffort,
			ObservedGeneration: 3,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: start},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", RestartCount: 0}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "web", Ready: true, RestartCount: 2}},
		},
	}
}

func TestStatusFromRemote(t *testing.T) {
	local := boundPod()
	local.Generation = 1
	local.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
	remote := runningRemote()
	remap := func(ip string) string { return strings.Replace(ip, "10.244.", "10.80.", 1) }

	st := statusFromRemote(local, remote, 1, "provider", remap)

	switch {
	case st.Phase != corev1.PodRunning || !st.StartTime.Equal(remote.Status.StartTime):
		t.Errorf("phase %s start %v: want the remote's", st.Phase, st.StartTime)
	case st.PodIP != "10.80.1.5" || len(st.PodIPs) != 1 || st.PodIPs[0].IP != "10.80.1.5":
		t.Errorf("pod IPs %s %v: want them remapped", st.PodIP, st.PodIPs)
	case st.HostIP != "" || st.HostIPs != nil:
		t.Errorf("host IP %s: the provider node's address means nothing here", st.HostIP)
	case st.QOSClass != corev1.PodQOSBurstable:
		t.Errorf("QoS class %s: it is immutable and must stay the local one", st.QOSClass)
	case st.ObservedGeneration != 1:
		t.Errorf("observedGeneration %d: want the local pod's generation", st.ObservedGeneration)
	case st.ContainerStatuses[0].RestartCount != 3 || st.InitContainerStatuses[0].RestartCount != 1:
		t.Errorf("restart counts %d/%d: want the remote ones plus one recreation", st.ContainerStatuses[0].RestartCount, st.InitContainerStatuses[0].RestartCount)
	}
	if remote.Status.ContainerStatuses[0].RestartCount != 2 || remote.Status.PodIP != "10.244.1.5" {
		t.Error("statusFromRemote changed the remote pod")
	}
	var offloaded *corev1.PodCondition
	for i, c := range st.Conditions {
		if c.Type == corev1.PodReady && c.ObservedGeneration != 1 {
			t.Errorf("Ready condition observedGeneration %d, want 1", c.ObservedGeneration)
		}
		if c.Type == ferryv1alpha1.PodConditionOffloaded {
			offloaded = &st.Conditions[i]
		}
	}
	if offloaded == nil || offloaded.Status != corev1.ConditionTrue || !strings.Contains(offloaded.Message, "cluster provider") {
		t.Fatalf("Offloaded condition %+v: want True naming the cluster", offloaded)
	}

	// Once written, the same remote status computes the same local status:
	// a resync writes nothing.
	local.Status = st
	if again := statusFromRemote(local, remote, 1, "provider", remap); !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("status not stable across resyncs:\n%+v\n%+v", again, st)
	}
}

func TestRefusedStatusFailsThePodWithTheReason(t *testing.T) {
	local := boundPod()
	st := refusedStatus(local, (&Refusal{Field: "spec.hostNetwork", Message: "no"}).Error())
	if st.Phase != corev1.PodFailed || st.Reason != ReasonOffloadingRefused || !strings.Contains(st.Message, "spec.hostNetwork") {
		t.Errorf("status %+v: want Failed with the reason naming the field", st)
	}
}

func TestShadowRejection(t *testing.T) {
	sp := &ferryv1alpha1.ShadowPod{}
	if shadowRejection(sp) != nil {
		t.Error("a new shadow pod is not rejected")
	}
	sp.Status.Conditions = []metav1.Condition{{Type: ferryv1alpha1.ShadowPodCreated, Status: metav1.ConditionFalse, Reason: "Forbidden", Message: "exceeded quota"}}
	if c := shadowRejection(sp); c == nil || c.Reason != "Forbidden" {
		t.Errorf("rejection %v, want Forbidden", c)
	}
}

func TestStatusFromRemoteLeavesOutIPsTheFabricCannotMap(t *testing.T) {
	remote := runningRemote()
	remote.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00::5"}}
	onlyV6 := func(ip string) string {
		if strings.Contains(ip, ":") {
			return "fd80::5"
		}
		return ""
	}
	st := statusFromRemote(boundPod(), remote, 0, "provider", onlyV6)
	if st.PodIP != "fd80::5" || len(st.PodIPs) != 1 || st.PodIPs[0].IP != "fd80::5" {
		t.Errorf("podIP %q podIPs %v, want the mapped IPv6 only, as podIPs[0]", st.PodIP, st.PodIPs)
	}
	none := statusFromRemote(boundPod(), remote, 0, "provider", func(string) string { return "" })
	if none.PodIP != "" || none.PodIPs != nil {
		t.Errorf("nothing mapped: podIP %q podIPs %v, want none", none.PodIP, none.PodIPs)
	}
}

// TestStatusFromRemotePending: while the provider holds the pod without
// running it, the local pod is not Running, the Offloaded condition does
// not say it runs remotely, and it carries the provider's own reason.
func TestStatusFromRemotePending(t *testing.T) {
	unschedulable := "0/3 nodes are available: 3 Insufficient cpu."
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		want   string
		warn   bool
	}{{
		name: "unschedulable",
		status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: unschedulable},
		}},
		want: "Unschedulable: " + unschedulable, warn: true,
	}, {
		name: "image pull",
		status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}},
		}},
		want: "ErrImagePull: container web: not found", warn: true,
	}, {
		name: "creating",
		status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		}},
		want: "ContainerCreating: container web", warn: false,
	}, {
		name:   "just created",
		status: corev1.PodStatus{Phase: corev1.PodPending},
		want:   "", warn: false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			local := boundPod()
			local.Status = corev1.PodStatus{Phase: corev1.PodPending}
			remote := runningRemote()
			remote.Status = tc.status
			st := statusFromRemote(local, remote, 0, "provider", nil)
			if st.Phase != corev1.PodPending {
				t.Errorf("phase %s, want Pending", st.Phase)
			}
			c := offloadedConditionIn(st.Conditions)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonPendingRemotely {
				t.Fatalf("Offloaded condition %+v: want False %s", c, ReasonPendingRemotely)
			}
			if !strings.HasPrefix(c.Message, "pending in cluster provider as shop-home/web-1") || !strings.HasSuffix(c.Message, tc.want) {
				t.Errorf("message %q: want the remote pod and %q", c.Message, tc.want)
			}
			if why, warn := pendingReason(remote); why != tc.want || warn != tc.warn {
				t.Errorf("pendingReason = %q, %v; want %q, %v", why, warn, tc.want, tc.warn)
			}
		})
	}
}

// TestStatusFromRemoteKeepsTheLocalPodScheduled: the consumer's scheduler
// bound the pod to the virtual node, so its PodScheduled stays the local
// one (True) while the provider's scheduler still holds the remote copy;
// the provider's reason shows in the Offloaded condition instead.
func TestStatusFromRemoteKeepsTheLocalPodScheduled(t *testing.T) {
	bound := metav1.NewTime(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))
	local := boundPod()
	local.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: bound},
	}}
	remote := runningRemote()
	remote.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"},
	}}
	st := statusFromRemote(local, remote, 0, "provider", nil)
	var scheduled []corev1.PodCondition
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = append(scheduled, c)
		}
	}
	if len(scheduled) != 1 || scheduled[0].Status != corev1.ConditionTrue || !scheduled[0].LastTransitionTime.Equal(&bound) {
		t.Errorf("PodScheduled conditions %+v: want only the local one, True since the binding", scheduled)
	}
	if c := offloadedConditionIn(st.Conditions); c == nil || !strings.Contains(c.Message, "Unschedulable: 0/3 nodes are available") {
		t.Errorf("Offloaded condition %+v: want the provider's scheduling reason", c)
	}

	// A local pod without the condition (bound directly) gets none from the
	// provider either.
	local.Status.Conditions = nil
	for _, c := range statusFromRemote(local, remote, 0, "provider", nil).Conditions {
		if c.Type == corev1.PodScheduled {
			t.Errorf("PodScheduled %+v copied from the provider", c)
		}
	}
}

// TestResizePendingSaysWhyTheProviderDoesNotResize: a resize the local pod
// asks for and the remote pod does not run with yet is reported as a
// kubelet reports one it cannot do: PodResizePending, Deferred when it may
// pass later (a quota), Infeasible when it cannot (refused as invalid: the
// provider's nodes cannot resize).
func TestResizePendingSaysWhyTheProviderDoesNotResize(t *testing.T) {
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	local := boundPod()
	local.Generation = 2
	local.Spec.Containers = []corev1.Container{{Name: "web", Resources: cpu("2")}}
	remote := runningRemote()
	running := cpu("1")
	remote.Status.ContainerStatuses[0].Resources = &running
	if !resizeRequested(local, remote) {
		t.Error("2 CPUs asked, 1 running: a resize is requested")
	}
	done := cpu("2000m")
	remote.Status.ContainerStatuses[0].Resources = &done
	if resizeRequested(local, remote) {
		t.Error("2 CPUs asked, 2000m running: nothing to resize")
	}
	remote.Status.ContainerStatuses[0].Resources = nil
	if resizeRequested(local, remote) {
		t.Error("a provider that reports no resources shows no resize")
	}

	if got := resizeRefusalReason(metav1.StatusReasonForbidden); got != corev1.PodReasonDeferred {
		t.Errorf("a quota's Forbidden: reason %s, want Deferred", got)
	}
	if got := resizeRefusalReason(metav1.StatusReasonInvalid); got != corev1.PodReasonInfeasible {
		t.Errorf("Invalid: reason %s, want Infeasible", got)
	}
	conds := withResizePending(local, local.Status.Conditions, corev1.PodReasonDeferred, "cluster provider refused the resize: PeeringQuota exceeded")
	var pending *corev1.PodCondition
	for i := range conds {
		if conds[i].Type == corev1.PodResizePending {
			pending = &conds[i]
		}
	}
	if pending == nil || pending.Status != corev1.ConditionTrue || pending.Reason != corev1.PodReasonDeferred ||
		!strings.Contains(pending.Message, "PeeringQuota") || pending.ObservedGeneration != 2 {
		t.Errorf("PodResizePending %+v: want True Deferred, the provider's message, at generation 2", pending)
	}

	sp := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	sp.Status.Conditions = []metav1.Condition{{Type: ferryv1alpha1.ShadowPodResizeRefused, Status: metav1.ConditionTrue, Reason: "Invalid", ObservedGeneration: 2}}
	if shadowResizeRefusal(sp) != nil {
		t.Error("a refusal of an earlier template is not this one's")
	}
	sp.Status.Conditions[0].ObservedGeneration = 3
	if c := shadowResizeRefusal(sp); c == nil || c.Reason != "Invalid" {
		t.Errorf("refusal %+v, want the Invalid one", c)
	}
}

func TestUnreachableStatusTurnsReadinessFalseAndKeepsTheRest(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	local := boundPod()
	local.Status = *runningRemote().Status.DeepCopy()
	local.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: since},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: since},
		{Type: ferryv1alpha1.PodConditionOffloaded, Status: corev1.ConditionTrue, Reason: ReasonRunningRemotely, Message: "running in cluster provider as shop-twin/web-1", LastTransitionTime: since},
	}
	before := local.DeepCopy()

	st := unreachableStatus(local, "provider")

	if !equality.Semantic.DeepEqual(local, before) {
		t.Fatal("unreachableStatus changed the local pod")
	}
	if st.Phase != corev1.PodRunning || st.PodIP != before.Status.PodIP || !equality.Semantic.DeepEqual(st.ContainerStatuses, before.Status.ContainerStatuses) {
		t.Errorf("status %+v: want phase, IPs and container statuses as last known", st)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		c := podConditionIn(st.Conditions, ct)
		switch {
		case c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonProviderUnreachable:
			t.Errorf("%s = %+v: want False with reason %s", ct, c, ReasonProviderUnreachable)
		case !strings.Contains(c.Message, "cluster provider does not answer"):
			t.Errorf("%s message %q: want it to name the provider and say why", ct, c.Message)
		case !c.LastTransitionTime.After(since.Time):
			t.Errorf("%s transition time %v: want the time it turned False", ct, c.LastTransitionTime)
		}
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, ferryv1alpha1.PodConditionOffloaded} {
		if c := podConditionIn(st.Conditions, ct); !equality.Semantic.DeepEqual(c, podConditionIn(before.Status.Conditions, ct)) {
			t.Errorf("%s = %+v: want it kept", ct, c)
		}
	}

	// Applied once, it asks for no second write.
	local.Status = st
	if again := unreachableStatus(local, "provider"); !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("second unreachableStatus differs from the first: %+v", again)
	}
}

func TestUnreachableStatusKeepsTheReasonOfAPodNotReadyAndExplainsAPodNotOffloaded(t *testing.T) {
	local := boundPod()
	notReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [web]"}
	local.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{notReady}}

	st := unreachableStatus(local, "provider")

	if c := podConditionIn(st.Conditions, corev1.PodReady); !equality.Semantic.DeepEqual(*c, notReady) {
		t.Errorf("Ready = %+v: want it kept as %+v (already False)", c, notReady)
	}
	if c := podConditionIn(st.Conditions, ferryv1alpha1.PodConditionOffloaded); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonProviderUnreachable {
		t.Errorf("Offloaded = %+v: want False with reason %s", c, ReasonProviderUnreachable)
	}
	if st.Phase != corev1.PodPending {
		t.Errorf("phase %s: want Pending kept", st.Phase)
	}
}

func podConditionIn(conditions []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}
