// Package remotescope decides how a consumer watches a provider: one watch
// per kind for the whole provider, or one per kind and twin namespace. The
// virtual kubelet's pod offloading and reflection share the decision (a
// virtual kubelet asks the provider once), and the storage fabric's watch of
// provider claims makes the same one.
package remotescope

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// Scope says how the provider's objects are watched.
type Scope string

const (
	// Auto watches cluster-wide when the provider lets the consumer list
	// and watch every watched kind cluster-wide, per twin namespace
	// otherwise. It is decided once, when the virtual kubelet starts.
	Auto Scope = "auto"
	// Cluster keeps one watch per kind on the provider, selected by ferry's
	// origin-cluster label: the number of watches does not grow with the
	// offloaded namespaces. The provider must bind the consumer to the
	// ferry-reflection-reader ClusterRole (it can then list those kinds in
	// every namespace: grant it to consumers the provider trusts).
	Cluster Scope = "cluster"
	// Namespace keeps one watch per kind and twin namespace: all a consumer
	// bound to ferry-twin-namespace in its twin namespaces may do.
	Namespace Scope = "namespace"
)

// Validate reports a scope that is none of the three, naming flag.
func (s Scope) Validate(flag string) error {
	switch s {
	case "", Auto, Cluster, Namespace:
		return nil
	}
	return fmt.Errorf("--%s %q must be %s, %s or %s", flag, s, Auto, Cluster, Namespace)
}

// Resolve is the scope to watch resources with: s itself unless it is Auto
// (or empty), then Cluster when the provider lets the consumer list and
// watch every one of resources cluster-wide, Namespace otherwise.
func Resolve(ctx context.Context, provider kubernetes.Interface, s Scope, resources []schema.GroupResource) (Scope, error) {
	return ResolveWith(ctx, func(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
		return provider.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
	}, s, resources)
}

// Review asks the provider a SelfSubjectAccessReview and returns it answered.
type Review func(context.Context, *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error)

// ResolveWith is Resolve asking the provider through review (for callers
// holding a controller-runtime client rather than a clientset).
func ResolveWith(ctx context.Context, review Review, s Scope, resources []schema.GroupResource) (Scope, error) {
	if s != Auto && s != "" {
		return s, nil
	}
	for _, gr := range resources {
		for _, verb := range []string{"list", "watch"} {
			answer, err := review(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: gr.Group, Resource: gr.Resource,
				}},
			})
			if err != nil {
				return "", fmt.Errorf("ask the provider whether the consumer may %s %s cluster-wide: %w", verb, gr, err)
			}
			if !answer.Status.Allowed {
				return Namespace, nil
			}
		}
	}
	return Cluster, nil
}
