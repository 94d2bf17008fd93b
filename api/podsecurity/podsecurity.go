// Package podsecurity holds the rule a provider applies to what its
// consumers run: one Pod Security Standards level per consumer, chosen on
// the consumer's ForeignCluster, evaluated with the Kubernetes pod security
// library (k8s.io/pod-security-admission), on ShadowPod templates by the
// ShadowPod webhook and, through namespace labels, on every pod of a twin
// namespace by the provider's own PodSecurity admission. The webhook and
// the twin-namespace controller read it here so they cannot disagree.
package podsecurity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Default is the level of a consumer whose ForeignCluster names none, or
// that has no ForeignCluster here.
const Default = ferryv1alpha1.PodSecurityBaseline

var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("pod security checks: %v", err))
	}
	return e
}()

// LevelOf is the level consumer's pods must meet: the podSecurity of the
// ForeignCluster (among fcs) that stands for consumer as a consumer of this
// cluster, else Default.
func LevelOf(fcs []ferryv1alpha1.ForeignCluster, consumer ferryv1alpha1.ClusterID) ferryv1alpha1.PodSecurityLevel {
	for i := range fcs {
		fc := &fcs[i]
		if fc.Spec.ClusterID != consumer || (fc.Spec.Role != ferryv1alpha1.RoleConsumer && fc.Spec.Role != ferryv1alpha1.RoleConsumerAndProvider) {
			continue
		}
		if fc.Spec.PodSecurity != "" {
			return fc.Spec.PodSecurity
		}
	}
	return Default
}

// NamespaceLabels are the labels that make the provider's PodSecurity
// admission enforce level in a twin namespace, at the latest version of the
// standards.
func NamespaceLabels(level ferryv1alpha1.PodSecurityLevel) map[string]string {
	return map[string]string{
		psaapi.EnforceLevelLabel:   string(level),
		psaapi.EnforceVersionLabel: psaapi.VersionLatest,
	}
}

// Check evaluates a pod's metadata and spec against level, and says, as the
// API server's PodSecurity admission would, what violates it: each check
// with the containers and fields at fault. nil when the pod meets level.
func Check(level ferryv1alpha1.PodSecurityLevel, meta *metav1.ObjectMeta, spec *corev1.PodSpec) error {
	l, err := psaapi.ParseLevel(string(level))
	if err != nil {
		return fmt.Errorf("pod security level %q: %w", level, err)
	}
	if l == psaapi.LevelPrivileged {
		return nil
	}
	lv := psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()}
	result := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, meta, spec))
	if result.Allowed {
		return nil
	}
	return fmt.Errorf("violates PodSecurity %q: %s", lv.String(), result.ForbiddenDetail())
}
