package kubeletapi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// remotePod names the twin of a local pod on the provider.
type remotePod struct {
	// local is the local pod.
	local *corev1.Pod
	// Namespace and Name of the twin; the twin carries the local pod's UID
	// in its origin label.
	Namespace, Name string
}

// resolver finds the provider pod standing for a local pod bound to this
// node. It reads both API servers on every call: calls are rare (a user's
// kubectl), and a fresh answer never names a pod that has since been
// replaced.
type resolver struct {
	nodeName string
	provider ferryv1alpha1.ClusterID
	local    kubernetes.Interface
	localCRs client.Reader
	remote   kubernetes.Interface
}

// twinNamespace is the namespace's twin on this node's provider, from its
// NamespaceOffloading's status.
func (r *resolver) twinNamespace(ctx context.Context, namespace string) (string, error) {
	var nso ferryv1alpha1.NamespaceOffloading
	key := types.NamespacedName{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}
	if err := r.localCRs.Get(ctx, key, &nso); err != nil {
		if apierrors.IsNotFound(err) {
			return "", apierrors.NewServiceUnavailable(fmt.Sprintf("namespace %s is not offloaded", namespace))
		}
		return "", fmt.Errorf("NamespaceOffloading %s: %w", key, err)
	}
	for _, c := range nso.Status.Clusters {
		if c.ClusterID == r.provider && c.TwinNamespace != "" {
			return c.TwinNamespace, nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("namespace %s has no twin namespace in cluster %s", namespace, r.provider))
}

func (r *resolver) resolve(ctx context.Context, namespace, name string) (*remotePod, error) {
	pod, err := r.local.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if pod.Spec.NodeName != r.nodeName {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), fmt.Sprintf("%s/%s on node %s", namespace, name, r.nodeName))
	}
	twin, err := r.twinNamespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	remote, err := r.remote.CoreV1().Pods(twin).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s/%s does not run on the provider (yet)", namespace, name))
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s on the provider: %w", twin, name, err)
	}
	if types.UID(remote.Labels[ferryv1alpha1.LabelOriginUID]) != pod.UID {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s/%s on the provider belongs to an earlier pod of the same name", twin, name))
	}
	return &remotePod{local: pod, Namespace: twin, Name: name}, nil
}

// pods lists the local pods bound to the node, as a kubelet's /pods does.
func (s *Server) pods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := s.local.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.cfg.NodeName).String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of node %s: %w", s.cfg.NodeName, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
