package e2e

import (
	"context"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
		"controllerManager": map[string]any{"leaderElection": false, "extraArgs": []any{"--shadow-pod-workers=4"}}},
}

var _ = Describe("The Helm chart", Label("chart"), Ordered, func() {
	var c *testbed.Cluster

	BeforeAll(func(ctx context.Context) {
		c = framework.StartClusters(ctx, testbed.Options{Name: "chart"})[0]
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
