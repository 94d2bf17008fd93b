package offloading

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// boundPod is a pod as the consumer's admission and scheduler leave it on a
// virtual node.
func boundPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "ferry.io/internal": "x"},
			Annotations: map[string]string{"note": "kept", "ferry.io/decision": "dropped"}},
		Spec: corev1.PodSpec{
			NodeName:          "ferry-provider",
			NodeSelector:      map[string]string{"ferry.io/type": "virtual-node"},
			SchedulerName:     "ferry-scheduler",
			PriorityClassName: "high", Priority: new(int32(1000)),
			Overhead:           corev1.ResourceList{corev1.ResourceCPU: {}},
			ServiceAccountName: "web", DeprecatedServiceAccount: "web",
			Affinity: &corev1.Affinity{
				NodeAffinity:    &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}},
				PodAntiAffinity: &corev1.PodAntiAffinity{},
			},
			Tolerations: []corev1.Toleration{
				{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "gpu", Operator: corev1.TolerationOpExists},
			},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}},
			},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde"}}}},
			Containers: []corev1.Container{{Name: "web", Image: "nginx", VolumeMounts: []corev1.VolumeMount{
				{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
				{Name: "config", MountPath: "/etc/web"},
			}}},
		},
	}
}

func TestShadowPodForStripsWhatOnlyTheConsumerMeans(t *testing.T) {
	pod := boundPod()
	before := pod.DeepCopy()
	sp, err := ShadowPodFor(pod, "home", "shop-home", false, nil)
	if err != nil {
		t.Fatal(err)
	}

	if !equality.Semantic.DeepEqual(pod, before) {
		t.Fatal("ShadowPodFor changed its input")
	}
	if sp.Name != "web-1" || sp.Namespace != "shop-home" {
		t.Errorf("shadow pod %s/%s, want shop-home/web-1", sp.Namespace, sp.Name)
	}
	wantLabels := map[string]string{
		ferryv1alpha1.LabelOriginCluster: "home", ferryv1alpha1.LabelOriginNamespace: "shop",
		ferryv1alpha1.LabelOriginName: "web-1", ferryv1alpha1.LabelOriginUID: "uid-1",
		ferryv1alpha1.LabelOriginNode: "ferry-provider",
	}
	if !equality.Semantic.DeepEqual(sp.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", sp.Labels, wantLabels)
	}
	if len(sp.Finalizers) != 1 || sp.Finalizers[0] != ferryv1alpha1.ShadowPodFinalizer {
		t.Errorf("finalizers %v, want the shadow pod finalizer", sp.Finalizers)
	}
	meta := sp.Spec.Template.Metadata
	if meta.Labels["app"] != "web" || meta.Labels["ferry.io/internal"] != "" || meta.Annotations["note"] != "kept" || meta.Annotations["ferry.io/decision"] != "" {
		t.Errorf("template metadata %+v: want user keys kept and ferry.io/ keys dropped", meta)
	}
	spec := sp.Spec.Template.Spec
	switch {
	case spec.NodeName != "", spec.NodeSelector != nil, spec.SchedulerName != "":
		t.Errorf("node placement kept: nodeName %q nodeSelector %v schedulerName %q", spec.NodeName, spec.NodeSelector, spec.SchedulerName)
	case spec.Priority != nil, spec.PriorityClassName != "", spec.Overhead != nil:
		t.Error("priority or overhead kept: the provider's admission sets them")
	case spec.Affinity == nil || spec.Affinity.NodeAffinity != nil || spec.Affinity.PodAntiAffinity == nil:
		t.Errorf("affinity %+v: want node affinity dropped, pod anti-affinity kept", spec.Affinity)
	case spec.ServiceAccountName != "default" || spec.DeprecatedServiceAccount != "" || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken:
		t.Errorf("service account %q automount %v: want the provider's default without a token", spec.ServiceAccountName, spec.AutomountServiceAccountToken)
	case len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "gpu":
		t.Errorf("tolerations %v: want only the user's gpu toleration", spec.Tolerations)
	case len(spec.Volumes) != 1 || spec.Volumes[0].Name != "config":
		t.Errorf("volumes %v: want the token volume dropped", spec.Volumes)
	case len(spec.Containers[0].VolumeMounts) != 1 || spec.Containers[0].VolumeMounts[0].Name != "config" || len(spec.InitContainers[0].VolumeMounts) != 0:
		t.Errorf("mounts %v / %v: want the token mounts dropped", spec.Containers[0].VolumeMounts, spec.InitContainers[0].VolumeMounts)
	}
	if again, _ := ShadowPodFor(pod, "home", "shop-home", false, nil); !equality.Semantic.DeepEqual(again, sp) || sp.Annotations[AnnotationTemplateHash] == "" {
		t.Error("ShadowPodFor is not deterministic: every resync would update the shadow pod")
	}
	pod.Labels["tier"] = "gold"
	if changed, _ := ShadowPodFor(pod, "home", "shop-home", false, nil); changed.Annotations[AnnotationTemplateHash] == sp.Annotations[AnnotationTemplateHash] {
		t.Error("a label change does not change the template hash: it would not reach the provider")
	}
}

// TestShadowPodForRuntimeClass: ferry's RuntimeClass never reaches the
// provider; the pod's ferry.io/remote-runtime-class names the provider's.
func TestShadowPodForRuntimeClass(t *testing.T) {
	for _, tt := range []struct {
		name       string
		class      *string
		annotation string
		want       string // "" for none
	}{
		{"RuntimeClass ferry: the provider's default", new(ferryv1alpha1.RuntimeClassVirtual), "", ""},
		{"RuntimeClass ferry, annotated: the annotated one", new(ferryv1alpha1.RuntimeClassVirtual), "kata", "kata"},
		{"another RuntimeClass: kept", new("gvisor"), "", "gvisor"},
		{"another RuntimeClass, annotated: the annotated one", new("gvisor"), "kata", "kata"},
		{"none: none", nil, "", ""},
	} {
		pod := boundPod()
		pod.Spec.RuntimeClassName = tt.class
		if tt.annotation != "" {
			pod.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass] = tt.annotation
		}
		sp, err := ShadowPodFor(pod, "home", "shop-home", false, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := ""
		if rc := sp.Spec.Template.Spec.RuntimeClassName; rc != nil {
			got = *rc
			if got == "" {
				t.Errorf("%s: an empty runtimeClassName, want none", tt.name)
			}
		}
		if got != tt.want {
			t.Errorf("%s: remote runtimeClassName %q, want %q", tt.name, got, tt.want)
		}
		if _, ok := sp.Spec.Template.Metadata.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass]; ok {
			t.Errorf("%s: the annotation reached the provider", tt.name)
		}
	}
	pod := boundPod()
	pod.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass] = "Not_A_Name"
	if _, err := ShadowPodFor(pod, "home", "shop-home", false, nil); err == nil || !strings.Contains(err.Error(), "ferry.io/remote-runtime-class") {
		t.Errorf("a malformed remote RuntimeClass: %v, want an error naming the annotation", err)
	}
}

func TestRefuse(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		field  string
	}{
		{"plain pod", func(*corev1.Pod) {}, ""},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, "spec.hostNetwork"},
		{"host PID", func(p *corev1.Pod) { p.Spec.HostPID = true }, "spec.hostPID"},
		{"host IPC", func(p *corev1.Pod) { p.Spec.HostIPC = true }, "spec.hostIPC"},
		{"host path", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "spec.volumes[2].hostPath"},
		{"malformed remote RuntimeClass", func(p *corev1.Pod) {
			p.Annotations[ferryv1alpha1.AnnotationRemoteRuntimeClass] = "Not_A_Name"
		}, "metadata.annotations[ferry.io/remote-runtime-class]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := boundPod()
			tt.mutate(pod)
			r := Refuse(pod)
			switch {
			case tt.field == "" && r != nil:
				t.Errorf("refused: %v", r)
			case tt.field != "" && (r == nil || r.Field != tt.field):
				t.Errorf("Refuse = %v, want a refusal naming %s", r, tt.field)
			}
		})
	}
}

func TestShadowPodForMountsTheReflectedToken(t *testing.T) {
	pod := boundPod()
	pod.Spec.Volumes[0].Projected.DefaultMode = new(int32(0o440))
	sp, err := ShadowPodFor(pod, "home", "shop-home", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := sp.Spec.Template.Spec
	if len(spec.Volumes) != 2 {
		t.Fatalf("volumes = %v, want the token volume kept (as a Secret) and config", spec.Volumes)
	}
	v := spec.Volumes[0]
	if v.Name != "kube-api-access-abcde" || v.Projected != nil || v.Secret == nil ||
		v.Secret.SecretName != "ferry-token-web" || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440 {
		t.Errorf("token volume = %+v, want secret ferry-token-web with mode 0440", v)
	}
	if m := spec.Containers[0].VolumeMounts; len(m) != 2 || m[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
		t.Errorf("mounts = %v, want the token still mounted where the pod expects it", m)
	}
	if spec.ServiceAccountName != remoteServiceAccount || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("service account %q automount %v: want the provider's default one, without a provider token", spec.ServiceAccountName, spec.AutomountServiceAccountToken)
	}
	without, _ := ShadowPodFor(pod, "home", "shop-home", false, nil)
	if without.Annotations[AnnotationTemplateHash] == sp.Annotations[AnnotationTemplateHash] {
		t.Error("the template hash does not tell the token volume apart")
	}
}

func TestServiceAccountTokenSecret(t *testing.T) {
	if got := ServiceAccountTokenSecret("web"); got != "ferry-token-web" {
		t.Errorf("ServiceAccountTokenSecret(web) = %q", got)
	}
	long := strings.Repeat("a", 250)
	got := ServiceAccountTokenSecret(long)
	if len(got) > 253 || !strings.HasPrefix(got, "ferry-token-") || got == ServiceAccountTokenSecret(long+"b") {
		t.Errorf("ServiceAccountTokenSecret(250 chars) = %q: want a distinct name of at most 253 characters", got)
	}
}

func TestShadowPodForPointsPodsAtTheConsumerAPIServer(t *testing.T) {
	pod := boundPod()
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "own", Image: "x",
		Env: []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "elsewhere"}}})
	api := &APIServerAccess{Address: "10.67.0.0", Port: 6443}
	sp, err := ShadowPodFor(pod, "home", "shop-home", true, api)
	if err != nil {
		t.Fatal(err)
	}
	spec := sp.Spec.Template.Spec
	if len(spec.HostAliases) != 1 || spec.HostAliases[0].IP != "10.67.0.0" || spec.HostAliases[0].Hostnames[0] != "kubernetes.default" {
		t.Errorf("hostAliases %v", spec.HostAliases)
	}
	env := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, e := range c.Env {
			out[e.Name] = e.Value
		}
		return out
	}
	for _, c := range append(spec.InitContainers, spec.Containers[0]) {
		if e := env(c); e["KUBERNETES_SERVICE_HOST"] != "kubernetes.default" || e["KUBERNETES_SERVICE_PORT"] != "6443" {
			t.Errorf("container %s env %v", c.Name, e)
		}
	}
	if e := env(spec.Containers[len(spec.Containers)-1]); e["KUBERNETES_SERVICE_HOST"] != "elsewhere" || e["KUBERNETES_SERVICE_PORT"] != "" {
		t.Errorf("a container that sets the variables itself is left alone: %v", e)
	}

	pod.Annotations = map[string]string{ferryv1alpha1.AnnotationConsumerAPIServer: "false"}
	optOut, _ := ShadowPodFor(pod, "home", "shop-home", true, api)
	if optOut.Spec.Template.Spec.HostAliases != nil {
		t.Errorf("opted-out pod got hostAliases %v", optOut.Spec.Template.Spec.HostAliases)
	}
	unknown, _ := ShadowPodFor(boundPod(), "home", "shop-home", true, nil)
	if unknown.Spec.Template.Spec.HostAliases != nil {
		t.Errorf("no address known: hostAliases %v", unknown.Spec.Template.Spec.HostAliases)
	}
}

func TestShadowPodInPoolSelectsThePoolAndNothingOfTheUsers(t *testing.T) {
	pod := boundPod()
	pod.Spec.NodeName = "ferry-provider-a100-0123abcd"
	pod.Spec.NodeSelector = map[string]string{"gpu-model": "a100", "team": "ml"}
	pool := &ferryv1alpha1.VirtualNodePool{LabelKey: "gpu-model", Value: "a100"}
	sp, err := ShadowPodInPool(pod, "home", "shop-home", false, nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	spec := sp.Spec.Template.Spec
	if want := map[string]string{"gpu-model": "a100"}; !equality.Semantic.DeepEqual(spec.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want only the pool's %v", spec.NodeSelector, want)
	}
	if spec.NodeName != "" || (spec.Affinity != nil && spec.Affinity.NodeAffinity != nil) {
		t.Errorf("the consumer's node constraints reached the provider: nodeName %q, affinity %+v", spec.NodeName, spec.Affinity)
	}
	if got := sp.Labels[ferryv1alpha1.LabelOriginNode]; got != pod.Spec.NodeName {
		t.Errorf("origin-node label = %q, want %q", got, pod.Spec.NodeName)
	}
	plain, err := ShadowPodFor(pod, "home", "shop-home", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.Template.Spec.NodeSelector != nil {
		t.Errorf("without a pool, nodeSelector = %v", plain.Spec.Template.Spec.NodeSelector)
	}
	if plain.Annotations[AnnotationTemplateHash] == sp.Annotations[AnnotationTemplateHash] {
		t.Error("the pool's selector does not change the template hash")
	}
}

func TestOwnShadowPodLeavesOtherPoolsShadowPodsAlone(t *testing.T) {
	sp := func(labels map[string]string) *ferryv1alpha1.ShadowPod {
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	if !OwnShadowPod(sp(map[string]string{ferryv1alpha1.LabelOriginNode: "ferry-p-a"}), "ferry-p-a") {
		t.Error("a node's own ShadowPod is not its own")
	}
	if OwnShadowPod(sp(map[string]string{ferryv1alpha1.LabelOriginNode: "ferry-p-b"}), "ferry-p-a") {
		t.Error("another pool's ShadowPod counts as this node's: it would delete it as an orphan")
	}
	if !OwnShadowPod(sp(nil), "ferry-p") {
		t.Error("a ShadowPod made before origin-node labels is not its provider's node's")
	}
	long := boundPod()
	long.Spec.NodeName = "ferry-" + strings.Repeat("x", 63)
	made, err := ShadowPodFor(long, "home", "shop-home", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := made.Labels[ferryv1alpha1.LabelOriginNode]; ok {
		t.Error("a node name too long for a label value was set as one")
	}
}
