package reflection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func cm(rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "twin", Name: "cfg", ResourceVersion: rv}}
}

func TestReflects(t *testing.T) {
	annotated := func(k, v string) metav1.Object {
		return &metav1.ObjectMeta{Annotations: map[string]string{k: v}}
	}
	for _, tc := range []struct {
		policy Policy
		obj    metav1.Object
		want   bool
	}{
		{DenyList, &metav1.ObjectMeta{}, true},
		{DenyList, annotated(ferryv1alpha1.AnnotationSkipReflection, "true"), false},
		{DenyList, annotated(ferryv1alpha1.AnnotationSkipReflection, "false"), true},
		{AllowList, &metav1.ObjectMeta{}, false},
		{AllowList, annotated(ferryv1alpha1.AnnotationAllowReflection, "true"), true},
		{AllowList, annotated(ferryv1alpha1.AnnotationAllowReflection, "yes"), false},
		{AllowList, &metav1.ObjectMeta{Annotations: map[string]string{
			ferryv1alpha1.AnnotationAllowReflection: "true", ferryv1alpha1.AnnotationSkipReflection: "true"}}, false},
	} {
		r := &reflector{policy: tc.policy}
		if got := r.reflects(tc.obj); got != tc.want {
			t.Errorf("%s, annotations %v: reflects = %v, want %v", tc.policy, tc.obj.GetAnnotations(), got, tc.want)
		}
	}
}

// TestCurrent covers the informer lagging behind the reflector's own
// writes: a copy just created or updated is compared with what was written,
// a copy just deleted counts as gone, and the informer wins once it caught up.
func TestCurrent(t *testing.T) {
	key := types.NamespacedName{Namespace: "twin", Name: "cfg"}
	for _, tc := range []struct {
		name    string
		cached  client.Object
		written *written
		want    string // resourceVersion of the answer, "" for nil
		kept    bool   // the written entry is kept
	}{
		{name: "nothing written", cached: cm("5"), want: "5"},
		{name: "created, not seen yet", written: &written{obj: cm("7")}, want: "7", kept: true},
		{name: "updated, not seen yet", cached: cm("5"), written: &written{obj: cm("7")}, want: "7", kept: true},
		{name: "update seen", cached: cm("7"), written: &written{obj: cm("7")}, want: "7"},
		{name: "newer change seen", cached: cm("9"), written: &written{obj: cm("7")}, want: "9"},
		{name: "deleted, not seen yet", cached: cm("7"), written: &written{obj: cm("7"), deleted: true}, want: "", kept: true},
		{name: "deletion seen", written: &written{obj: cm("7"), deleted: true}, want: ""},
		{name: "recreated by someone after the deletion", cached: cm("12"), written: &written{obj: cm("7"), deleted: true}, want: "12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inf := cache.NewSharedIndexInformer(nil, &corev1.ConfigMap{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if tc.cached != nil {
				_ = inf.GetIndexer().Add(tc.cached)
			}
			rs := &remoteSet{units: map[string]*remoteUnit{"twin": {informers: map[Kind]cache.SharedIndexInformer{ConfigMaps: inf}}}}
			r := &reflector{kind: ConfigMaps, remote: rs, written: newWriteLog()}
			if tc.written != nil {
				r.written.remember(key, tc.written.obj, tc.written.deleted)
			}
			got := r.current(key)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("current = RV %s, want none", got.GetResourceVersion())
			case tc.want != "" && (got == nil || got.GetResourceVersion() != tc.want):
				t.Errorf("current = %v, want RV %s", got, tc.want)
			}
			if _, kept := r.written.entries[key]; kept != tc.kept {
				t.Errorf("written entry kept = %v, want %v", kept, tc.kept)
			}
		})
	}
}

func TestNewer(t *testing.T) {
	if !newer(cm("10"), cm("9")) || newer(cm("9"), cm("10")) || newer(cm("9"), cm("9")) || newer(cm("x"), cm("1")) || !newer(cm("1"), nil) {
		t.Error("newer compares resource versions as integers, and anything unparsable is not newer")
	}
}
