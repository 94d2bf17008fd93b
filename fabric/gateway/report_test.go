package gateway

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// A tunnel with a fresh handshake is up; when its round trip cannot be
// measured, TunnelUp says why instead of leaving the round trip out
// silently, and a later probe that succeeds clears it.
func TestReportSaysWhyTheRoundTripIsMissing(t *testing.T) {
	ctx := context.Background()
	peerKey := mustKey(t)
	nc := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "eu"},
		Spec: ferryv1alpha1.NetworkConfigSpec{ClusterID: "eu"}}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(nc).WithStatusSubresource(&ferryv1alpha1.NetworkConfig{}).Build()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: c}
	plan := Plan{Peers: []Peer{{ClusterID: "eu", PublicKey: peerKey.PublicKey(), Endpoint: "192.0.2.7:51820",
		Probe: netip.MustParseAddr("10.79.255.250")}}}
	dev := &wgtypes.Device{Peers: []wgtypes.Peer{{PublicKey: peerKey.PublicKey(), LastHandshakeTime: now.Add(-5 * time.Second)}}}
	tunnelUp := func() (*metav1.Condition, *ferryv1alpha1.TunnelStatus) {
		t.Helper()
		var got ferryv1alpha1.NetworkConfig
		if err := c.Get(ctx, client.ObjectKeyFromObject(nc), &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.NetworkConfigTunnelUp), got.Status.Tunnel
	}
	report := func() {
		t.Helper()
		var list ferryv1alpha1.NetworkConfigList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		if err := r.report(ctx, list.Items, plan, Skipped{}, Applied{Kind: "userspace"}, dev, now); err != nil {
			t.Fatal(err)
		}
	}

	r.probeErrs.Store("eu", "no echo reply from 10.79.255.250: i/o timeout")
	report()
	cond, tunnel := tunnelUp()
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "round-trip probe of 10.79.255.250 failed: no echo reply") {
		t.Fatalf("TunnelUp %+v, want True saying why the probe failed", cond)
	}
	if tunnel == nil || tunnel.RoundTripTime != nil || tunnel.LastHandshakeTime == nil {
		t.Fatalf("tunnel %+v, want a handshake and no round trip", tunnel)
	}

	r.probeErrs.Delete("eu")
	r.probes.Store("eu", 700*time.Microsecond)
	report()
	cond, tunnel = tunnelUp()
	if cond == nil || cond.Status != metav1.ConditionTrue || strings.Contains(cond.Message, "probe") {
		t.Fatalf("TunnelUp %+v, want True without a probe failure", cond)
	}
	if tunnel == nil || tunnel.RoundTripTime == nil || tunnel.RoundTripTime.Duration != 700*time.Microsecond {
		t.Fatalf("tunnel %+v, want the round trip", tunnel)
	}
}
