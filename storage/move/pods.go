package move

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// MoverPort is where the serve and relay pods listen.
const MoverPort = 7070

// EnvToken carries the secret a fetch must show the serve pod: a random
// value per serve pod, in its spec and in the fetch pods' (readable only to
// those who can read pods in the storage namespace or the twin namespace,
// who can read the data anyway).
const EnvToken = "FERRY_MOVER_TOKEN"

func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// envValue is the value of the variable name in pod's first container.
func envValue(pod *corev1.Pod, name string) string {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Labels on what a move makes.
const (
	// LabelVolumeMove names the VolumeMove (namespace.name) a pod or
	// claim was made for.
	LabelVolumeMove = "storage.ferry.io/volume-move"
	// LabelMoveRole is serve, fetch or relay.
	LabelMoveRole = "storage.ferry.io/volume-move-role"
	// originNodeNone, as a ShadowPod's origin node, makes sure no virtual
	// kubelet takes the mover's ShadowPods for its own (they stand for no
	// pod of this cluster).
	originNodeNone = "ferry-volume-move"
)

// side is one place a pod of the move runs: this cluster (in the storage
// namespace) or a provider (a ShadowPod in the claim's namespace's twin).
type side struct {
	cluster   ferryv1alpha1.ClusterID
	local     bool
	namespace string
	c         *Cluster
}

// moverPod is the pod (or ShadowPod template) of one role.
func (r *Reconciler) moverPod(mv *ferryv1alpha1.VolumeMove, name, role string, args []string, claim string, readOnly bool) *corev1.Pod {
	labels := map[string]string{LabelVolumeMove: mv.Namespace + "." + mv.Name, LabelMoveRole: role, ferryv1alpha1.LabelManagedBy: ferryv1alpha1.ManagedByStorage}
	c := corev1.Container{
		Name: "mover", Image: r.Options.Image, ImagePullPolicy: r.Options.PullPolicy,
		Args: args,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		// As root, so the copy keeps files' owners.
		SecurityContext:          &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false)},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		AutomountServiceAccountToken:  ptr.To(false),
		Containers:                    []corev1.Container{c},
	}
	if role != roleFetch {
		spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "mover", ContainerPort: MoverPort}}
		spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(MoverPort)}}, PeriodSeconds: 1}
	}
	if claim != "" {
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: readOnly}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
}

const (
	roleServe = "serve"
	roleFetch = "fetch"
	roleRelay = "relay"
)

// ensurePod creates the pod at s unless it exists, and returns it as it
// runs (nil while a provider has not made the real pod yet).
func (r *Reconciler) ensurePod(ctx context.Context, s side, pod *corev1.Pod) (*corev1.Pod, error) {
	got, err := r.getPod(ctx, s, pod.Name)
	if err != nil || got != nil {
		return got, err
	}
	if s.local {
		pod = pod.DeepCopy()
		pod.Namespace = s.namespace
		if err := s.c.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create pod %s/%s in cluster %s: %w", s.namespace, pod.Name, s.cluster, err)
		}
		return nil, nil
	}
	var sp ferryv1alpha1.ShadowPod
	err = s.c.Client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: pod.Name}, &sp)
	if err == nil {
		return nil, nil // its pod is on the way
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read ShadowPod %s/%s in cluster %s: %w", s.namespace, pod.Name, s.cluster, err)
	}
	labels := map[string]string{
		ferryv1alpha1.LabelOriginCluster: string(r.Options.ClusterID),
		ferryv1alpha1.LabelOriginNode:    originNodeNone,
	}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	sp = ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: s.namespace, Labels: labels},
		Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: r.Options.ClusterID, Template: ferryv1alpha1.ShadowPodTemplate{
			Metadata: ferryv1alpha1.PodMetadata{Labels: pod.Labels}, Spec: pod.Spec}},
	}
	if err := s.c.Client.Create(ctx, &sp); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create ShadowPod %s/%s in cluster %s: %w", s.namespace, pod.Name, s.cluster, err)
	}
	return nil, nil
}

// getPod reads the pod named name at s; nil when there is none.
func (r *Reconciler) getPod(ctx context.Context, s side, name string) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := s.c.Client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read pod %s/%s in cluster %s: %w", s.namespace, name, s.cluster, err)
	}
	return &pod, nil
}

// deletePod deletes the pod (and, in a provider, its ShadowPod) at s.
func (r *Reconciler) deletePod(ctx context.Context, s side, name string) error {
	if !s.local {
		sp := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}}
		if err := s.c.Client.Delete(ctx, sp); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ShadowPod %s/%s in cluster %s: %w", s.namespace, name, s.cluster, err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}}
	if err := s.c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("delete pod %s/%s in cluster %s: %w", s.namespace, name, s.cluster, err)
	}
	return nil
}

// lastLog is the tail of the pod's log at s ("" when it cannot be read).
func (r *Reconciler) lastLog(ctx context.Context, s side, name string) string {
	if s.c.Kube == nil {
		return ""
	}
	raw, err := s.c.Kube.CoreV1().Pods(s.namespace).GetLogs(name, &corev1.PodLogOptions{TailLines: ptr.To[int64](3)}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(raw)
}

// podNames are the names of a move's pods.
func podName(mv *ferryv1alpha1.VolumeMove, role string, attempt int32) string {
	base := "ferry-move-" + strings.ReplaceAll(string(mv.UID), "-", "")[:12]
	if role == roleFetch {
		return fmt.Sprintf("%s-%s-%d", base, role, attempt)
	}
	return base + "-" + role
}
