package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestResolveStorageClass(t *testing.T) {
	classes := []ferryv1alpha1.VirtualNodeStorageClass{
		{Name: "", ProviderClass: "standard"},
		{Name: "fast", ProviderClass: "ssd"},
		{Name: "standard", ProviderClass: "standard"},
	}
	for _, tt := range []struct {
		classes   []ferryv1alpha1.VirtualNodeStorageClass
		requested string
		want      string
		wantErr   string
	}{
		{classes, "", "standard", ""},
		{classes, "fast", "ssd", ""},
		{classes, "gold", "", `does not offer storage class "gold" (offers: the default (standard), "fast", "standard")`},
		{classes[1:], "", "", `does not offer a default storage class (offers: "fast", "standard")`},
		{nil, "fast", "", "offers no storage"},
	} {
		got, err := ResolveStorageClass(tt.classes, tt.requested)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.requested, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %q, %v; want %q", tt.requested, got, err, tt.want)
		}
	}
}

func FuzzNodeStorageClasses(f *testing.F) {
	f.Add(`[{"name":"","providerClass":"standard"},{"name":"standard","providerClass":"standard"}]`)
	f.Add(`[]`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, raw string) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{ferryv1alpha1.AnnotationStorageClasses: raw}}}
		classes, ok, err := NodeStorageClasses(node)
		if err != nil {
			if !strings.Contains(err.Error(), ferryv1alpha1.AnnotationStorageClasses) {
				t.Errorf("error %v does not name the annotation", err)
			}
			return
		}
		if ok != (len(classes) > 0) {
			t.Errorf("ok = %v with %d classes", ok, len(classes))
		}
	})
}
