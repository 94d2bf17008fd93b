package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/netlab"
)

func TestHealthFollowsTheLastReconcile(t *testing.T) {
	var h Health
	if err := h.Check(nil); err == nil {
		t.Fatal("ready before any reconcile finished")
	}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	h.Record(nil, t0)
	if err := h.Check(nil); err != nil {
		t.Fatalf("not ready after a reconcile succeeded: %v", err)
	}
	h.Record(context.DeadlineExceeded, t0.Add(time.Second))
	h.Record(context.Canceled, t0.Add(2*time.Second))
	err := h.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "the last 2 reconciles failed (since 2026-11-26T12:00:01Z)") || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("after two failures: %v", err)
	}
	h.Record(nil, t0.Add(3*time.Second))
	if err := h.Check(nil); err != nil {
		t.Fatalf("not ready again after a success: %v", err)
	}
}

// A gateway whose data plane fails is not ready, and says why.
func TestGatewayNotReadyWhileItsDataPlaneFails(t *testing.T) {
	ctx := context.Background()
	local, peer := configs(t, mustKey(t))
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(local, &peer).
		WithStatusSubresource(&ferryv1alpha1.NetworkConfig{}).Build()
	now := func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }
	r := &Reconciler{Client: c, ClusterID: "home", Now: now, Health: &Health{},
		// No namespace: every change to the data plane fails.
		Settings: Settings{EndpointAddress: "198.19.0.1", EndpointPort: 51820, KeySecret: "ferry-gateway-key",
			DataPlane: &DataPlane{Links: Links{Prefix: "ferry"}, Log: logr.Discard()}}}
	r.keys = &keyStore{Client: c, key: client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: r.KeySecret}, grace: time.Minute, now: now}
	r.metrics = newCollector(r)
	if _, err := r.Reconcile(ctx, request); err == nil {
		t.Fatal("reconcile succeeded without a network namespace")
	}
	err := r.Health.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "install the tunnel, routes and NAT") {
		t.Fatalf("readiness after a failed reconcile: %v", err)
	}
}

// A route agent is ready once its routes are as the gateway wants, and not
// while installing them fails.
func TestRouteAgentNotReadyWhileItsRoutesFail(t *testing.T) {
	netlab.Require(t)
	ctx := context.Background()
	local, peer := configs(t, mustKey(t))
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(local, &peer).Build()
	node := &NodePlane{NS: netlab.Namespace(t, "node"), Links: Links{Prefix: netlab.Prefix()}, VXLANPort: DefaultVXLANPort, VNI: DefaultVNI}
	r := &AgentReconciler{Client: c, ClusterID: "home", Node: node, Now: time.Now, Health: &Health{}}
	if err := r.Health.Check(nil); err == nil {
		t.Fatal("ready before the first reconcile")
	}
	// No gateway yet: nothing to route, which succeeds.
	if _, err := r.Reconcile(ctx, request); err != nil {
		t.Fatal(err)
	}
	if err := r.Health.Check(nil); err != nil {
		t.Fatalf("not ready with nothing to route: %v", err)
	}
	// A gateway at an address that is no IP address: the reconcile fails.
	local.Status.Gateway = &ferryv1alpha1.GatewayStatus{OverlayAddress: "not-an-address", VXLANPort: DefaultVXLANPort, VNI: DefaultVNI, MTU: 1420}
	if err := c.Update(ctx, local); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, request); err == nil {
		t.Fatal("reconcile succeeded with a bad gateway address")
	}
	if err := r.Health.Check(nil); err == nil || !strings.Contains(err.Error(), "not-an-address") {
		t.Fatalf("readiness after a failed reconcile: %v", err)
	}
}
