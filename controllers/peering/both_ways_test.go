package peering

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// A peer both consumer and provider has one ForeignCluster, whose
// conditions the peer controller writes (the provider direction): the
// tenant controller must not write its own Authenticated and
// ResourcesGranted over them, or the two would rewrite each other forever.
func TestTenantStatusLeavesAPeerThatIsAlsoAProviderToThePeerController(t *testing.T) {
	ctx := t.Context()
	peerConds := []metav1.Condition{
		{Type: ferryv1alpha1.ForeignClusterAuthenticated, Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Type: ferryv1alpha1.ForeignClusterResourcesGranted, Status: metav1.ConditionTrue, Reason: "Granted", Message: "cpu 4, memory 8Gi, pods 110"},
	}
	for role, wantReason := range map[ferryv1alpha1.PeeringRole]string{
		ferryv1alpha1.RoleConsumerAndProvider: "Granted",  // the peer controller's, kept
		ferryv1alpha1.RoleConsumer:            "NotAsked", // the tenant controller's own
	} {
		fc := &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "eu"},
			Spec:   ferryv1alpha1.ForeignClusterSpec{ClusterID: "eu", Role: role},
			Status: ferryv1alpha1.ForeignClusterStatus{Conditions: peerConds}}
		c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(fc).WithStatusSubresource(fc).Build()
		r := &TenantReconciler{Client: c}
		if err := r.updateStatus(ctx, fc, TenantNamespace("eu")); err != nil {
			t.Fatal(err)
		}
		var got ferryv1alpha1.ForeignCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), &got); err != nil {
			t.Fatal(err)
		}
		if g := meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.ForeignClusterResourcesGranted); g == nil || g.Reason != wantReason {
			t.Errorf("role %s: ResourcesGranted %+v, want reason %s", role, g, wantReason)
		}
	}
}

// When a peer peered both ways stops being a provider, the peer controller
// removes what it reported of it as one, so a Consumer's ForeignCluster does
// not keep a stale VirtualNodeReady or APIServerReady.
func TestPeerControllerForgetsItsConditionsWhenAPeerStopsBeingAProvider(t *testing.T) {
	ctx := t.Context()
	fc := &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "eu"},
		Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "eu", Role: ferryv1alpha1.RoleConsumer},
		Status: ferryv1alpha1.ForeignClusterStatus{APIServerVersion: "v1.36.4", RemoteTenantNamespace: "ferry-tenant-home", Conditions: []metav1.Condition{
			{Type: ferryv1alpha1.ForeignClusterAPIServerReady, Status: metav1.ConditionTrue, Reason: "Ready"},
			{Type: ferryv1alpha1.ForeignClusterVirtualNodeReady, Status: metav1.ConditionTrue, Reason: "Ready"},
			{Type: ferryv1alpha1.ForeignClusterNetworkReady, Status: metav1.ConditionTrue, Reason: "TunnelUp"},
		}}}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(fc).WithStatusSubresource(fc).Build()
	r := &PeerReconciler{Client: c}
	if err := r.forgetProviderStatus(ctx, fc); err != nil {
		t.Fatal(err)
	}
	var got ferryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKeyFromObject(fc), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != ferryv1alpha1.ForeignClusterNetworkReady || got.Status.APIServerVersion != "" || got.Status.RemoteTenantNamespace != "" {
		t.Errorf("status = %+v, want NetworkReady alone (the fabric's, both directions share it)", got.Status)
	}
}
