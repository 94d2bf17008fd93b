package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestShadowPodValidatorHoldsConsumersToTheirGrantedPools: a consumer's
// ShadowPod may select one of its granted pools by nodeSelector and
// nothing else; it cannot pick nodes by name or affinity, nor a pool
// granted to another consumer, nor a value its grant does not hold.
func TestShadowPodValidatorHoldsConsumersToTheirGrantedPools(t *testing.T) {
	s := testScheme()
	slice := func(ns, consumer string, values ...string) *ferryv1alpha1.ResourceSlice {
		rs := &ferryv1alpha1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: consumer, Namespace: ns},
			Spec: ferryv1alpha1.ResourceSliceSpec{ConsumerClusterID: ferryv1alpha1.ClusterID(consumer), NodePools: &ferryv1alpha1.NodePools{LabelKey: "gpu-model"}}}
		for _, v := range values {
			rs.Status.Pools = append(rs.Status.Pools, ferryv1alpha1.NodePoolGrant{Value: v})
		}
		return rs
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-tenant-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-tenant-c2", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c2"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		slice("ferry-tenant-c1", "c1", "a100", "t4"),
		slice("ferry-tenant-c2", "c2", "h100"),
		// c2 forging a slice in its own tenant naming c1 grants c1 nothing.
		func() client.Object { rs := slice("ferry-tenant-c2", "c1", "v100"); rs.Name = "forged"; return rs }(),
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&ferryv1alpha1.PeeringQuota{}, quota.ConsumerIndex, func(o client.Object) []string {
			return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
		}).Build()
	v := &ShadowPodValidator{Reader: c, APIReader: c, Writer: c, Decoder: admission.NewDecoder(s)}
	sp := func(mutate func(*corev1.PodSpec)) *ferryv1alpha1.ShadowPod {
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}
		mutate(&spec)
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1"}},
			Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "c1", Template: ferryv1alpha1.ShadowPodTemplate{Spec: spec}}}
	}
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.PodSpec)
		denied string
	}{
		{"no node constraint", func(*corev1.PodSpec) {}, ""},
		{"a granted pool", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"gpu-model": "t4"} }, ""},
		{"a pool not granted", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"gpu-model": "h100"} }, "spec.template.spec.nodeSelector[gpu-model]"},
		{"a pool in a forged slice", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"gpu-model": "v100"} }, "no node pool gpu-model=v100"},
		{"another label", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"} }, "spec.template.spec.nodeSelector[kubernetes.io/hostname]"},
		{"a pool and more", func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{"gpu-model": "t4", "kubernetes.io/hostname": "n1"}
		}, "one granted node pool"},
		{"a node by name", func(s *corev1.PodSpec) { s.NodeName = "n1" }, "spec.template.spec.nodeName"},
		{"node affinity", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		}, "spec.template.spec.affinity.nodeAffinity"},
	} {
		req := admissionRequest(admissionv1.Create, "twin-c1", sp(tt.mutate), nil)
		req.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:ferry-tenant-c1:ferry-consumer"}
		resp := v.Handle(context.Background(), req)
		switch {
		case tt.denied == "" && !resp.Allowed:
			t.Errorf("%s: denied: %s", tt.name, resp.Result.Message)
		case tt.denied != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tt.denied)):
			t.Errorf("%s: allowed %v, message %q, want a denial with %q", tt.name, resp.Allowed, resp.Result.Message, tt.denied)
		case tt.denied != "" && resp.Result.Code != 422:
			t.Errorf("%s: code %d, want 422 (a permanent refusal)", tt.name, resp.Result.Code)
		}
	}
}
