package reflection

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// translatorEnv is the Env of the translator tests: consumer "home", virtual
// node "ferry-provider", local pod network 10.0.0.0/16 reached at
// 10.200.0.0/16.
func translatorEnv() *Env {
	return &Env{
		Consumer: "home",
		NodeName: "ferry-provider",
		RemapIP: func(ip string) string {
			if len(ip) > 5 && ip[:5] == "10.0." {
				return "10.200." + ip[5:]
			}
			return ip
		},
		IngressClasses: map[string]string{"nginx": "provider-nginx", "*": "provider-default"},
		StorageClasses: map[string]string{"fast": "provider-ssd"},
	}
}

// localObjectMeta is the metadata of a local object named name in namespace
// "shop", with ferry's keys and kubectl's last-applied configuration, which
// are not reflected.
func localObjectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: "shop", UID: "local-uid", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: metav1.Now(),
		Labels: map[string]string{
			"app": "web", ferryv1alpha1.LabelOriginCluster: "elsewhere", "ferry.io/internal": "x",
		},
		Annotations: map[string]string{
			"note": "kept", ferryv1alpha1.AnnotationAllowReflection: "true",
			"kubectl.kubernetes.io/last-applied-configuration": `{"big":"json"}`,
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: "owner-uid"}},
		Finalizers:      []string{"example.com/hold"},
	}
}

// reflectedLabels is what the labels of localObjectMeta become remotely,
// with extra added.
func reflectedLabels(extra map[string]string) map[string]string {
	labels := map[string]string{
		"app":                              "web",
		ferryv1alpha1.LabelOriginCluster:   "home",
		ferryv1alpha1.LabelOriginNamespace: "shop",
	}
	maps.Copy(labels, extra)
	return labels
}

// checkReflectedMeta checks that got carries the metadata of a copy of
// localObjectMeta(name) in the twin namespace "shop-home", and nothing of
// the local object's identity.
func checkReflectedMeta(t *testing.T, got client.Object, name string, labels map[string]string) {
	t.Helper()
	if got.GetName() != name || got.GetNamespace() != "shop-home" {
		t.Errorf("copy is %s/%s, want shop-home/%s", got.GetNamespace(), got.GetName(), name)
	}
	if !maps.Equal(got.GetLabels(), labels) {
		t.Errorf("labels = %v, want %v", got.GetLabels(), labels)
	}
	if want := map[string]string{"note": "kept"}; !maps.Equal(got.GetAnnotations(), want) {
		t.Errorf("annotations = %v, want %v", got.GetAnnotations(), want)
	}
	created := got.GetCreationTimestamp()
	if got.GetUID() != "" || got.GetResourceVersion() != "" || got.GetGeneration() != 0 ||
		!created.IsZero() || got.GetOwnerReferences() != nil || got.GetFinalizers() != nil {
		t.Errorf("copy carries the local object's identity: %+v", got)
	}
}

// assignIdentity sets what the provider's API server assigns every object.
func assignIdentity(o client.Object) {
	o.SetUID("remote-uid")
	o.SetResourceVersion("7")
	o.SetCreationTimestamp(metav1.Now())
	o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "ferry"}})
}

// checkKeptIdentity checks that merged is still the object assignIdentity
// made.
func checkKeptIdentity(t *testing.T, merged client.Object) {
	t.Helper()
	if merged.GetUID() != "remote-uid" || merged.GetResourceVersion() != "7" {
		t.Errorf("merge lost the remote identity: uid %q, resourceVersion %q", merged.GetUID(), merged.GetResourceVersion())
	}
}

func localConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: localObjectMeta("web"),
		Data:       map[string]string{"app.conf": "listen 80"},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}},
	}
}

func TestConfigMapTranslatorDesired(t *testing.T) {
	tests := []struct {
		name  string
		local func() *corev1.ConfigMap
		skip  bool
	}{
		{name: "data and binary data", local: localConfigMap},
		{name: "immutable", local: func() *corev1.ConfigMap {
			cm := localConfigMap()
			cm.Immutable = new(true)
			return cm
		}},
		{name: "empty", local: func() *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: localObjectMeta("empty")} }},
		{name: "root CA", skip: true, local: func() *corev1.ConfigMap {
			cm := localConfigMap()
			cm.Name = "kube-root-ca.crt"
			return cm
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := tt.local()
			got, skip, err := configMapTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			if tt.skip {
				if skip == "" || got != nil {
					t.Fatalf("desired = %v, %q; want skipped with a reason", got, skip)
				}
				return
			}
			if skip != "" {
				t.Fatalf("skipped: %s", skip)
			}
			want := got.(*corev1.ConfigMap)
			checkReflectedMeta(t, want, local.Name, reflectedLabels(nil))
			if !maps.Equal(want.Data, local.Data) || len(want.BinaryData) != len(local.BinaryData) ||
				string(want.BinaryData["logo.png"]) != string(local.BinaryData["logo.png"]) {
				t.Errorf("data = %v %v, want %v %v", want.Data, want.BinaryData, local.Data, local.BinaryData)
			}
			if (want.Immutable == nil) != (local.Immutable == nil) || want.Immutable != nil && *want.Immutable != *local.Immutable {
				t.Errorf("immutable = %v, want %v", want.Immutable, local.Immutable)
			}
			if len(local.BinaryData) > 0 {
				want.BinaryData["logo.png"][0] = 0
				if local.BinaryData["logo.png"][0] == 0 {
					t.Error("the copy shares its binary data with the local object")
				}
			}
		})
	}
}

func TestConfigMapTranslatorEqual(t *testing.T) {
	tests := []struct {
		name   string
		local  *corev1.ConfigMap // localConfigMap() when nil
		change func(*corev1.ConfigMap)
		equal  bool
	}{
		{name: "as created", change: func(*corev1.ConfigMap) {}, equal: true},
		{name: "empty equals nil", local: &corev1.ConfigMap{ObjectMeta: localObjectMeta("empty")}, change: func(cm *corev1.ConfigMap) {
			cm.Data, cm.BinaryData = map[string]string{}, map[string][]byte{}
		}, equal: true},
		{name: "immutable false", change: func(cm *corev1.ConfigMap) { cm.Immutable = new(false) }, equal: true},
		{name: "data changed", change: func(cm *corev1.ConfigMap) { cm.Data["app.conf"] = "listen 8080" }},
		{name: "data added", change: func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" }},
		{name: "binary data changed", change: func(cm *corev1.ConfigMap) { cm.BinaryData["logo.png"] = []byte("GIF") }},
		{name: "label removed", change: func(cm *corev1.ConfigMap) { delete(cm.Labels, "app") }},
		{name: "origin label removed", change: func(cm *corev1.ConfigMap) { delete(cm.Labels, ferryv1alpha1.LabelOriginNamespace) }},
		{name: "annotation added", change: func(cm *corev1.ConfigMap) { cm.Annotations["someone"] = "else" }},
		{name: "made immutable", change: func(cm *corev1.ConfigMap) { cm.Immutable = new(true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := tt.local
			if local == nil {
				local = localConfigMap()
			}
			want, _, err := configMapTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := want.DeepCopyObject().(*corev1.ConfigMap)
			assignIdentity(remote)
			tt.change(remote)
			if got := (configMapTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestConfigMapTranslatorMerge(t *testing.T) {
	tr := configMapTranslator{}
	want, _, err := tr.desired(translatorEnv(), localConfigMap(), "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop-home", Labels: map[string]string{"stale": "x"}},
		Data:       map[string]string{"old": "data"},
	}
	assignIdentity(remote)
	before := remote.DeepCopy()

	merged := tr.merge(want, remote)
	checkKeptIdentity(t, merged)
	if !tr.equal(want, merged) {
		t.Errorf("merged copy %+v does not equal %+v", merged, want)
	}
	if _, stale := merged.(*corev1.ConfigMap).Data["old"]; stale {
		t.Error("merge kept remote data")
	}
	if !equality.Semantic.DeepEqual(before, remote) {
		t.Error("merge changed the remote object")
	}
}
