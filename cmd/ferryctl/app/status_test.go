package app

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestNetworkRowsShowCIDRsAndRemaps(t *testing.T) {
	nc := func(ns, name, role string, spec ferryv1alpha1.NetworkConfigSpec, status ferryv1alpha1.NetworkConfigStatus) ferryv1alpha1.NetworkConfig {
		return ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{ferryv1alpha1.LabelNetworkConfig: role}},
			Spec: spec, Status: status}
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	remapped := []metav1.Condition{{Type: ferryv1alpha1.NetworkConfigRemapped, Status: metav1.ConditionTrue, Reason: "Remapped"}}
	ncs := []ferryv1alpha1.NetworkConfig{
		nc("ferry-system", "home", "local", ferryv1alpha1.NetworkConfigSpec{ClusterID: "home", PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", ExternalCIDR: "10.64.0.0/16"},
			ferryv1alpha1.NetworkConfigStatus{Gateway: &ferryv1alpha1.GatewayStatus{Replica: "ferry-gateway-7d9f-abcde"}}),
		nc("ferry-system", "us", "peer", ferryv1alpha1.NetworkConfigSpec{ClusterID: "us", PodCIDR: "10.244.0.0/16"},
			ferryv1alpha1.NetworkConfigStatus{Conditions: []metav1.Condition{{Type: ferryv1alpha1.NetworkConfigRemapped, Status: metav1.ConditionFalse, Reason: "PoolExhausted"}}}),
		// eu is consumer and provider: its tenant copy knows less.
		nc("ferry-tenant-eu", "eu", "peer", ferryv1alpha1.NetworkConfigSpec{ClusterID: "eu", PodCIDR: "10.244.0.0/16"},
			ferryv1alpha1.NetworkConfigStatus{Conditions: remapped, RemappedPodCIDR: "10.65.0.0/16"}),
		nc("ferry-system", "eu", "peer", ferryv1alpha1.NetworkConfigSpec{ClusterID: "eu", PodCIDR: "10.244.0.0/16"},
			ferryv1alpha1.NetworkConfigStatus{Conditions: append(slices.Clone(remapped), metav1.Condition{Type: ferryv1alpha1.NetworkConfigTunnelUp, Status: metav1.ConditionTrue, Reason: "Handshake"}),
				RemappedPodCIDR: "10.65.0.0/16", PodCIDRAtPeer: "10.66.0.0/16", APIServerAddressAtPeer: "10.67.0.0",
				Tunnel: &ferryv1alpha1.TunnelStatus{LastHandshakeTime: &metav1.Time{Time: now.Add(-42 * time.Second)}, RoundTripTime: &metav1.Duration{Duration: 712345 * time.Nanosecond}}}),
		nc("ferry-tenant-eu", "home", "published", ferryv1alpha1.NetworkConfigSpec{ClusterID: "home", PodCIDR: "10.244.0.0/16"}, ferryv1alpha1.NetworkConfigStatus{}),
	}
	fcs := []ferryv1alpha1.ForeignCluster{{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "eu"},
		Status: ferryv1alpha1.ForeignClusterStatus{Conditions: []metav1.Condition{{Type: ferryv1alpha1.ForeignClusterNetworkReady, Status: metav1.ConditionTrue, Reason: "TunnelUp"}}}}}
	local, rows := networkRows(ncs, fcs, now)
	if want := []string{"10.244.0.0/16", "10.96.0.0/12", "10.64.0.0/16", "ferry-gateway-7d9f-abcde"}; !equality.Semantic.DeepEqual(local, want) {
		t.Errorf("local = %v, want %v", local, want)
	}
	want := [][]string{
		{"eu", "10.244.0.0/16", "10.65.0.0/16", "10.66.0.0/16", "10.67.0.0", "up", "42s ago", "710µs", "Ready"},
		{"us", "10.244.0.0/16", "not mapped (PoolExhausted)", "-", "-", "-", "-", "-", "-"},
	}
	if !equality.Semantic.DeepEqual(rows, want) {
		t.Errorf("rows =\n%v\nwant\n%v", rows, want)
	}
}
