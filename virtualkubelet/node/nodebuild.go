package node

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// KubeletVersion is what virtual nodes report as their kubelet version: the
// Kubernetes version ferry is built against, marked as ferry's (it stays a
// valid semantic version for tools that parse it).
const KubeletVersion = "v1.36.4-ferry"

// Labels every virtual node carries besides ferry's own, as a kubelet sets
// them on a real node.
const (
	labelHostname = corev1.LabelHostname
	labelOS       = corev1.LabelOSStable
	labelArch     = corev1.LabelArchStable
)

// Reasons of the resource-pressure conditions, which a virtual node never has.
const (
	reasonNoMemoryPressure = "ProviderHasSufficientMemory"
	reasonNoDiskPressure   = "ProviderHasNoDiskPressure"
	reasonNoPIDPressure    = "ProviderHasSufficientPID"
)

// NodeName is the name of the Node a VirtualNode registers: spec.nodeName,
// or the VirtualNode's own name.
func NodeName(vn *ferryv1alpha1.VirtualNode) string {
	return vn.Node()
}

// NodeLabels are the Node's labels: spec.labels (the provider's region and
// zone when its nodes agree on them, see grant.SuggestedLabels), then
// ferry's and the kubelet's well-known ones, which spec.labels cannot
// override: among them topology.ferry.io/cluster, the provider's ClusterID,
// the topology key spreading pods across clusters.
func NodeLabels(vn *ferryv1alpha1.VirtualNode) map[string]string {
	labels := make(map[string]string, len(vn.Spec.Labels)+6)
	maps.Copy(labels, vn.Spec.Labels)
	labels[ferryv1alpha1.LabelNodeType] = ferryv1alpha1.NodeTypeVirtual
	labels[ferryv1alpha1.LabelClusterID] = string(vn.Spec.ClusterID)
	labels[ferryv1alpha1.LabelTopologyCluster] = string(vn.Spec.ClusterID)
	labels[labelHostname] = NodeName(vn)
	labels[labelOS] = "linux"
	labels[labelArch] = "amd64"
	return labels
}

// DroppedLabels are the labels still to remove from the Node once ferry's
// labels change from before to after: those of pending (not removed yet)
// and of before that after no longer has, less any after has again.
func DroppedLabels(pending map[string]bool, before, after map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range pending {
		out[k] = true
	}
	for k := range before {
		out[k] = true
	}
	for k := range after {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// NodeAnnotations are the Node's annotations: the JSON of spec.nodeShapes
// under ferry.io/node-shapes (for RemoteFit) and of spec.storageClasses
// under ferry.io/storage-classes (for the storage fabric and DataGravity),
// each absent when the grant lists none.
func NodeAnnotations(vn *ferryv1alpha1.VirtualNode) (map[string]string, error) {
	annotations := map[string]string{}
	if len(vn.Spec.NodeShapes) > 0 {
		shapes, err := json.Marshal(vn.Spec.NodeShapes)
		if err != nil {
			return nil, fmt.Errorf("encode node shapes of virtual node %s/%s: %w", vn.Namespace, vn.Name, err)
		}
		annotations[ferryv1alpha1.AnnotationNodeShapes] = string(shapes)
	}
	if len(vn.Spec.StorageClasses) > 0 {
		classes, err := json.Marshal(vn.Spec.StorageClasses)
		if err != nil {
			return nil, fmt.Errorf("encode storage classes of virtual node %s/%s: %w", vn.Namespace, vn.Name, err)
		}
		annotations[ferryv1alpha1.AnnotationStorageClasses] = string(classes)
	}
	return annotations, nil
}

// VirtualNodeTaint is the NoExecute taint every virtual node carries.
func VirtualNodeTaint() corev1.Taint {
	return corev1.Taint{Key: ferryv1alpha1.TaintVirtualNode, Effect: corev1.TaintEffectNoExecute}
}

// NodeTaints are the taints ferry manages on the Node: its NoExecute
// virtual-node taint, then spec.taints (less any repeat of ferry's).
func NodeTaints(vn *ferryv1alpha1.VirtualNode) []corev1.Taint {
	own := VirtualNodeTaint()
	taints := []corev1.Taint{own}
	for _, t := range vn.Spec.Taints {
		if sameTaint(t, own) {
			continue
		}
		taints = append(taints, t)
	}
	return taints
}

// Endpoint is where the Node's kubelet API is reached.
type Endpoint struct {
	IP   string
	Port int32
}

// BuildNode is the Node standing for vn with the provider's health h;
// started is when the virtual kubelet started (the pressure conditions'
// transition time); ep is its kubelet API.
func BuildNode(vn *ferryv1alpha1.VirtualNode, h Health, started time.Time, ep Endpoint) (*corev1.Node, error) {
	annotations, err := NodeAnnotations(vn)
	if err != nil {
		return nil, err
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(vn),
			Labels:      NodeLabels(vn),
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{
			Taints: NodeTaints(vn),
		},
		Status: corev1.NodeStatus{
			Capacity:    vn.Spec.Resources.DeepCopy(),
			Allocatable: vn.Spec.Resources.DeepCopy(),
			Conditions:  nodeConditions(h, started),
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ep.IP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{
				KubeletEndpoint: corev1.DaemonEndpoint{Port: ep.Port},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:  KubeletVersion,
				OperatingSystem: "linux",
				Architecture:    "amd64",
			},
		},
	}, nil
}

// nodeConditions are the Node's conditions. An unreachable provider makes
// Ready Unknown, as the node lifecycle controller reports a kubelet it cannot
// hear: the node is not known to be broken, its pods may well run. The
// lifecycle controller then puts the standard node.kubernetes.io/unreachable
// taints on it, and pods without a toleration are evicted after their
// tolerationSeconds.
func nodeConditions(h Health, started time.Time) []corev1.NodeCondition {
	ready := corev1.ConditionUnknown
	if h.Ready {
		ready = corev1.ConditionTrue
	}
	since := metav1.NewTime(started.Truncate(time.Second))
	return []corev1.NodeCondition{
		{
			Type: corev1.NodeReady, Status: ready, Reason: h.Reason, Message: h.Message,
			LastTransitionTime: metav1.NewTime(h.Since.Truncate(time.Second)),
		},
		{
			Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: reasonNoMemoryPressure,
			Message: "a virtual node has no memory pressure", LastTransitionTime: since,
		},
		{
			Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: reasonNoDiskPressure,
			Message: "a virtual node has no disk pressure", LastTransitionTime: since,
		},
		{
			Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: reasonNoPIDPressure,
			Message: "a virtual node has no PID pressure", LastTransitionTime: since,
		},
	}
}

// nodeReportEqual says whether two built Nodes report the same thing through
// the node controller (labels, annotations, status), heartbeats aside.
func nodeReportEqual(a, b *corev1.Node) bool {
	if a == nil || b == nil {
		return a == b
	}
	strip := func(n *corev1.Node) corev1.Node {
		c := corev1.Node{}
		c.Labels, c.Annotations = n.Labels, n.Annotations
		n.Status.DeepCopyInto(&c.Status)
		for i := range c.Status.Conditions {
			c.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return c
	}
	sa, sb := strip(a), strip(b)
	return apiequality.Semantic.DeepEqual(sa.Labels, sb.Labels) &&
		apiequality.Semantic.DeepEqual(sa.Annotations, sb.Annotations) &&
		apiequality.Semantic.DeepEqual(sa.Status, sb.Status)
}

// sameTaint says whether two taints are the same taint: key and effect.
func sameTaint(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }

// MergeTaints is the Node's taint list once ferry's managed taints are
// applied to current: taints others put there (the node lifecycle
// controller's not-ready taints, an administrator's) are kept, the ones
// ferry managed before (previous) and no longer wants are removed, and the
// managed ones are set. changed says whether the result differs from current
// (ignoring order and the managed taints' TimeAdded).
func MergeTaints(current, previous, managed []corev1.Taint) (merged []corev1.Taint, changed bool) {
	isManaged := func(t corev1.Taint, list []corev1.Taint) bool {
		for _, m := range list {
			if sameTaint(t, m) {
				return true
			}
		}
		return false
	}
	for _, t := range current {
		if t.Key == ferryv1alpha1.TaintVirtualNode || isManaged(t, previous) || isManaged(t, managed) {
			continue
		}
		merged = append(merged, t)
	}
	merged = append(merged, managed...)
	if len(merged) != len(current) {
		return merged, true
	}
	for _, m := range merged {
		found := false
		for _, c := range current {
			if sameTaint(m, c) && m.Value == c.Value {
				found = true
				break
			}
		}
		if !found {
			return merged, true
		}
	}
	return merged, false
}

// taintsEqual says whether two managed taint lists are the same, in order.
func taintsEqual(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameTaint(a[i], b[i]) || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}
