package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// chartValueSets are the value sets whose workloads' flags are checked
// against ferry's binaries; "applied" is also applied to the API server
// (the others add kinds whose CRDs the test bed lacks: cert-manager's,
// the Prometheus operator's).
var chartValueSets = map[string]map[string]any{
	"applied": {"clusterID": "chart-e2e", "createNamespace": true,
		"network": map[string]any{"podCIDR": "10.244.0.0/16", "serviceCIDR": "10.96.0.0/12",
			"gateway": map[string]any{"enabled": true, "endpoint": "192.0.2.1:51820"}}},
	"cert-manager": {"clusterID": "chart-e2e", "webhook": map[string]any{"certificates": "cert-manager"}},
	"process launcher": {"clusterID": "chart-e2e", "storage": map[string]any{"enabled": false},
		"network":           map[string]any{"enabled": false},
		"virtualKubelet":    map[string]any{"mode": "process", "extraArgs": []any{"--health-check-period=5s"}},
		"controllerManager": map[string]any{"leaderElection": false, "extraArgs": []any{"--shadow-pod-workers=4"}},
		"scheduler":         map[string]any{"leaderElection": false, "replicas": 1}},
}

var _ = Describe("The Helm chart", Label("chart"), Ordered, func() {
	// c gets the rendered objects applied; helm gets the chart installed
	// by Helm's own install action.
	var c, helm *testbed.Cluster

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx, testbed.Options{Name: "chart"}, testbed.Options{Name: "helm"})
		c, helm = clusters[0], clusters[1]
	})

	It("applies to a real API server with server-side apply, twice without a change", func(ctx context.Context) {
		objs, err := charts.Render(chartValueSets["applied"], charts.Namespace)
		Expect(err).NotTo(HaveOccurred())
		apply := func() {
			for _, obj := range objs {
				Expect(c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
					client.FieldOwner("ferry-e2e"), client.ForceOwnership)).To(Succeed(), "apply %s %s", obj.GetKind(), obj.GetName())
			}
		}
		apply()
		versions := map[string]string{}
		for _, obj := range objs {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(obj.GroupVersionKind())
			Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
			Expect(live.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
			versions[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()] = live.GetResourceVersion()
		}
		var gw appsv1.Deployment
		Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: charts.Namespace, Name: "ferry-gateway"}, &gw)).To(Succeed())
		Expect(gw.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/ferry-io/ferry-gateway:v0.1.0"))

		By("applying again, which writes nothing")
		apply()
		for _, obj := range objs {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(obj.GroupVersionKind())
			Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)).To(Succeed())
			Expect(live.GetResourceVersion()).To(Equal(versions[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()]),
				"re-applying rewrote %s %s", obj.GetKind(), obj.GetName())
		}
	})

	It("installs, upgrades and uninstalls with Helm, keeping the CRDs", func(ctx context.Context) {
		cfg := action.NewConfiguration()
		kubeconfig, namespace := helm.KubeconfigPath, charts.Namespace
		Expect(cfg.Init(&genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &namespace}, namespace, "secret")).To(Succeed())
		ch, err := charts.Chart()
		Expect(err).NotTo(HaveOccurred())

		By("helm install --create-namespace --set clusterID=helm-e2e")
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = charts.ReleaseName, namespace, true
		install.WaitStrategy, install.Timeout = kube.HookOnlyStrategy, time.Minute
		_, err = install.RunWithContext(ctx, ch, map[string]any{"clusterID": "helm-e2e"})
		Expect(err).NotTo(HaveOccurred())
		var manager appsv1.Deployment
		Expect(helm.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "ferry-controller-manager"}, &manager)).To(Succeed())
		Expect(manager.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--cluster-id=helm-e2e"))
		Expect(helm.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "ferry-scheduler"}, &appsv1.Deployment{})).To(Succeed())

		By("helm upgrade --reuse-values --set scheduler.enabled=false,images.tag=v0.2.0")
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace, upgrade.ReuseValues = namespace, true
		upgrade.WaitStrategy, upgrade.Timeout = kube.HookOnlyStrategy, time.Minute
		_, err = upgrade.RunWithContext(ctx, charts.ReleaseName, ch, map[string]any{
			"scheduler": map[string]any{"enabled": false}, "images": map[string]any{"tag": "v0.2.0"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(helm.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "ferry-scheduler"}, &appsv1.Deployment{}))).To(BeTrue(),
			"scheduler.enabled=false left the scheduler Deployment")
		Expect(helm.Client.Get(ctx, client.ObjectKeyFromObject(&manager), &manager)).To(Succeed())
		Expect(manager.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/ferry-io/ferry-controller-manager:v0.2.0"))
		Expect(manager.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--cluster-id=helm-e2e",
			"--virtual-kubelet-image=ghcr.io/ferry-io/ferry-virtual-kubelet:v0.2.0"))

		By("helm uninstall")
		uninstall := action.NewUninstall(cfg)
		uninstall.WaitStrategy, uninstall.Timeout = kube.HookOnlyStrategy, time.Minute
		_, err = uninstall.Run(charts.ReleaseName)
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(helm.Client.Get(ctx, client.ObjectKeyFromObject(&manager), &appsv1.Deployment{}))).To(BeTrue())
		for _, role := range []string{"ferry-controller-manager", "ferry-namespace-admin"} {
			Expect(apierrors.IsNotFound(helm.Client.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{}))).To(BeTrue(), "ClusterRole %s left", role)
		}
		var crds apiextensionsv1.CustomResourceDefinitionList
		Expect(helm.Client.List(ctx, &crds, client.MatchingLabels{"app.kubernetes.io/part-of": "ferry"})).To(Succeed())
		shipped, err := filepath.Glob("../../manifests/crds/ferry.io_*.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(shipped).NotTo(BeEmpty())
		Expect(crds.Items).To(HaveLen(len(shipped)), "helm uninstall must keep ferry's CRDs (one per file in manifests/crds)")
	})

	It("gives every Deployment and DaemonSet flags its binary accepts", func(ctx context.Context) {
		binaries := map[string]string{}
		checked := 0
		for name, values := range chartValueSets {
			objs, err := charts.Render(values, charts.Namespace)
			Expect(err).NotTo(HaveOccurred(), name)
			for _, obj := range objs {
				pod, ok := podSpec(obj)
				if !ok {
					continue
				}
				for _, ctr := range pod.Containers {
					component := componentOf(ctr.Image)
					if binaries[component] == "" {
						binaries[component] = framework.BuildBinary(ctx, component)
					}
					By(name + ": " + obj.GetKind() + " " + obj.GetName() + ": " + component + " " + strings.Join(ctr.Args, " "))
					out, err := runParsingOnly(ctx, binaries[component], ctr.Args)
					Expect(err).NotTo(HaveOccurred(), "%s %s refuses the chart's args %v:\n%s", obj.GetKind(), obj.GetName(), ctr.Args, out)
					// The same check fails on a flag the binary does not have.
					out, err = runParsingOnly(ctx, binaries[component], append(append([]string{}, ctr.Args...), "--no-such-flag=1"))
					Expect(err).To(HaveOccurred(), "%s accepted --no-such-flag: the check proves nothing:\n%s", component, out)
					Expect(out).To(ContainSubstring("no-such-flag"))
					checked++
				}
			}
		}
		// Controller manager, webhook, scheduler, gateway, route agent in
		// "applied"; controller manager, webhook, scheduler in the others.
		Expect(checked).To(Equal(11))
	})
})

// podSpec is the pod template of a Deployment or DaemonSet.
func podSpec(obj *unstructured.Unstructured) (corev1.PodSpec, bool) {
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d)).To(Succeed())
		return d.Spec.Template.Spec, true
	case "DaemonSet":
		var d appsv1.DaemonSet
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d)).To(Succeed())
		return d.Spec.Template.Spec, true
	}
	return corev1.PodSpec{}, false
}

// componentOf is the binary an image of ferry holds: <registry>/<component>:<tag>.
func componentOf(image string) string {
	name, _, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return name
}

// runParsingOnly runs bin with args and --help last: every ferry binary
// (pflag, and cobra for ferry-scheduler) parses all flags first, fails on
// one it does not know, and exits 0 after printing its usage otherwise,
// without starting anything.
func runParsingOnly(ctx context.Context, bin string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(append([]string{}, args...), "--help")...).CombinedOutput()
	return string(out), err
}
