// Package charts holds ferry's Helm chart (charts/ferry, generated from
// manifests/ by make generate) embedded in the binaries that install it, and
// renders it the way `helm template` does, without a cluster.
package charts

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ReleaseName is the Helm release the chart is rendered as (and the name
// docs/getting-started/install.md's helm commands use).
const ReleaseName = "ferry"

// Namespace is where ferry runs: its components expect ferry-system, and the
// chart refuses any other release namespace.
const Namespace = "ferry-system"

//go:embed all:ferry
var files embed.FS

// Chart loads the embedded chart ferry.
func Chart() (*chart.Chart, error) {
	var buffered []*archive.BufferedFile
	err := fs.WalkDir(files, "ferry", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		buffered = append(buffered, &archive.BufferedFile{Name: strings.TrimPrefix(name, "ferry/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the embedded chart: %w", err)
	}
	ch, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("load the embedded chart: %w", err)
	}
	return ch, nil
}

// Render renders the chart as release "ferry" in namespace with values
// merged over the chart's defaults and validated against its schema, as
// `helm template` does (no cluster is asked anything). It returns the
// objects in the order to apply them: CustomResourceDefinitions and
// Namespaces first, then RBAC, then the rest, admission webhook
// configurations and policies last (they would otherwise call a webhook
// that is not running yet, or match objects this very apply creates).
//
// The chart does not render the ferry-system Namespace unless values set
// createNamespace: true (`helm install --create-namespace` makes it
// instead; an installer applying the objects itself wants it).
func Render(values map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	manifests, err := renderTemplates(values, namespace)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(manifests)) {
		decoded, err := decode(manifests[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, decoded...)
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return applyRank(a) - applyRank(b)
	})
	return objs, nil
}

// renderTemplates validates values and renders the chart's templates as
// Render does, returning each object template's text by its name.
func renderTemplates(values map[string]any, namespace string) (map[string]string, error) {
	ch, err := Chart()
	if err != nil {
		return nil, err
	}
	top, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{
		Name: ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	manifests, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render the chart: %w", err)
	}
	for name := range manifests {
		if path.Ext(name) != ".yaml" || strings.HasPrefix(path.Base(name), "_") {
			delete(manifests, name)
		}
	}
	return manifests, nil
}

// decode splits a rendered template into its objects, skipping empty
// documents (a template whose condition is false renders none).
func decode(manifest string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}

// applyRank orders kinds for applying: definitions and namespaces before
// what lives in them, identities and roles before the workloads using them,
// admission configurations after everything they could intercept.
func applyRank(obj *unstructured.Unstructured) int {
	switch obj.GetKind() {
	case "CustomResourceDefinition", "Namespace":
		return 0
	case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		return 1
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
		"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return 3
	default:
		return 2
	}
}
