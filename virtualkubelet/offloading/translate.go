package offloading

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// serviceAccountVolumePrefix names the projected token volume the consumer's
// ServiceAccount admission adds to every pod; the token is the consumer's,
// useless (and not to be leaked) on the provider.
const serviceAccountVolumePrefix = "kube-api-access-"

// remoteServiceAccount is the provider ServiceAccount offloaded pods run as,
// with no token mounted: it exists in every namespace.
const remoteServiceAccount = "default"

// Refusal says why a pod cannot be offloaded, naming the field.
type Refusal struct {
	Field   string
	Message string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Message }

// Refuse reports why pod must not run on a provider, or nil: it would reach
// into the provider's nodes (host namespaces, host paths, host ports).
func Refuse(pod *corev1.Pod) *Refusal {
	spec := &pod.Spec
	switch {
	case spec.HostNetwork:
		return &Refusal{"spec.hostNetwork", "an offloaded pod cannot use the provider node's network namespace"}
	case spec.HostPID:
		return &Refusal{"spec.hostPID", "an offloaded pod cannot use the provider node's PID namespace"}
	case spec.HostIPC:
		return &Refusal{"spec.hostIPC", "an offloaded pod cannot use the provider node's IPC namespace"}
	}
	for i, v := range spec.Volumes {
		if v.HostPath != nil {
			return &Refusal{fmt.Sprintf("spec.volumes[%d].hostPath", i), fmt.Sprintf("volume %q: an offloaded pod cannot mount the provider node's files", v.Name)}
		}
	}
	if _, err := placement.RemoteRuntimeClass(pod.Annotations, spec.RuntimeClassName); err != nil {
		return &Refusal{err.Field, err.ErrorBody()}
	}
	return nil
}

// ShadowPodFor is the ShadowPod standing for pod in twinNamespace on behalf
// of consumer. It is deterministic, so comparing it with the ShadowPod on the
// provider tells whether the latter needs an update.
//
// Its annotation ferry.io/template-hash is a digest of the template: the
// template as stored by the provider (defaulted, pruned) need not compare
// equal to this one, the digest does.
//
// With tokens set, the service-account token volume the consumer's admission
// added is replaced by the Secret the reflection keeps in the twin namespace
// (ServiceAccountTokenSecret): the pod finds a token of its consumer service
// account where it expects one. Without, the volume is dropped.
//
// Its RuntimeClass is placement.RemoteRuntimeClass's: the pod's
// ferry.io/remote-runtime-class, none for a pod of ferry's RuntimeClass
// (the provider's default runtime), else the pod's own.
//
// With api set, and unless the pod's ferry.io/consumer-api-server
// annotation is "false", the pod's containers reach this cluster's API
// server instead of the provider's (see withConsumerAPIServer).
func ShadowPodFor(pod *corev1.Pod, consumer ferryv1alpha1.ClusterID, twinNamespace string, tokens bool, api *APIServerAccess) (*ferryv1alpha1.ShadowPod, error) {
	return ShadowPodInPool(pod, consumer, twinNamespace, tokens, api, nil)
}

// ShadowPodInPool is ShadowPodFor for a virtual node standing for a pool of
// the provider's nodes: the remote pod gets the pool's nodeSelector
// <labelKey>=<value> (and only it: the pod's own node constraints chose the
// virtual node, not a provider node), so it runs in its pool. Nil pool: no
// nodeSelector.
func ShadowPodInPool(pod *corev1.Pod, consumer ferryv1alpha1.ClusterID, twinNamespace string, tokens bool, api *APIServerAccess, pool *ferryv1alpha1.VirtualNodePool) (*ferryv1alpha1.ShadowPod, error) {
	template := ferryv1alpha1.ShadowPodTemplate{
		Metadata: ferryv1alpha1.PodMetadata{Labels: withoutFerryKeys(pod.Labels), Annotations: withoutFerryKeys(pod.Annotations)},
		Spec:     remoteSpec(&pod.Spec, tokens),
	}
	runtimeClass, ferr := placement.RemoteRuntimeClass(pod.Annotations, pod.Spec.RuntimeClassName)
	if ferr != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ferr)
	}
	template.Spec.RuntimeClassName = runtimeClass
	if pool != nil {
		template.Spec.NodeSelector = map[string]string{pool.LabelKey: pool.Value}
	}
	if cost, ok := pod.Annotations[placement.AnnotationPodDeletionCost]; ok && pod.Annotations[placement.AnnotationDeletionCostSet] == cost {
		// The scale-down order ferry gave the local pod (with its status
		// write): the remote copy has no ReplicaSet to order, and carrying
		// it would change the template, a ShadowPod update per pod.
		delete(template.Metadata.Annotations, placement.AnnotationPodDeletionCost)
		if len(template.Metadata.Annotations) == 0 {
			template.Metadata.Annotations = nil
		}
	}
	if api != nil && pod.Annotations[ferryv1alpha1.AnnotationConsumerAPIServer] != "false" {
		withConsumerAPIServer(&template.Spec, *api)
	}
	raw, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("encode the template of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	sum := sha256.Sum256(raw)
	return &ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pod.Name,
			Namespace:   twinNamespace,
			Labels:      originLabels(pod, consumer),
			Annotations: map[string]string{AnnotationTemplateHash: hex.EncodeToString(sum[:16])},
			Finalizers:  []string{ferryv1alpha1.ShadowPodFinalizer},
		},
		Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: consumer, Template: template},
	}, nil
}

// APIServerAccess is where pods in the provider reach the consumer's API
// server: the address the network fabric maps the consumer's kubernetes
// Service to, and its port.
type APIServerAccess struct {
	Address string
	Port    int32
}

// ConsumerAPIServerName is the name offloaded pods reach the consumer's API
// server by: the consumer's serving certificate covers it (kube-apiserver
// always includes kubernetes.default), and a host alias resolves it.
const ConsumerAPIServerName = "kubernetes.default"

// withConsumerAPIServer points in-cluster clients (client-go's
// InClusterConfig reads KUBERNETES_SERVICE_HOST and _PORT) at the consumer's
// API server: the two variables, set in every container that does not set
// them itself, name ConsumerAPIServerName, which a host alias resolves to
// the fabric's address. Container variables win over the ones the
// provider's kubelet adds for its own kubernetes Service.
func withConsumerAPIServer(spec *corev1.PodSpec, api APIServerAccess) {
	names := []string{ConsumerAPIServerName, ConsumerAPIServerName + ".svc"}
	spec.HostAliases = append(spec.HostAliases, corev1.HostAlias{IP: api.Address, Hostnames: names})
	port := strconv.Itoa(int(api.Port))
	set := func(cs []corev1.Container) {
		for i := range cs {
			if slices.ContainsFunc(cs[i].Env, func(e corev1.EnvVar) bool {
				return e.Name == "KUBERNETES_SERVICE_HOST" || e.Name == "KUBERNETES_SERVICE_PORT"
			}) {
				continue
			}
			cs[i].Env = append(cs[i].Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: ConsumerAPIServerName},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: port},
			)
		}
	}
	set(spec.InitContainers)
	set(spec.Containers)
}

// AnnotationTemplateHash is, on a ShadowPod, the digest of the template the
// virtual kubelet last wrote.
const AnnotationTemplateHash = "ferry.io/template-hash"

func originLabels(pod *corev1.Pod, consumer ferryv1alpha1.ClusterID) map[string]string {
	labels := map[string]string{
		ferryv1alpha1.LabelOriginCluster:   string(consumer),
		ferryv1alpha1.LabelOriginNamespace: pod.Namespace,
		ferryv1alpha1.LabelOriginName:      pod.Name,
		ferryv1alpha1.LabelOriginUID:       string(pod.UID),
	}
	if n := pod.Spec.NodeName; n != "" && len(validation.IsValidLabelValue(n)) == 0 {
		labels[ferryv1alpha1.LabelOriginNode] = n
	}
	return labels
}

// OwnShadowPod says whether the virtual kubelet of node handles sp: a
// ShadowPod labelled with another virtual node of the same provider (one
// pool's, when the provider is split into pools) is that one's.
func OwnShadowPod(sp *ferryv1alpha1.ShadowPod, node string) bool {
	origin, ok := sp.Labels[ferryv1alpha1.LabelOriginNode]
	return !ok || origin == node
}

// withoutFerryKeys drops ferry's own labels or annotations, which are not
// carried to the provider.
func withoutFerryKeys(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if strings.HasPrefix(k, ferryv1alpha1.KeyPrefix) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = v
	}
	return out
}

// ServiceAccountTokenSecret names the Secret, in a twin namespace, holding a
// token of the consumer's service account sa (keys token, ca.crt and
// namespace, as in the projected volume it replaces).
func ServiceAccountTokenSecret(sa string) string {
	const prefix = "ferry-token-"
	if len(prefix)+len(sa) <= validation.DNS1123SubdomainMaxLength {
		return prefix + sa
	}
	sum := sha256.Sum256([]byte(sa))
	return prefix + hex.EncodeToString(sum[:16])
}

// remoteSpec is the pod spec as the provider should run it: no node or
// consumer scheduling constraints (the provider schedules it afresh), nothing
// the consumer's admission added that the provider's adds again (priority,
// overhead), and the consumer's service account replaced by the provider
// namespace's default one without a provider token. The consumer's token
// volume is dropped, or with tokens set pointed at the Secret holding a
// token of the consumer service account.
func remoteSpec(in *corev1.PodSpec, tokens bool) corev1.PodSpec {
	spec := *in.DeepCopy()
	serviceAccount := spec.ServiceAccountName
	if serviceAccount == "" {
		serviceAccount = remoteServiceAccount
	}
	spec.NodeName = ""
	spec.NodeSelector = nil
	spec.SchedulerName = ""
	if spec.Affinity != nil {
		spec.Affinity.NodeAffinity = nil
		if spec.Affinity.PodAffinity == nil && spec.Affinity.PodAntiAffinity == nil {
			spec.Affinity = nil
		}
	}
	spec.Tolerations = remoteTolerations(spec.Tolerations)
	spec.Priority = nil
	spec.PriorityClassName = ""
	spec.PreemptionPolicy = nil
	spec.Overhead = nil
	spec.EphemeralContainers = nil
	spec.ServiceAccountName = remoteServiceAccount
	spec.DeprecatedServiceAccount = ""
	spec.AutomountServiceAccountToken = new(false)

	dropped := map[string]bool{}
	volumes := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if strings.HasPrefix(v.Name, serviceAccountVolumePrefix) && v.Projected != nil {
			if tokens {
				mode := v.Projected.DefaultMode
				v.VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: ServiceAccountTokenSecret(serviceAccount), DefaultMode: mode,
				}}
				volumes = append(volumes, v)
				continue
			}
			dropped[v.Name] = true
			continue
		}
		volumes = append(volumes, v)
	}
	spec.Volumes = volumes
	if len(spec.Volumes) == 0 {
		spec.Volumes = nil
	}
	for i := range spec.InitContainers {
		spec.InitContainers[i].VolumeMounts = withoutMounts(spec.InitContainers[i].VolumeMounts, dropped)
	}
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = withoutMounts(spec.Containers[i].VolumeMounts, dropped)
	}
	return spec
}

// remoteTolerations drops the tolerations only meaningful on the consumer:
// ferry's virtual-node taint and the not-ready/unreachable ones the
// consumer's admission added (the provider's admission adds its own).
func remoteTolerations(in []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range in {
		switch t.Key {
		case ferryv1alpha1.TaintVirtualNode, corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable:
			continue
		}
		out = append(out, t)
	}
	return out
}

func withoutMounts(in []corev1.VolumeMount, dropped map[string]bool) []corev1.VolumeMount {
	if len(dropped) == 0 {
		return in
	}
	var out []corev1.VolumeMount
	for _, m := range in {
		if !dropped[m.Name] {
			out = append(out, m)
		}
	}
	return out
}
