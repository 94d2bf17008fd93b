package app

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/ferry-io/ferry/api/grant"
	"github.com/ferry-io/ferry/api/placement"
	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

// peerSources are the objects of this cluster the peers table is computed
// from. OUT, what this cluster offloads to a provider: its VirtualNode (the
// grant), the pods bound to it (the use), the NamespaceOffloadings selecting
// it. IN, what a consumer offloads to this cluster: its ResourceSlice (the
// grant), its ShadowPods (the use), its TwinNamespaces and PeeringQuota.
type peerSources struct {
	ForeignClusters []ferryv1alpha1.ForeignCluster
	VirtualNodes    []ferryv1alpha1.VirtualNode
	// PodsByNode are the pods bound to each virtual node, by node name.
	PodsByNode     map[string][]corev1.Pod
	Offloadings    []ferryv1alpha1.NamespaceOffloading
	ResourceSlices []ferryv1alpha1.ResourceSlice
	ShadowPods     []ferryv1alpha1.ShadowPod
	TwinNamespaces []ferryv1alpha1.TwinNamespace
	PeeringQuotas  []ferryv1alpha1.PeeringQuota
	Volumes        []corev1.PersistentVolume
}

// peerColumns are the peers table's columns. OUT columns say what this
// cluster offloads to the peer (the peer is its provider), IN columns what
// the peer offloads to this cluster (the peer is its consumer); a peer
// peered both ways fills both. Resource cells are used/granted.
var peerColumns = []metav1.TableColumnDefinition{
	column("Peer", 0, "the peer's cluster ID"),
	column("Role", 0, "what the peer is to this cluster: provider (OUT), consumer (IN) or both"),
	column("Health", 0, "the peer's API server as this cluster's probes of a provider find it (a consumer is not probed)"),
	column("Virtual Node", 0, "OUT: the node standing for the provider here, and its readiness"),
	column("Out CPU", 0, "OUT: cpu requested by this cluster's pods on the virtual node / cpu the provider granted"),
	column("Out Memory", 0, "OUT: memory used / granted"),
	column("Out Pods", 0, "OUT: pods on the virtual node / pods granted"),
	column("In CPU", 0, "IN: cpu requested by the consumer's ShadowPods here / cpu this cluster granted it"),
	column("In Memory", 0, "IN: memory used / granted"),
	column("In Pods", 0, "IN: the consumer's ShadowPods here / pods granted"),
	column("Network", 0, "the network fabric's tunnel and mappings to the peer (NetworkReady)"),
	column("Age", 0, "since the peer's ForeignCluster was made"),
	column("Health Since", 1, "since the health last changed (the condition's last transition)"),
	column("Probe", 1, "how often the provider's API server is probed"),
	column("Out Namespaces", 1, "OUT: this cluster's namespaces offloaded to the provider"),
	column("In Namespaces", 1, "IN: the consumer's twin namespaces here"),
	column("In Quota", 1, "IN: the consumer's PeeringQuota, used/limit"),
	column("Claims There", 1, "OUT: claims of ferry's storage class whose data lives at the provider (how many of them Bound there)"),
	column("API Server", 1, "the provider's API server URL and version"),
}

// peersTable is one row per peer, sorted by cluster ID.
func peersTable(src peerSources, now time.Time) *metav1.Table {
	fcs := slices.Clone(src.ForeignClusters)
	slices.SortFunc(fcs, func(a, b ferryv1alpha1.ForeignCluster) int {
		return strings.Compare(string(a.Spec.ClusterID), string(b.Spec.ClusterID))
	})
	var rows [][]string
	for i := range fcs {
		rows = append(rows, peerRow(&fcs[i], src, now))
	}
	return stringTable(peerColumns, rows)
}

func peerRow(fc *ferryv1alpha1.ForeignCluster, src peerSources, now time.Time) []string {
	id := fc.Spec.ClusterID
	health, since, probe, apiServer := "-", "-", "-", "-"
	node, outCPU, outMem, outPods, outNamespaces, storage := "-", "-", "-", "-", "-", "-"
	if fc.Spec.IsProvider() {
		health, since = "Unknown", "-"
		if c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterAPIServerReady); c != nil {
			health = conditionText(c)
			since = duration.HumanDuration(now.Sub(c.LastTransitionTime.Time))
		}
		probe = fmt.Sprintf("every %ds", fc.Spec.HealthCheck.PeriodSeconds)
		apiServer = fc.Spec.APIServerURL
		if fc.Status.APIServerVersion != "" {
			apiServer += " (" + fc.Status.APIServerVersion + ")"
		}
		node = "none yet"
		if c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterResourcesGranted); c != nil && c.Status != metav1.ConditionTrue {
			node = "none (" + c.Reason + ")"
		}
		if vns := virtualNodesOf(src.VirtualNodes, id); len(vns) > 0 {
			used, granted := corev1.ResourceList{}, corev1.ResourceList{}
			ready := 0
			for _, vn := range vns {
				addTo(used, podsUsage(src.PodsByNode[vn.Node()]))
				addTo(granted, vn.Spec.Resources)
				if virtualNodeReadiness(vn) == "Ready" {
					ready++
				}
			}
			node = vns[0].Node() + " " + virtualNodeReadiness(vns[0])
			for _, vn := range vns {
				if vn.Spec.Pool != nil {
					node = fmt.Sprintf("%d virtual nodes (node pools by %s), %d Ready", len(vns), vn.Spec.Pool.LabelKey, ready)
					break
				}
			}
			outCPU = usedOf(used, granted, corev1.ResourceCPU)
			outMem = usedOf(used, granted, corev1.ResourceMemory)
			outPods = usedOf(used, granted, corev1.ResourcePods)
		}
		outNamespaces = namesOrDash(offloadedNamespaces(src.Offloadings, id))
		storage = claimsAt(src.Volumes, id)
	}
	inCPU, inMem, inPods, inNamespaces, inQuota := "-", "-", "-", "-", "-"
	if fc.Spec.IsConsumer() {
		granted, asked := corev1.ResourceList(nil), false
		for _, s := range src.ResourceSlices {
			if s.Spec.ConsumerClusterID == id {
				granted, asked = s.Status.Resources, true
			}
		}
		used := shadowPodsUsage(src.ShadowPods, id)
		inCPU, inMem, inPods = usedOf(used, granted, corev1.ResourceCPU), usedOf(used, granted, corev1.ResourceMemory), usedOf(used, granted, corev1.ResourcePods)
		if !asked {
			inCPU, inMem, inPods = "not asked", "not asked", "not asked"
		}
		var twins []string
		for _, t := range src.TwinNamespaces {
			if t.Spec.ConsumerClusterID == id {
				twins = append(twins, t.Name)
			}
		}
		inNamespaces = namesOrDash(twins)
		inQuota = quotaOf(src.PeeringQuotas, id)
	}
	return []string{string(id), roleName(fc.Spec.Role), health, node, outCPU, outMem, outPods, inCPU, inMem, inPods,
		conditionStatus(fc, ferryv1alpha1.ForeignClusterNetworkReady), duration.HumanDuration(now.Sub(fc.CreationTimestamp.Time)),
		since, probe, outNamespaces, inNamespaces, inQuota, storage, apiServer}
}

// roleName is what the peer is to this cluster, in the table's words.
func roleName(r ferryv1alpha1.PeeringRole) string {
	switch r {
	case ferryv1alpha1.RoleProvider:
		return "provider"
	case ferryv1alpha1.RoleConsumer:
		return "consumer"
	case ferryv1alpha1.RoleConsumerAndProvider:
		return "both"
	}
	return string(r)
}

func conditionText(c *metav1.Condition) string {
	if c.Status == metav1.ConditionTrue {
		return "Ready"
	}
	return "NotReady (" + c.Reason + ")"
}

// virtualNodesOf are the virtual nodes standing for provider id: one, or
// one per node pool (all with spec.pool set).
func virtualNodesOf(vns []ferryv1alpha1.VirtualNode, id ferryv1alpha1.ClusterID) []*ferryv1alpha1.VirtualNode {
	var out []*ferryv1alpha1.VirtualNode
	for i := range vns {
		if vns[i].Spec.ClusterID == id {
			out = append(out, &vns[i])
		}
	}
	return out
}

func virtualNodeReadiness(vn *ferryv1alpha1.VirtualNode) string {
	c := meta.FindStatusCondition(vn.Status.Conditions, ferryv1alpha1.VirtualNodeNodeReady)
	if c == nil {
		return "Starting"
	}
	return conditionText(c)
}

// podsUsage sums what the non-terminal pods hold on their node, as the
// scheduler counts it (one "pods" slot each).
func podsUsage(pods []corev1.Pod) corev1.ResourceList {
	used := corev1.ResourceList{}
	for i := range pods {
		if p := &pods[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
			addTo(used, grant.PodRequests(p))
		}
	}
	return used
}

// shadowPodsUsage sums the requests of the consumer's ShadowPods that count
// (as its quota counts them).
func shadowPodsUsage(sps []ferryv1alpha1.ShadowPod, consumer ferryv1alpha1.ClusterID) corev1.ResourceList {
	used := corev1.ResourceList{}
	for i := range sps {
		if sps[i].Spec.ConsumerClusterID == consumer && quota.Counts(&sps[i]) {
			addTo(used, quota.ShadowPodRequests(&sps[i]))
		}
	}
	return used
}

func addTo(sum, add corev1.ResourceList) {
	for name, q := range add {
		s := sum[name]
		s.Add(q)
		sum[name] = s
	}
}

// usedOf is "used/granted" of one resource; "-" stands for a resource not
// granted.
func usedOf(used, granted corev1.ResourceList, name corev1.ResourceName) string {
	u, g := quantityText(used[name]), "-"
	if q, ok := granted[name]; ok {
		g = quantityText(q)
	}
	return u + "/" + g
}

// quantityText is q as kubectl shows it, except a byte count of a Mi or
// more that is no whole Mi (a grant is a share, to the byte), which is
// rounded down to Mi, as kubectl top shows memory.
func quantityText(q resource.Quantity) string {
	const mi = 1 << 20
	if q.Format == resource.DecimalSI && q.CmpInt64(mi) >= 0 && q.Value()%mi != 0 && q.Value()%1000 != 0 {
		return fmt.Sprintf("%dMi", q.Value()/mi)
	}
	return q.String()
}

// offloadedNamespaces are the namespaces whose NamespaceOffloading reaches
// the provider.
func offloadedNamespaces(nsos []ferryv1alpha1.NamespaceOffloading, id ferryv1alpha1.ClusterID) []string {
	var names []string
	for _, nso := range nsos {
		for _, c := range nso.Status.Clusters {
			if c.ClusterID == id {
				names = append(names, nso.Namespace)
				break
			}
		}
	}
	return names
}

func namesOrDash(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// quotaOf is the consumer's PeeringQuota as used/limit per limited
// resource, "-" without one.
func quotaOf(quotas []ferryv1alpha1.PeeringQuota, id ferryv1alpha1.ClusterID) string {
	for _, q := range quotas {
		if q.Spec.ConsumerClusterID != id {
			continue
		}
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(q.Spec.Limits)) {
			used, limit := q.Status.Used[name], q.Spec.Limits[name]
			parts = append(parts, fmt.Sprintf("%s %s/%s", name, used.String(), limit.String()))
		}
		if meta.IsStatusConditionTrue(q.Status.Conditions, ferryv1alpha1.PeeringQuotaExceeded) {
			parts = append(parts, "exceeded")
		}
		return strings.Join(parts, ", ")
	}
	return "-"
}

// claimsAt counts the claims of ferry's class whose data lives at the
// provider, and how many of them are bound there.
func claimsAt(pvs []corev1.PersistentVolume, id ferryv1alpha1.ClusterID) string {
	n, bound := 0, 0
	for i := range pvs {
		pv := &pvs[i]
		if pv.Spec.StorageClassName != ferryv1alpha1.StorageClassVirtual || pv.Spec.ClaimRef == nil || placement.VolumeCluster(pv) != id {
			continue
		}
		n++
		if pv.Annotations[storage.AnnotationRemotePhase] == string(corev1.ClaimBound) {
			bound++
		}
	}
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%d Bound)", n, bound)
}
