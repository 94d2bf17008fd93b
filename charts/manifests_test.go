package charts

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestChartRendersTheKustomizeManifests holds the chart to the one source
// of truth: with every part switched on, it renders exactly the objects of
// the kustomizations under manifests/, but for the documented differences
// (normalize): qualified images and their pull policy and secrets, Helm's
// labels, CRDs kept on uninstall, the cluster ID the manifests leave as
// CHANGE-ME.
func TestChartRendersTheKustomizeManifests(t *testing.T) {
	full := map[string]any{
		"clusterID": "c1", "createNamespace": true,
		"network": map[string]any{"gateway": map[string]any{"enabled": true}},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}},
	}
	certManager := map[string]any{"clusterID": "c1", "createNamespace": true, "webhook": map[string]any{"certificates": "cert-manager"}}
	for name, tc := range map[string]struct {
		values map[string]any
		dirs   []string
	}{
		"everything":   {full, []string{"base", "controller-manager", "webhook", "scheduler", "storage", "gateway", "monitoring"}},
		"cert-manager": {certManager, []string{"base", "controller-manager", "webhook-cert-manager", "scheduler", "storage"}},
	} {
		t.Run(name, func(t *testing.T) {
			want := map[string]map[string]any{}
			for _, dir := range tc.dirs {
				for _, obj := range kustomize(t, filepath.Join("..", "manifests", dir)) {
					want[key(obj)] = normalize(t, obj, false)
				}
			}
			got := map[string]map[string]any{}
			for _, obj := range render(t, tc.values) {
				got[key(obj.Object)] = normalize(t, obj.Object, true)
			}
			for k, w := range want {
				g, ok := got[k]
				if !ok {
					t.Errorf("%s: in the manifests, not in the chart", k)
					continue
				}
				if !reflect.DeepEqual(g, w) {
					gj, _ := json.MarshalIndent(g, "", " ")
					wj, _ := json.MarshalIndent(w, "", " ")
					t.Errorf("%s differs:\nchart:     %s\nmanifests: %s", k, gj, wj)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: in the chart, not in the manifests", k)
				}
			}
		})
	}
}

func kustomize(t *testing.T, dir string) []map[string]any {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []map[string]any
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func key(obj map[string]any) string {
	u := unstructured.Unstructured{Object: obj}
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// normalize removes the documented differences between the chart's objects
// (chart) and the manifests', and the differences of number types.
func normalize(t *testing.T, obj map[string]any, chart bool) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	u := unstructured.Unstructured{Object: out}
	if chart {
		labels := u.GetLabels()
		for _, l := range []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"} {
			delete(labels, l)
		}
		u.SetLabels(labels)
		if len(labels) == 0 {
			unstructured.RemoveNestedField(out, "metadata", "labels")
		}
		if u.GetKind() == "CustomResourceDefinition" {
			annotations := u.GetAnnotations()
			delete(annotations, "helm.sh/resource-policy")
			u.SetAnnotations(annotations)
			if len(annotations) == 0 {
				unstructured.RemoveNestedField(out, "metadata", "annotations")
			}
		}
	}
	if u.GetKind() != "Deployment" && u.GetKind() != "DaemonSet" {
		return out
	}
	pod, _, _ := unstructured.NestedMap(out, "spec", "template", "spec")
	delete(pod, "imagePullSecrets")
	containers, _ := pod["containers"].([]any)
	for _, c := range containers {
		c := c.(map[string]any)
		delete(c, "imagePullPolicy")
		if chart {
			c["image"] = unqualified(c["image"].(string))
		}
		args, _ := c["args"].([]any)
		for i, a := range args {
			a := a.(string)
			switch {
			case !chart && a == "--cluster-id=CHANGE-ME":
				a = "--cluster-id=c1"
			case chart && strings.HasPrefix(a, "--virtual-kubelet-image="):
				a = "--virtual-kubelet-image=" + unqualified(strings.TrimPrefix(a, "--virtual-kubelet-image="))
			case chart && strings.HasPrefix(a, "--volume-mover-image="):
				a = "--volume-mover-image=" + unqualified(strings.TrimPrefix(a, "--volume-mover-image="))
			}
			args[i] = a
		}
	}
	if err := unstructured.SetNestedMap(out, pod, "spec", "template", "spec"); err != nil {
		t.Fatal(err)
	}
	return out
}

// unqualified is the image name the manifests use for the chart's
// <registry>/<component>:<tag>.
func unqualified(image string) string {
	name, _, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return name
}
