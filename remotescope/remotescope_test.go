package remotescope

import (
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// providerAllowing is a provider that lets the consumer list and watch
// cluster-wide the resources named "group/resource" in allowed, and counts
// the reviews it answers.
func providerAllowing(allowed ...string) (*fake.Clientset, *int) {
	c := fake.NewClientset()
	asked := new(int)
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*asked++
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attrs := r.Spec.ResourceAttributes
		for _, gr := range allowed {
			if gr == attrs.Group+"/"+attrs.Resource && attrs.Namespace == "" {
				r.Status.Allowed = true
			}
		}
		return true, r, nil
	})
	return c, asked
}

func TestResolve(t *testing.T) {
	watched := []schema.GroupResource{{Group: "ferry.io", Resource: "shadowpods"}, {Resource: "pods"}, {Resource: "configmaps"}}
	for _, tc := range []struct {
		name      string
		scope     Scope
		allowed   []string
		want      Scope
		wantAsked bool
	}{
		{name: "auto, every resource granted", scope: Auto, allowed: []string{"ferry.io/shadowpods", "/pods", "/configmaps"}, want: Cluster, wantAsked: true},
		{name: "empty is auto", allowed: []string{"ferry.io/shadowpods", "/pods", "/configmaps"}, want: Cluster, wantAsked: true},
		{name: "auto, the reflection's kinds only (an older grant)", scope: Auto, allowed: []string{"/configmaps"}, want: Namespace, wantAsked: true},
		{name: "auto, nothing granted", scope: Auto, want: Namespace, wantAsked: true},
		{name: "cluster is not asked", scope: Cluster, want: Cluster},
		{name: "namespace is not asked", scope: Namespace, allowed: []string{"ferry.io/shadowpods", "/pods", "/configmaps"}, want: Namespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, asked := providerAllowing(tc.allowed...)
			got, err := Resolve(t.Context(), c, tc.scope, watched)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || (*asked > 0) != tc.wantAsked {
				t.Errorf("Resolve(%q) = %q after %d reviews, want %q (asked: %v)", tc.scope, got, *asked, tc.want, tc.wantAsked)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []Scope{"", Auto, Cluster, Namespace} {
		if err := s.Validate("remote-scope"); err != nil {
			t.Errorf("Validate(%q) = %v", s, err)
		}
	}
	err := Scope("everywhere").Validate("remote-scope")
	if err == nil || !strings.Contains(err.Error(), `--remote-scope "everywhere" must be auto, cluster or namespace`) {
		t.Errorf("Validate(everywhere) = %v", err)
	}
}
