package install

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/test/testbed"
)

// fixture is a small install with one object of each step: ferry's
// ForeignCluster CRD (so that peerings can be made), a test CRD, a
// Namespace, RBAC, a ConfigMap, a Deployment and a webhook configuration.
func fixture(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "manifests", "crds", "ferry.io_foreignclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{string(raw), `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.install.test}
spec:
  group: install.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: install-test}
webhooks:
  - name: widgets.install.test
    clientConfig: {url: "https://127.0.0.1:1/validate"}
    rules: [{apiGroups: [install.test], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
`, `
apiVersion: v1
kind: Namespace
metadata: {name: NS}
`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: install-test-pre}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
`, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: NS}
`, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {a: "1"}
`, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      serviceAccountName: app
      containers: [{name: app, image: example.invalid/app:1}]
`}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(strings.ReplaceAll(d, "NS", ns)), 4096).Decode(&u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func exists(t *testing.T, c client.Client, apiVersion, kind, ns, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return err == nil
}

// TestInstallUninstall installs a fixture into a real cluster (with
// kube-controller-manager, kube-scheduler and a kwok node, so that the
// Deployment gets ready), installs it again (nothing changes), installs it
// without one object (pruned), refuses to uninstall while a ForeignCluster
// exists, and uninstalls with --force: everything the install made is gone,
// the ClusterRole that was there before stays.
func TestInstallUninstall(t *testing.T) {
	testbed.RequireBinaries(t)
	ctx := t.Context()
	c, err := testbed.Start(ctx, testbed.Options{Name: "install", ControllerManager: true, Scheduler: true, Kwok: true,
		Nodes: []testbed.NodePool{{Name: "node", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "ferry-install-test"
	objs := fixture(t, ns)
	// An object that exists before the install stays its owner's.
	if err := cl.Create(ctx, objs[4].DeepCopy()); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	in := &Installer{Client: cl, Out: &out, Namespace: ns, Poll: 200 * time.Millisecond}
	opts := Options{Version: "v0.0.0-test", Wait: true, Timeout: 2 * time.Minute}

	res, err := in.Install(ctx, objs, opts)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	if res.Created != len(objs)-1 || res.Changed != 1 {
		t.Errorf("first install = %+v, want %d created and 1 changed (the ClusterRole that was there)\n%s", res, len(objs)-1, out.String())
	}
	for _, step := range []string{"CustomResourceDefinitions", "Namespaces", "RBAC", "configuration", "workloads", "admission"} {
		if !strings.Contains(out.String(), step) {
			t.Errorf("no progress line for %s:\n%s", step, out.String())
		}
	}
	inv, err := readInventory(ctx, cl, ns)
	if err != nil || inv == nil || len(inv.Entries) != len(objs) || inv.Version != opts.Version {
		t.Fatalf("inventory = %+v, %v", inv, err)
	}
	if e, _ := inv.find(entryOf(objs[4], false)); e.Created {
		t.Error("the ClusterRole that existed before is listed as created")
	}

	out.Reset()
	res, err = in.Install(ctx, objs, opts)
	if err != nil || res.Created != 0 || res.Changed != 0 || res.Unchanged != len(objs) {
		t.Errorf("second install = %+v, %v; want every object unchanged\n%s", res, err, out.String())
	}

	out.Reset()
	without := append(append([]*unstructured.Unstructured(nil), objs[:6]...), objs[7:]...) // no ConfigMap
	if res, err = in.Install(ctx, without, opts); err != nil || res.Pruned != 1 {
		t.Errorf("install without the ConfigMap = %+v, %v; want it pruned\n%s", res, err, out.String())
	}
	if exists(t, cl, "v1", "ConfigMap", ns, "settings") {
		t.Error("the ConfigMap the install no longer has is still there")
	}

	// A peering (a ForeignCluster) refuses the uninstall; a Widget with a
	// finalizer no controller removes is removed with --force.
	peer := &unstructured.Unstructured{}
	peer.SetAPIVersion("ferry.io/v1alpha1")
	peer.SetKind("ForeignCluster")
	peer.SetName("peer")
	if err := unstructured.SetNestedStringMap(peer.Object, map[string]string{"clusterID": "peer", "role": "Consumer"}, "spec"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, peer); err != nil {
		t.Fatal(err)
	}
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion("install.test/v1")
	widget.SetKind("Widget")
	widget.SetNamespace(ns)
	widget.SetName("w")
	widget.SetFinalizers([]string{"install.test/held"})
	if err := cl.Create(ctx, widget); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := in.Uninstall(ctx, UninstallOptions{Timeout: 2 * time.Second}); !errors.Is(err, ErrPeered) || !strings.Contains(err.Error(), "peer") {
		t.Fatalf("uninstall with a peering = %v, want ErrPeered naming it", err)
	}
	if !exists(t, cl, "apps/v1", "Deployment", ns, "app") {
		t.Fatal("a refused uninstall deleted the Deployment")
	}
	out.Reset()
	if _, err := in.Uninstall(ctx, UninstallOptions{Timeout: 2 * time.Second, DryRun: true, Force: true}); err != nil || !strings.Contains(out.String(), "would delete Deployment "+ns+"/app") {
		t.Errorf("dry run = %v\n%s", err, out.String())
	}
	out.Reset()
	removed, err := in.Uninstall(ctx, UninstallOptions{Timeout: 20 * time.Second, Force: true})
	if err != nil {
		t.Fatalf("uninstall --force: %v\n%s", err, out.String())
	}
	if removed != len(without)-1 || !strings.Contains(out.String(), "removed the finalizers of Widget "+ns+"/w") {
		t.Errorf("removed %d, want %d; output:\n%s", removed, len(without)-1, out.String())
	}
	for _, o := range without {
		if o.GetName() == "install-test-pre" {
			if !exists(t, cl, o.GetAPIVersion(), o.GetKind(), "", o.GetName()) {
				t.Error("uninstall deleted the ClusterRole that was there before the install")
			}
			continue
		}
		if exists(t, cl, o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()) {
			t.Errorf("%s %s left after uninstall", o.GetKind(), o.GetName())
		}
	}
	t.Log(out.String())
	if _, err := in.Uninstall(ctx, UninstallOptions{Timeout: time.Second}); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("second uninstall = %v, want ErrNotInstalled", err)
	}
}

// TestUninstallStopsTheControllersBeforeWhatTheyMake: a controller that
// makes an object of the install's CRDs again as soon as it is deleted (as
// the controller manager does its local NetworkConfig) runs as long as the
// install's Deployment has pods; uninstall stops it (the Deployment's pods
// gone) and then deletes what it made, without --force.
func TestUninstallStopsTheControllersBeforeWhatTheyMake(t *testing.T) {
	testbed.RequireBinaries(t)
	ctx := t.Context()
	c, err := testbed.Start(ctx, testbed.Options{Name: "uninstall", ControllerManager: true, Scheduler: true, Kwok: true,
		Nodes: []testbed.NodePool{{Name: "node", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "ferry-uninstall-test"
	objs := fixture(t, ns)
	var out bytes.Buffer
	in := &Installer{Client: cl, Out: &out, Namespace: ns, Poll: 200 * time.Millisecond}
	if _, err := in.Install(ctx, objs, Options{Version: "v0.0.0-test", Wait: true, Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}

	// The controller, while a pod of the Deployment exists: the Widget
	// local always exists (as the local NetworkConfig does), and a Widget
	// being deleted loses the controller's finalizer half a second later
	// (as a peering is finalized), long enough for a poll to see local
	// made again.
	const finalizer = "install.test/controller"
	peer := &unstructured.Unstructured{}
	peer.SetAPIVersion("install.test/v1")
	peer.SetKind("Widget")
	peer.SetNamespace(ns)
	peer.SetName("peer")
	peer.SetFinalizers([]string{finalizer})
	if err := cl.Create(ctx, peer); err != nil {
		t.Fatal(err)
	}
	made := 0
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		deleting := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var pods corev1.PodList
			if err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "app"}); err != nil || len(pods.Items) == 0 {
				continue
			}
			widgets := &unstructured.UnstructuredList{}
			widgets.SetAPIVersion("install.test/v1")
			widgets.SetKind("WidgetList")
			if err := cl.List(ctx, widgets, client.InNamespace(ns)); err != nil {
				continue
			}
			local := false
			for _, w := range widgets.Items {
				local = local || w.GetName() == "local"
				if w.GetDeletionTimestamp() == nil || !slices.Contains(w.GetFinalizers(), finalizer) {
					continue
				}
				if _, ok := deleting[w.GetName()]; !ok {
					deleting[w.GetName()] = time.Now()
				}
				if time.Since(deleting[w.GetName()]) > 500*time.Millisecond {
					_ = cl.Patch(ctx, &w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
				}
			}
			if !local {
				w := &unstructured.Unstructured{}
				w.SetAPIVersion("install.test/v1")
				w.SetKind("Widget")
				w.SetNamespace(ns)
				w.SetName("local")
				if err := cl.Create(ctx, w); err == nil {
					made++
				}
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !exists(t, cl, "install.test/v1", "Widget", ns, "local") {
		if time.Now().After(deadline) {
			t.Fatal("the test's controller made no Widget: the Deployment has no pods")
		}
		time.Sleep(100 * time.Millisecond)
	}

	out.Reset()
	_, err = in.Uninstall(ctx, UninstallOptions{Timeout: 30 * time.Second})
	close(stop)
	<-stopped
	if err != nil {
		t.Fatalf("uninstall (controller made local %d times): %v\n%s", made, err, out.String())
	}
	t.Logf("the controller made the Widget %d times\n%s", made, out.String())
	if made < 2 {
		t.Errorf("the controller made the Widget %d times: uninstall deleted it only once the controller had stopped, the test proves nothing", made)
	}
	if exists(t, cl, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.install.test") {
		t.Error("the Widget CRD is left")
	}
}
