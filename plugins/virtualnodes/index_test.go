package virtualnodes

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func virtualNode(classes string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-eu-1", Labels: map[string]string{
		ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: "eu-1",
	}}}
	if classes != "" {
		n.Annotations = map[string]string{ferryv1alpha1.AnnotationStorageClasses: classes}
	}
	return n
}

// The classes are parsed once per annotation value: the same value gives
// the same parsed slice, a new value (the node's classes changed) is read
// anew, never a stale copy.
func TestStorageClassesParsedOncePerValueAndNeverStale(t *testing.T) {
	n := virtualNode(`[{"name":"","providerClass":"standard"}]`)
	x := NewStatic(n)
	first, err := x.StorageClasses(n)
	if err != nil || len(first) != 1 || first[0].ProviderClass != "standard" {
		t.Fatalf("classes %+v, %v", first, err)
	}
	again, _ := x.StorageClasses(n.DeepCopy())
	if &again[0] != &first[0] {
		t.Error("the same annotation was parsed again")
	}

	changed := virtualNode(`[{"name":"","providerClass":"standard"},{"name":"fast","providerClass":"ssd"}]`)
	got, err := x.StorageClasses(changed)
	want := []ferryv1alpha1.VirtualNodeStorageClass{{Name: "", ProviderClass: "standard"}, {Name: "fast", ProviderClass: "ssd"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("after the change: %+v, %v; want %+v", got, err, want)
	}

	if got, err := x.StorageClasses(virtualNode("")); err != nil || got != nil {
		t.Errorf("annotation removed: %+v, %v; want none", got, err)
	}
	if _, err := x.StorageClasses(virtualNode(`{`)); err == nil || !strings.Contains(err.Error(), ferryv1alpha1.AnnotationStorageClasses) {
		t.Errorf("malformed annotation: %v, want an error naming it", err)
	}
}
