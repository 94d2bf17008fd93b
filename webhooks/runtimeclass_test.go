package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestPodMutatorRuntimeClass: a pod of ferry's RuntimeClass goes to virtual
// nodes in a Local namespace, and is refused, saying why, in a namespace
// that is not offloaded.
func TestPodMutatorRuntimeClass(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = ferryv1alpha1.AddToScheme(scheme)
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: "shop"},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocal}}
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(nso).Build()}
	handle := func(ns string, pod *corev1.Pod) (admission.Response, *corev1.Pod) {
		raw, _ := json.Marshal(pod)
		resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}}})
		if !resp.Allowed {
			return resp, nil
		}
		ops, _ := json.Marshal(resp.Patches)
		patch, err := jsonpatchv4.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatal(err)
		}
		out := &corev1.Pod{}
		if err := json.Unmarshal(patched, out); err != nil {
			t.Fatal(err)
		}
		return resp, out
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		RuntimeClassName: new(ferryv1alpha1.RuntimeClassVirtual), Containers: []corev1.Container{{Name: "web", Image: "web"}}}}

	resp, out := handle("shop", pod)
	if !resp.Allowed {
		t.Fatalf("a pod of RuntimeClass ferry in a Local namespace: refused: %v", resp.Result)
	}
	if got := out.Annotations[AnnotationAppliedPolicy]; !strings.HasPrefix(got, "strategy=Remote") {
		t.Errorf("applied policy %q, want strategy=Remote", got)
	}
	if !placement.ToleratesVirtualNodes(out.Spec.Tolerations) {
		t.Errorf("no virtual-node toleration: %v", out.Spec.Tolerations)
	}
	for _, n := range testNodes {
		if got, want := matches(t, out.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, n), strings.HasPrefix(n.Name, "virtual"); got != want {
			t.Errorf("node %s admitted %v, want %v", n.Name, got, want)
		}
	}

	remote := pod.DeepCopy()
	remote.Annotations = map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote", ferryv1alpha1.AnnotationRemoteRuntimeClass: "kata"}
	if resp, _ := handle("shop", remote); !resp.Allowed {
		t.Errorf("RuntimeClass ferry, annotated Remote and a remote RuntimeClass, in a Local namespace: refused: %v", resp.Result)
	}
	local := pod.DeepCopy()
	local.Annotations = map[string]string{placement.AnnotationPodOffloadingStrategy: "Local"}
	if resp, _ := handle("shop", local); resp.Allowed || !strings.Contains(resp.Result.Message, `spec.runtimeClassName "ferry" runs the pod on virtual nodes`) {
		t.Errorf("RuntimeClass ferry annotated Local: allowed %v, %q", resp.Allowed, resp.Result.Message)
	}
	badClass := pod.DeepCopy()
	badClass.Annotations = map[string]string{ferryv1alpha1.AnnotationRemoteRuntimeClass: "Not_A_Name"}
	if resp, _ := handle("shop", badClass); resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.annotations[ferry.io/remote-runtime-class]") {
		t.Errorf("a malformed remote RuntimeClass: allowed %v, %q", resp.Allowed, resp.Result.Message)
	}

	resp, _ = handle("other", pod)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "namespace other is not offloaded") || !strings.Contains(resp.Result.Message, "spec.runtimeClassName") {
		t.Errorf("RuntimeClass ferry in a namespace not offloaded: allowed %v, %q; want refused naming the field and the namespace", resp.Allowed, resp.Result.Message)
	}
	other := pod.DeepCopy()
	other.Spec.RuntimeClassName = new("gvisor")
	resp, out = handle("shop", other)
	if !resp.Allowed || !strings.HasPrefix(out.Annotations[AnnotationAppliedPolicy], "strategy=Local") {
		t.Errorf("another RuntimeClass in a Local namespace: allowed %v, %v; want placed by Local", resp.Allowed, out.Annotations)
	}
}
