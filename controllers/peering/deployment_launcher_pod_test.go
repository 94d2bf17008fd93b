package peering

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ferry-io/ferry/api/podsecurity"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestVirtualKubeletPodIsProbedPulledAndRestricted: the virtual kubelet's
// pod is ready once its kubelet API serves /healthz over HTTPS, alive while
// that port accepts, pulls its image IfNotPresent (or as told) with the
// pull secrets given, requests resources, and is admitted by PodSecurity
// restricted.
func TestVirtualKubeletPodIsProbedPulledAndRestricted(t *testing.T) {
	vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: "ferry-provider", Namespace: ferryv1alpha1.SystemNamespace}}
	for name, tc := range map[string]struct {
		launcher   DeploymentLauncher
		policy     corev1.PullPolicy
		secretsLen int
	}{
		"defaults":               {DeploymentLauncher{Image: "example.com/vk:1"}, corev1.PullIfNotPresent, 0},
		"policy and secrets set": {DeploymentLauncher{Image: "example.com/vk:1", PullPolicy: corev1.PullAlways, PullSecrets: []string{"regcred"}}, corev1.PullAlways, 1},
	} {
		t.Run(name, func(t *testing.T) {
			l := tc.launcher
			l.Client = fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(vn.DeepCopy()).Build()
			key := client.ObjectKeyFromObject(vn)
			if err := l.Ensure(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			var d appsv1.Deployment
			if err := l.Get(t.Context(), client.ObjectKey{Namespace: vn.Namespace, Name: deploymentName(key)}, &d); err != nil {
				t.Fatal(err)
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if r := c.ReadinessProbe; r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/healthz" || r.HTTPGet.Scheme != corev1.URISchemeHTTPS || r.HTTPGet.Port.StrVal != "kubelet-api" {
				t.Errorf("readiness probe %+v, want HTTPS GET /healthz on kubelet-api", r)
			}
			if p := c.LivenessProbe; p == nil || (p.TCPSocket == nil && p.HTTPGet == nil) {
				t.Errorf("liveness probe %+v, want one on kubelet-api", p)
			}
			if c.ImagePullPolicy != tc.policy {
				t.Errorf("pull policy %q, want %q", c.ImagePullPolicy, tc.policy)
			}
			if len(pod.ImagePullSecrets) != tc.secretsLen || (tc.secretsLen > 0 && pod.ImagePullSecrets[0].Name != "regcred") {
				t.Errorf("pull secrets %v, want %v", pod.ImagePullSecrets, tc.launcher.PullSecrets)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("requests %v, want cpu and memory", c.Resources.Requests)
			}
			if err := podsecurity.Check(ferryv1alpha1.PodSecurityRestricted, &d.Spec.Template.ObjectMeta, &pod); err != nil {
				t.Errorf("virtual kubelet pod: %v", err)
			}
		})
	}
}
