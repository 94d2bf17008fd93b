package controllermanager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The manager's cache keeps objects without their managed fields (the
// largest part of a pod no controller reads).
func TestCacheStripsManagedFields(t *testing.T) {
	opts := cacheOptions()
	if opts.DefaultTransform == nil {
		t.Fatal("the cache keeps objects whole: no default transform")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	out, err := opts.DefaultTransform(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.ManagedFields != nil || got.Name != "web" || got.Labels["app"] != "web" {
		t.Errorf("cached pod: managed fields %v, name %q, labels %v; want no managed fields, the rest kept", got.ManagedFields, got.Name, got.Labels)
	}
}
