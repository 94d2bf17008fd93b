package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestRouteAgentNotReadyWhileItsReconcileFails: the route agent's readiness
// check reports its last reconcile's error (here its node plane refuses the
// routes), and turns ready once a reconcile succeeds.
func TestRouteAgentNotReadyWhileItsReconcileFails(t *testing.T) {
	local := &ferryv1alpha1.NetworkConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "home"},
		Spec:       ferryv1alpha1.NetworkConfigSpec{ClusterID: "home", PodCIDR: "10.1.0.0/16", ServiceCIDR: "10.2.0.0/16"},
		Status:     ferryv1alpha1.NetworkConfigStatus{Gateway: &ferryv1alpha1.GatewayStatus{OverlayAddress: "10.0.0.9", VXLANPort: 4799, VNI: 197, MTU: 1420}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(local).WithStatusSubresource(local).Build()
	agent := &AgentReconciler{Client: c, ClusterID: "home", Node: &NodePlane{closed: true}, Now: time.Now}
	l := &lastReconcile{}
	r := l.wrap(agent)
	if err := l.check(nil); err == nil || !strings.Contains(err.Error(), "no reconcile") {
		t.Errorf("readiness before any reconcile = %v, want not ready", err)
	}
	if _, err := r.Reconcile(context.Background(), request); err == nil {
		t.Fatal("reconcile with a closed node plane succeeded")
	}
	err := l.check(nil)
	if err == nil || !strings.Contains(err.Error(), "route peers' ranges to the gateway") {
		t.Errorf("readiness after a failed reconcile = %v, want its error", err)
	}
	t.Log(err)

	ok := l.wrap(reconcile.Func(func(context.Context, reconcile.Request) (ctrl.Result, error) { return ctrl.Result{}, nil }))
	if _, err := ok.Reconcile(context.Background(), request); err != nil {
		t.Fatal(err)
	}
	if err := l.check(nil); err != nil {
		t.Errorf("readiness after a reconcile that succeeded = %v", err)
	}
	failing := l.wrap(reconcile.Func(func(context.Context, reconcile.Request) (ctrl.Result, error) {
		return ctrl.Result{}, errors.New("setns: operation not permitted")
	}))
	_, _ = failing.Reconcile(context.Background(), request)
	if err := l.check(nil); err == nil || !strings.Contains(err.Error(), "setns: operation not permitted") {
		t.Errorf("readiness after a failure following a success = %v, want the failure", err)
	}
}
