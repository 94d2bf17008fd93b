package app

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// statusFixture is a cluster "home" with three peers: eu, peered both ways
// (home offloads two pods to it, it offloads one ShadowPod here); us, a
// provider whose API server stopped answering; and lab, a consumer that has
// not asked for resources yet.
func statusFixture(now time.Time) *clusterStatus {
	at := func(ago time.Duration) metav1.Time { return metav1.Time{Time: now.Add(-ago)} }
	cond := func(t string, ok bool, reason string, ago time.Duration) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: s, Reason: reason, LastTransitionTime: at(ago)}
	}
	res := func(cpu, mem, pods string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods)}
	}
	fc := func(id string, role ferryv1alpha1.PeeringRole, age time.Duration, conds ...metav1.Condition) ferryv1alpha1.ForeignCluster {
		f := ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: id, CreationTimestamp: at(age)},
			Spec:   ferryv1alpha1.ForeignClusterSpec{ClusterID: ferryv1alpha1.ClusterID(id), Role: role, HealthCheck: ferryv1alpha1.HealthCheck{PeriodSeconds: 10}},
			Status: ferryv1alpha1.ForeignClusterStatus{Conditions: conds}}
		if f.Spec.IsProvider() {
			f.Spec.APIServerURL = "https://" + id + ".example:6443"
			f.Status.APIServerVersion = "v1.36.4"
		}
		return f
	}
	pod := func(ns, name, cpu string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Phase: phase},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
	}
	vn := func(id, ready string) ferryv1alpha1.VirtualNode {
		v := ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-" + id},
			Spec: ferryv1alpha1.VirtualNodeSpec{ClusterID: ferryv1alpha1.ClusterID(id), Resources: res("16200m", "29Gi", "110")}}
		if ready != "" {
			v.Status.Conditions = []metav1.Condition{cond(ferryv1alpha1.VirtualNodeNodeReady, ready == "True", "ProviderUnreachable", time.Minute)}
		}
		return v
	}
	nc := func(id, role string, spec ferryv1alpha1.NetworkConfigSpec, status ferryv1alpha1.NetworkConfigStatus) ferryv1alpha1.NetworkConfig {
		spec.ClusterID = ferryv1alpha1.ClusterID(id)
		return ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: id,
			Labels: map[string]string{ferryv1alpha1.LabelNetworkConfig: role}}, Spec: spec, Status: status}
	}
	return &clusterStatus{NetworkConfigs: []ferryv1alpha1.NetworkConfig{
		nc("home", ferryv1alpha1.NetworkConfigLocal, ferryv1alpha1.NetworkConfigSpec{PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", ExternalCIDR: "10.64.0.0/16"}, ferryv1alpha1.NetworkConfigStatus{}),
		nc("eu", ferryv1alpha1.NetworkConfigPeer, ferryv1alpha1.NetworkConfigSpec{PodCIDR: "10.244.0.0/16"},
			ferryv1alpha1.NetworkConfigStatus{RemappedPodCIDR: "10.65.0.0/16", PodCIDRAtPeer: "10.66.0.0/16", APIServerAddressAtPeer: "10.67.0.0"}),
	}, peerSources: peerSources{
		ForeignClusters: []ferryv1alpha1.ForeignCluster{
			fc("us", ferryv1alpha1.RoleProvider, 3*time.Hour,
				cond(ferryv1alpha1.ForeignClusterAPIServerReady, false, "Unreachable", 90*time.Second),
				cond(ferryv1alpha1.ForeignClusterResourcesGranted, true, "Granted", time.Hour)),
			fc("eu", ferryv1alpha1.RoleConsumerAndProvider, 2*time.Hour,
				cond(ferryv1alpha1.ForeignClusterAPIServerReady, true, "Ready", 2*time.Hour),
				cond(ferryv1alpha1.ForeignClusterNetworkReady, true, "TunnelUp", time.Hour)),
			fc("lab", ferryv1alpha1.RoleConsumer, 5*time.Minute),
		},
		VirtualNodes: []ferryv1alpha1.VirtualNode{vn("eu", "True"), vn("us", "False")},
		PodsByNode: map[string][]corev1.Pod{"ferry-eu": {
			pod("shop", "web-1", "250m", corev1.PodRunning), pod("shop", "web-2", "250m", corev1.PodPending),
			pod("shop", "done", "4", corev1.PodSucceeded), // holds nothing any more
		}},
		Offloadings: []ferryv1alpha1.NamespaceOffloading{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}, Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu"}, {ClusterID: "us"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "batch"}, Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu"}}}},
		},
		ResourceSlices: []ferryv1alpha1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-tenant-eu", Name: "eu"},
			Spec: ferryv1alpha1.ResourceSliceSpec{ConsumerClusterID: "eu"}, Status: ferryv1alpha1.ResourceSliceStatus{Resources: res("7200m", "12Gi", "100")}}},
		ShadowPods: []ferryv1alpha1.ShadowPod{{ObjectMeta: metav1.ObjectMeta{Namespace: "api-eu", Name: "api-1"},
			Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "eu", Template: ferryv1alpha1.ShadowPodTemplate{Spec: pod("", "", "500m", "").Spec}}}},
		TwinNamespaces: []ferryv1alpha1.TwinNamespace{{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-tenant-eu", Name: "api-eu"}, Spec: ferryv1alpha1.TwinNamespaceSpec{ConsumerClusterID: "eu"}}},
		PeeringQuotas: []ferryv1alpha1.PeeringQuota{{Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "eu", Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			Status: ferryv1alpha1.PeeringQuotaStatus{Used: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		Volumes: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Labels: map[string]string{ferryv1alpha1.LabelClusterID: "eu"},
			Annotations: map[string]string{storage.AnnotationRemoteClaim: "shop-home/data", storage.AnnotationRemotePhase: "Bound"}},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: ferryv1alpha1.StorageClassVirtual, ClaimRef: &corev1.ObjectReference{Namespace: "shop", Name: "data"},
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
	}}
}

// TestStatusTables renders status as -o table and -o wide and compares
// with the golden files (go test -run TestStatusTables -update rewrites
// them).
func TestStatusTablesShowEachDirectionInItsOwnColumns(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, format := range []string{outputTable, outputWide} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			if err := printStatus(&out, &output{format: format}, statusFixture(now), now); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "status-"+format+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Errorf("-o %s:\n%s\nwant (%s):\n%s", format, out.String(), golden, want)
			}
		})
	}
}

func TestQuantityTextRoundsOddByteCountsToMi(t *testing.T) {
	for in, want := range map[string]string{"30923764531": "29491Mi", "29Gi": "29Gi", "64Mi": "64Mi", "0": "0", "500m": "500m", "1000": "1k", "16200m": "16200m", "110": "110"} {
		if got := quantityText(resource.MustParse(in)); got != want {
			t.Errorf("quantityText(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestStatusSumsAProvidersNodePools: a provider split into node pools is one
// row, its virtual nodes counted and their grants and pods summed.
func TestStatusSumsAProvidersNodePools(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	fc := ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "gpu", Role: ferryv1alpha1.RoleProvider, NodePools: &ferryv1alpha1.NodePools{LabelKey: "gpu-model"}}}
	vn := func(name, value, cpu string, ready bool) ferryv1alpha1.VirtualNode {
		s := metav1.ConditionFalse
		if ready {
			s = metav1.ConditionTrue
		}
		return ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: ferryv1alpha1.VirtualNodeSpec{ClusterID: "gpu", Pool: &ferryv1alpha1.VirtualNodePool{LabelKey: "gpu-model", Value: value},
				Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			Status: ferryv1alpha1.VirtualNodeStatus{Conditions: []metav1.Condition{{Type: ferryv1alpha1.VirtualNodeNodeReady, Status: s}}}}
	}
	pod := func(cpu string) corev1.Pod {
		return corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	src := peerSources{
		ForeignClusters: []ferryv1alpha1.ForeignCluster{fc},
		VirtualNodes:    []ferryv1alpha1.VirtualNode{vn("ferry-gpu-a100-1", "a100", "8", true), vn("ferry-gpu-t4-2", "t4", "2", false)},
		PodsByNode:      map[string][]corev1.Pod{"ferry-gpu-a100-1": {pod("1")}, "ferry-gpu-t4-2": {pod("500m")}},
	}
	row := peerRow(&fc, src, now)
	if row[3] != "2 virtual nodes (node pools by gpu-model), 1 Ready" {
		t.Errorf("virtual node column = %q", row[3])
	}
	if row[4] != "1500m/10" {
		t.Errorf("out cpu = %q, want both pools' pods over both grants, 1500m/10", row[4])
	}
}
