package peering

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// DeploymentLauncher runs each virtual kubelet as a one-replica Deployment
// beside its VirtualNode, owned by it, so deleting the VirtualNode removes it.
type DeploymentLauncher struct {
	client.Client
	// Image of ferry-virtual-kubelet. Only a consumer runs virtual kubelets,
	// and whether this cluster is one is known only once a ForeignCluster
	// says so: without an image, Ensure fails then, naming the flag, and a
	// cluster that only provides never needs one.
	Image string
	// ExtraArgs are appended to every virtual kubelet's flags.
	ExtraArgs []string
	// PullPolicy of the image (IfNotPresent when empty).
	PullPolicy corev1.PullPolicy
	// PullSecrets name Secrets, in the VirtualNode's namespace, holding
	// the registry credentials for Image (the chart's images.pullSecrets).
	PullSecrets []string
}

// kubeletAPIPort is where the virtual kubelet serves the kubelet API, and
// /healthz (HTTPS, without authentication, as a kubelet does).
const kubeletAPIPort = 10250

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// Ensure implements VirtualKubeletLauncher.
func (l *DeploymentLauncher) Ensure(ctx context.Context, vnKey types.NamespacedName) error {
	if l.Image == "" {
		return fmt.Errorf("no image to run the virtual kubelet of %s in: ferry-controller-manager was started without --virtual-kubelet-image (the chart's images.virtualKubelet), which a consumer needs with --virtual-kubelet-mode=deployment", vnKey)
	}
	var vn ferryv1alpha1.VirtualNode
	if err := l.Get(ctx, vnKey, &vn); err != nil {
		return fmt.Errorf("read VirtualNode %s: %w", vnKey, err)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deploymentName(vnKey), Namespace: vnKey.Namespace}}
	labels := map[string]string{"app.kubernetes.io/name": "ferry-virtual-kubelet", "app.kubernetes.io/instance": vnKey.Name}
	// The deployment controller writes the Deployment's status all the
	// time: a conflict is retried on the fresh object, not reported.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := controllerutil.CreateOrUpdate(ctx, l.Client, d, func() error {
			d.Labels = mergeLabels(d.Labels, labels)
			d.Spec.Replicas = ptr.To[int32](1)
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
			// One at a time: two virtual kubelets must never serve one node.
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			d.Spec.Template.Labels = labels
			l.podSpec(&d.Spec.Template.Spec, vnKey)
			return controllerutil.SetControllerReference(&vn, d, l.Scheme())
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("ensure virtual kubelet Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// podSpec fills the virtual kubelet's pod spec: its own identity, the
// image with its pull policy and secrets, probes on the kubelet API's
// /healthz, requests, and a securityContext PodSecurity restricted admits.
func (l *DeploymentLauncher) podSpec(spec *corev1.PodSpec, vnKey types.NamespacedName) {
	// Its own identity (VirtualKubeletIdentity), made by the peering
	// controller before it launches the virtual kubelet.
	spec.ServiceAccountName = VirtualKubeletIdentity(vnKey.Name)
	spec.ImagePullSecrets = nil
	for _, name := range l.PullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	spec.SecurityContext.RunAsNonRoot = ptr.To(true)
	spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	policy := l.PullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	// Ready once the kubelet API serves /healthz over HTTPS (it has its
	// serving certificate, so logs and exec work). Alive while its
	// listener accepts: a serving certificate that is never issued must not
	// restart a virtual kubelet that otherwise serves its node and pods.
	readiness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/healthz", Port: intstr.FromString("kubelet-api"), Scheme: corev1.URISchemeHTTPS}}}
	liveness := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
		Port: intstr.FromString("kubelet-api")}}, PeriodSeconds: 10, FailureThreshold: 6}
	spec.Containers = []corev1.Container{{
		Name:            "virtual-kubelet",
		Image:           l.Image,
		ImagePullPolicy: policy,
		Args: append([]string{
			"--virtual-node-namespace=" + vnKey.Namespace,
			"--virtual-node-name=" + vnKey.Name,
			// The API server reaches the kubelet API at the pod's IP.
			"--node-ip=$(POD_IP)",
		}, l.ExtraArgs...),
		Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}}},
		Ports:          []corev1.ContainerPort{{Name: "kubelet-api", ContainerPort: kubeletAPIPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: readiness,
		LivenessProbe:  liveness,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}}
}

// annotationRestartedAt, on a virtual kubelet Deployment's pod template,
// rolls it (as kubectl rollout restart does).
const annotationRestartedAt = "ferry.io/restarted-at"

// Restart implements VirtualKubeletLauncher by rolling the Deployment: its
// Recreate strategy ends the old pod before it makes the new one. (Deleting
// the Deployment and making it again would not: its old pods are collected
// in the background while the new Deployment already starts one.)
func (l *DeploymentLauncher) Restart(ctx context.Context, vnKey types.NamespacedName) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deploymentName(vnKey), Namespace: vnKey.Namespace}}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, annotationRestartedAt, time.Now().UTC().Format(time.RFC3339Nano))
	if err := l.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("restart virtual kubelet Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

// Remove implements VirtualKubeletLauncher.
func (l *DeploymentLauncher) Remove(ctx context.Context, vnKey types.NamespacedName) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deploymentName(vnKey), Namespace: vnKey.Namespace}}
	if err := l.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete virtual kubelet Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}

func deploymentName(vn types.NamespacedName) string { return VirtualKubeletIdentity(vn.Name) }
