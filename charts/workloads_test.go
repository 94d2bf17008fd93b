package charts

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ferry-io/ferry/api/podsecurity"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// privileged are the workloads PodSecurity restricted cannot admit, as the
// docs/operations/security.md says: the gateway (NET_ADMIN, NET_RAW, a tun
// device) and the route agent (host network, root, NET_ADMIN).
var privileged = map[string]bool{"ferry-gateway": true, "ferry-route-agent": true}

// TestWorkloadsAreProbedRequestedAndRestricted: every container of every
// ferry workload has readiness and liveness probes and CPU and memory
// requests, and every pod but the privileged ones is admitted by PodSecurity
// restricted, as the API server would judge it.
func TestWorkloadsAreProbedRequestedAndRestricted(t *testing.T) {
	seen := map[string]bool{}
	for _, set := range []string{"network", "cert-manager", "defaults"} {
		for _, o := range render(t, valueSets[set]) {
			if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
				continue
			}
			var meta metav1.ObjectMeta
			var spec corev1.PodSpec
			switch o.GetKind() {
			case "Deployment":
				var d appsv1.Deployment
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				meta, spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
			case "DaemonSet":
				var d appsv1.DaemonSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
					t.Fatal(err)
				}
				meta, spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
			}
			what := o.GetKind() + " " + o.GetName() + " (values " + set + ")"
			seen[o.GetName()] = true
			for _, c := range spec.Containers {
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					t.Errorf("%s, container %s: readiness probe %v, liveness probe %v; want both", what, c.Name, c.ReadinessProbe, c.LivenessProbe)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s, container %s: requests %v, want cpu and memory", what, c.Name, c.Resources.Requests)
				}
			}
			err := podsecurity.Check(ferryv1alpha1.PodSecurityRestricted, &meta, &spec)
			switch {
			case privileged[o.GetName()] && err == nil:
				t.Errorf("%s is admitted by PodSecurity restricted: drop it from privileged and from docs/operations/security.md's list of exceptions", what)
			case !privileged[o.GetName()] && err != nil:
				t.Errorf("%s: %v", what, err)
			}
		}
	}
	for _, name := range []string{"ferry-controller-manager", "ferry-webhook", "ferry-scheduler", "ferry-gateway", "ferry-route-agent"} {
		if !seen[name] {
			t.Errorf("no workload %s rendered: the test misses it", name)
		}
	}
}
