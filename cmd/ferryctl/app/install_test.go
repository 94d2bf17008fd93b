package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestInstallValues(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for name, body := range map[string]string{
		a:   "clusterID: from-a\nimages: {registry: r.example/a, tag: v1}\n",
		b:   "images: {registry: r.example/b}\n",
		bad: "images: [\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := installFlags{valueFiles: []string{a, b}, sets: []string{"scheduler.enabled=false"}, setStrings: []string{"images.tag=0123"}}
	vals, err := f.userValues()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"clusterID":         "from-a",
		"images.registry":   "r.example/b", // the later file wins
		"images.tag":        "0123",        // --set-string wins over the files, as a string
		"scheduler.enabled": false,
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(vals, strings.Split(path, ".")...)
		if got != want {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	for _, tc := range []struct {
		f    installFlags
		flag string
	}{
		{installFlags{valueFiles: []string{bad}}, "--values " + bad},
		{installFlags{valueFiles: []string{filepath.Join(dir, "missing.yaml")}}, "--values"},
		{installFlags{sets: []string{"a.b"}}, `--set "a.b"`},
		{installFlags{setStrings: []string{"a"}}, `--set-string "a"`},
	} {
		if _, err := tc.f.userValues(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.f, err, tc.flag)
		}
	}
}

func TestInstallDetect(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.3.0/24"}}}
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(certManagerCRD)

	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, sc).Build()
	vals := map[string]any{}
	said, err := detect(t.Context(), c, vals)
	if err != nil {
		t.Fatal(err)
	}
	pod, _, _ := unstructured.NestedString(vals, valuePodCIDR...)
	svc, _, _ := unstructured.NestedString(vals, valueServiceCIDR...)
	certs, _, _ := unstructured.NestedString(vals, valueCertificates...)
	if pod != "10.244.0.0/16" || svc != "10.96.0.0/12" || certs != "" {
		t.Errorf("detected pod %q, service %q, certificates %q\n%s", pod, svc, certs, strings.Join(said, "\n"))
	}

	// What the user set stays; cert-manager is taken when installed.
	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, sc, crd).Build()
	vals = map[string]any{"network": map[string]any{"podCIDR": "10.1.0.0/16"}}
	if _, err := detect(t.Context(), c, vals); err != nil {
		t.Fatal(err)
	}
	pod, _, _ = unstructured.NestedString(vals, valuePodCIDR...)
	certs, _, _ = unstructured.NestedString(vals, valueCertificates...)
	if pod != "10.1.0.0/16" || certs != "cert-manager" {
		t.Errorf("pod %q (want the user's), certificates %q (want cert-manager)", pod, certs)
	}
	vals = map[string]any{"webhook": map[string]any{"certificates": "self-managed"}}
	if _, err := detect(t.Context(), c, vals); err != nil {
		t.Fatal(err)
	}
	if certs, _, _ = unstructured.NestedString(vals, valueCertificates...); certs != "self-managed" {
		t.Errorf("certificates %q, want the user's self-managed", certs)
	}
}
