package offloading

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

func TestTerminalForGood(t *testing.T) {
	tests := []struct {
		phase  corev1.PodPhase
		policy corev1.RestartPolicy
		want   bool
	}{
		{corev1.PodSucceeded, corev1.RestartPolicyNever, true},
		{corev1.PodSucceeded, corev1.RestartPolicyOnFailure, true},
		{corev1.PodSucceeded, corev1.RestartPolicyAlways, false},
		{corev1.PodFailed, corev1.RestartPolicyNever, true},
		{corev1.PodFailed, corev1.RestartPolicyOnFailure, false},
		{corev1.PodFailed, corev1.RestartPolicyAlways, false},
		{corev1.PodRunning, corev1.RestartPolicyNever, false},
		{"", corev1.RestartPolicyNever, false},
	}
	for _, tt := range tests {
		if got := terminalForGood(tt.phase, tt.policy); got != tt.want {
			t.Errorf("terminalForGood(%s, %s) = %t, want %t", tt.phase, tt.policy, got, tt.want)
		}
	}
}

func TestReservedTwinName(t *testing.T) {
	for name, reserved := range map[string]bool{
		"default": true, "kube-system": true, "kube-anything": true, ferryv1alpha1.SystemNamespace: true,
		peering.TenantNamespace("someone"): true, "shop-home": false, "kubernetes": false,
	} {
		if got := reservedTwinName(name) != ""; got != reserved {
			t.Errorf("reservedTwinName(%q) reserved = %t, want %t", name, got, reserved)
		}
	}
}

func TestPodForCarriesTemplateAndOrigin(t *testing.T) {
	sp := &ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop-home", UID: "sp-uid", Labels: map[string]string{
			ferryv1alpha1.LabelOriginCluster: "home", ferryv1alpha1.LabelOriginNamespace: "shop",
			ferryv1alpha1.LabelOriginName: "web-1", ferryv1alpha1.LabelOriginUID: "uid-1", "unrelated": "x",
		}},
		Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "home", Template: ferryv1alpha1.ShadowPodTemplate{
			Metadata: ferryv1alpha1.PodMetadata{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "n"}},
			Spec:     corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		}},
	}
	pod, err := PodFor(sp, ferryscheme.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-1" || pod.Namespace != "shop-home" || pod.Spec.Containers[0].Image != "nginx" || pod.Annotations["note"] != "n" {
		t.Errorf("pod %+v does not follow its template", pod)
	}
	for _, k := range []string{"app", ferryv1alpha1.LabelOriginCluster, ferryv1alpha1.LabelOriginNamespace, ferryv1alpha1.LabelOriginName, ferryv1alpha1.LabelOriginUID} {
		if pod.Labels[k] == "" {
			t.Errorf("label %s missing: %v", k, pod.Labels)
		}
	}
	if pod.Labels["unrelated"] != "" {
		t.Error("a ShadowPod label other than the origin ones reached the pod")
	}
	if !metav1.IsControlledBy(pod, sp) {
		t.Error("the pod is not controlled by its ShadowPod")
	}
	pod.Spec.Containers[0].Image = "changed"
	if sp.Spec.Template.Spec.Containers[0].Image != "nginx" {
		t.Error("PodFor shares the template's memory")
	}
}

// TestSetResourcesFollowsTheTemplate: a resize of the consumer's pod, once
// in the template, changes the real pod's container resources; equal
// quantities written differently are no change.
func TestSetResourcesFollowsTheTemplate(t *testing.T) {
	res := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	have := []corev1.Container{{Name: "app", Resources: res("500m")}, {Name: "side", Resources: res("100m")}}
	if setResources(have, []corev1.Container{{Name: "app", Resources: res("0.5")}, {Name: "side", Resources: res("100m")}}) {
		t.Error("0.5 and 500m CPU are the same request: no resize")
	}
	if !setResources(have, []corev1.Container{{Name: "app", Resources: res("1")}, {Name: "side", Resources: res("100m")}}) {
		t.Fatal("a raised request is a resize")
	}
	if got := have[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("app requests %s CPU, want the template's 1", got.String())
	}
}
