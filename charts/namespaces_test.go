package charts

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestObjectsKeepTheNamespaceTheirManifestNames: an object whose manifest
// names its namespace (kube-system, where Kubernetes keeps what it reads:
// extension-apiserver-authentication and the Role reading it) is rendered
// there, not moved to ferry-system by a kustomization's namespace.
func TestObjectsKeepTheNamespaceTheirManifestNames(t *testing.T) {
	full := map[string]any{
		"clusterID": "c1", "createNamespace": true,
		"network": map[string]any{"gateway": map[string]any{"enabled": true, "endpoint": "gw.example:51820"}},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}},
	}
	objs := render(t, full)
	checked := 0
	err := filepath.WalkDir(filepath.Join("..", "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == "kustomization.yaml" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return nil // not a Kubernetes object (a scheduler or dashboard config)
			}
			ns := u.GetNamespace()
			if ns == "" || ns == Namespace {
				continue
			}
			checked++
			// Another object of the same kind and name may be in
			// ferry-system (the Role ferry-virtual-kubelet is in both).
			var in []string
			for _, o := range objs {
				if o.GetKind() == u.GetKind() && o.GetName() == u.GetName() {
					in = append(in, o.GetNamespace())
				}
			}
			if !slices.Contains(in, ns) {
				t.Errorf("%s %s: %s names namespace %s, the chart renders it in %v", u.GetKind(), u.GetName(), path, ns, in)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no manifest names a namespace other than ferry-system; the test checks nothing")
	}
	// What the namespace is for: the role reading the API server's
	// authentication configuration grants only in kube-system.
	for _, o := range objs {
		ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if o.GetKind() == "RoleBinding" && ref == "extension-apiserver-authentication-reader" && o.GetNamespace() != "kube-system" {
			t.Errorf("RoleBinding %s/%s binds extension-apiserver-authentication-reader outside kube-system, where it grants nothing", o.GetNamespace(), o.GetName())
		}
	}
}
