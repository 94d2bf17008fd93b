// Package plugintest builds the nodes and pods the plugins' unit tests
// share.
package plugintest

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// RealNode is a plain node.
func RealNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

// VirtualNode is a virtual node of cluster with extra labels (key, value
// pairs) and, when shapes is not nil, a node-shape summary.
func VirtualNode(name string, cluster ferryv1alpha1.ClusterID, shapes []ferryv1alpha1.NodeShape, kv ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: string(cluster)}}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	if shapes != nil {
		b, err := json.Marshal(shapes)
		if err != nil {
			panic(err)
		}
		n.Annotations = map[string]string{ferryv1alpha1.AnnotationNodeShapes: string(b)}
	}
	return n
}

// Tolerating makes pod tolerate virtual nodes.
func Tolerating(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists})
	return pod
}

// Pod is a pod of namespace with annotations (key, value pairs).
func Pod(namespace, name string, kv ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if len(kv) > 0 {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
	return p
}

// Info wraps node for Filter and Score.
func Info(node *corev1.Node) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	return ni
}
