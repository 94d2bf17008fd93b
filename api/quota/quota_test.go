package quota

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func shadow(phase corev1.PodPhase, spec corev1.PodSpec) ferryv1alpha1.ShadowPod {
	return ferryv1alpha1.ShadowPod{Spec: ferryv1alpha1.ShadowPodSpec{Template: ferryv1alpha1.ShadowPodTemplate{Spec: spec}}, Status: ferryv1alpha1.ShadowPodStatus{Phase: phase}}
}

func ctr(name string, requests corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests}}
}

func TestShadowPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := ctr("sidecar", rl("cpu", "100m", "memory", "64Mi"))
	sidecar.RestartPolicy = &always
	tests := []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{ctr("a", rl("cpu", "250m", "memory", "1Gi")), ctr("b", rl("cpu", "0.5", "memory", "512Mi"))}},
			rl("cpu", "750m", "memory", "1536Mi")},
		{"init container larger than the containers counts as its maximum", corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i1", rl("cpu", "2")), ctr("i2", rl("cpu", "1", "memory", "4Gi"))},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "500m", "memory", "1Gi"))}},
			rl("cpu", "2", "memory", "4Gi")},
		{"overhead included", corev1.PodSpec{Containers: []corev1.Container{ctr("a", rl("cpu", "100m"))}, Overhead: rl("cpu", "250m", "memory", "120Mi")},
			rl("cpu", "350m", "memory", "120Mi")},
		{"sidecars run beside the containers and later init steps", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, ctr("migrate", rl("cpu", "1"))},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "200m"))}},
			rl("cpu", "1100m", "memory", "64Mi")},
		{"extended resources", corev1.PodSpec{Containers: []corev1.Container{ctr("a", rl("nvidia.com/gpu", "1")), ctr("b", rl("nvidia.com/gpu", "1"))}},
			rl("nvidia.com/gpu", "2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := shadow(corev1.PodRunning, tt.spec)
			got := ShadowPodRequests(&sp)
			if q := got[corev1.ResourcePods]; q.Cmp(resource.MustParse("1")) != 0 {
				t.Errorf("pods = %s, want 1: a pod takes one pods slot", q.String())
			}
			delete(got, corev1.ResourcePods)
			for name, want := range tt.want {
				if q := got[name]; q.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", name, q.String(), want.String())
				}
			}
			for name, q := range got {
				if _, ok := tt.want[name]; !ok && !q.IsZero() {
					t.Errorf("unexpected %s = %s", name, q.String())
				}
			}
		})
	}
}

func TestUsageAndExceededAreExact(t *testing.T) {
	third := corev1.PodSpec{Containers: []corev1.Container{ctr("a", rl("cpu", "333m", "memory", "1"))}}
	terminating := shadow(corev1.PodRunning, third)
	terminating.DeletionTimestamp = &metav1.Time{}
	pods := []ferryv1alpha1.ShadowPod{
		shadow(corev1.PodRunning, third), shadow(corev1.PodPending, third), shadow("", third),
		shadow(corev1.PodSucceeded, third), shadow(corev1.PodFailed, third), terminating,
	}
	limits := rl("cpu", "1", "memory", "1Gi")
	used := Usage(pods, limits)
	if q := used["cpu"]; q.Cmp(resource.MustParse("999m")) != 0 {
		t.Errorf("cpu used = %s, want 999m (terminal and terminating pods do not count)", q.String())
	}
	if q := used["memory"]; q.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("memory used = %s, want 3 bytes", q.String())
	}
	if _, ok := used["pods"]; ok {
		t.Error("usage of a resource not limited")
	}

	tests := []struct {
		name             string
		limits, used, rq corev1.ResourceList
		want             []string
	}{
		{"exactly at the limit fits", rl("cpu", "1"), rl("cpu", "999m"), rl("cpu", "1m"), nil},
		{"one milli-CPU over", rl("cpu", "1"), rl("cpu", "999m"), rl("cpu", "2m"), []string{"cpu: requested 2m, used 999m, limited to 1"}},
		{"decimal tenths add up exactly", rl("cpu", "300m"), rl("cpu", "0.1"), rl("cpu", "0.2"), nil},
		{"binary and decimal memory compare by value", rl("memory", "1Gi"), rl("memory", "1073741823"), rl("memory", "1"), nil},
		{"one byte over a Gi", rl("memory", "1Gi"), rl("memory", "1Gi"), rl("memory", "1"), []string{"memory: requested 1, used 1Gi, limited to 1Gi"}},
		{"huge quantities do not overflow", rl("memory", "8Ei"), rl("memory", "7Ei"), rl("memory", "2Ei"), []string{"memory: requested 2Ei"}},
		{"unlimited resources pass", rl("cpu", "1"), rl("cpu", "0"), rl("memory", "100Ti", "nvidia.com/gpu", "8"), nil},
		{"every exceeded resource named, in order", rl("memory", "1Gi", "cpu", "1"), rl(), rl("cpu", "2", "memory", "2Gi"),
			[]string{"cpu: requested 2, used 0, limited to 1", "memory: requested 2Gi, used 0, limited to 1Gi"}},
		{"a zero request always fits a full quota", rl("cpu", "1"), rl("cpu", "1"), rl("cpu", "0"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Exceeded(tt.limits, tt.used, tt.rq)
			if len(got) != len(tt.want) {
				t.Fatalf("Exceeded = %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("Exceeded[%d] = %q, want prefix %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	if msg := QuotaDenial("consumer-a", []string{"cpu: x"}); msg != "PeeringQuota of consumer consumer-a exceeded: cpu: x" {
		t.Errorf("QuotaDenial = %q", msg)
	}
}
