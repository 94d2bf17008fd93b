package podsecurity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestLevelOf(t *testing.T) {
	fcs := []ferryv1alpha1.ForeignCluster{
		{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "strict", Role: ferryv1alpha1.RoleConsumer, PodSecurity: ferryv1alpha1.PodSecurityRestricted}},
		{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "trusted", Role: ferryv1alpha1.RoleConsumerAndProvider, PodSecurity: ferryv1alpha1.PodSecurityPrivileged}},
		{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "provider-only", Role: ferryv1alpha1.RoleProvider, PodSecurity: ferryv1alpha1.PodSecurityPrivileged}},
		{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "unset", Role: ferryv1alpha1.RoleConsumer}},
	}
	for consumer, want := range map[ferryv1alpha1.ClusterID]ferryv1alpha1.PodSecurityLevel{
		"strict": "restricted", "trusted": "privileged", "unset": "baseline", "unknown": "baseline",
		"provider-only": "baseline", // a provider's level says nothing about it as a consumer
	} {
		if got := LevelOf(fcs, consumer); got != want {
			t.Errorf("LevelOf(%s) = %s, want %s", consumer, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	plain := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}
	privileged := *plain.DeepCopy()
	privileged.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	hostPort := *plain.DeepCopy()
	hostPort.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	restricted := *plain.DeepCopy()
	restricted.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	restricted.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}

	for _, tt := range []struct {
		name  string
		level ferryv1alpha1.PodSecurityLevel
		spec  corev1.PodSpec
		want  []string // substrings of the error; none: allowed
	}{
		{"baseline admits a plain pod", "baseline", plain, nil},
		{"baseline refuses privileged, naming container and field", "baseline", privileged,
			[]string{`violates PodSecurity "baseline:latest"`, `privileged (container "app" must not set securityContext.privileged=true)`}},
		{"baseline refuses host ports", "baseline", hostPort, []string{"hostPort", "8080"}},
		{"restricted refuses a plain pod", "restricted", plain, []string{`"restricted:latest"`, "runAsNonRoot", "allowPrivilegeEscalation", "seccompProfile"}},
		{"restricted admits a restricted pod", "restricted", restricted, nil},
		{"privileged admits anything", "privileged", privileged, nil},
		{"an unknown level is an error, not a pass", "lenient", plain, []string{`pod security level "lenient"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.level, &metav1.ObjectMeta{}, &tt.spec)
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted, want %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestNamespaceLabels(t *testing.T) {
	l := NamespaceLabels(ferryv1alpha1.PodSecurityRestricted)
	if l["pod-security.kubernetes.io/enforce"] != "restricted" || l["pod-security.kubernetes.io/enforce-version"] != "latest" || len(l) != 2 {
		t.Errorf("labels %v", l)
	}
}
