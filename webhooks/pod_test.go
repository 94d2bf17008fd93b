package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestApplyIsIdempotentAndRecordsWhatItDid(t *testing.T) {
	eu := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "eu")}}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, "ssd")}}}}}}}}
	Apply(pod, Policy{Strategy: ferryv1alpha1.PodOffloadingRemote, ClusterSelector: eu})
	if got := pod.Annotations[AnnotationAppliedPolicy]; got != "strategy=Remote; added toleration, nodeAffinity" {
		t.Errorf("recorded %q", got)
	}
	if len(pod.Spec.Tolerations) != 1 || !placement.ToleratesVirtualNodes(pod.Spec.Tolerations) {
		t.Errorf("tolerations %v", pod.Spec.Tolerations)
	}
	sel := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	for _, n := range testNodes {
		want := n.Name == "virtual-eu" // the user's ssd and the policy's eu virtual nodes
		if got := matches(t, sel, n); got != want {
			t.Errorf("node %s admitted %v, want %v", n.Name, got, want)
		}
	}
	before, _ := json.Marshal(pod)
	Apply(pod, Policy{Strategy: ferryv1alpha1.PodOffloadingRemote, ClusterSelector: eu})
	after, _ := json.Marshal(pod)
	if string(before) != string(after) {
		t.Errorf("applying twice changed the pod:\n%s\n%s", before, after)
	}

	local := &corev1.Pod{}
	Apply(local, Policy{Strategy: ferryv1alpha1.PodOffloadingLocal})
	if len(local.Spec.Tolerations) != 0 {
		t.Error("a Local pod got the virtual-node toleration")
	}
	for _, n := range testNodes {
		if got, want := matches(t, local.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, n), !strings.HasPrefix(n.Name, "virtual"); got != want {
			t.Errorf("Local: node %s admitted %v", n.Name, got)
		}
	}
}

func TestPodMutatorHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = ferryv1alpha1.AddToScheme(scheme)
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: "shop"},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocal}}
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(nso).Build()}
	request := func(ns string, pod *corev1.Pod) admission.Request {
		raw, _ := json.Marshal(pod)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}

	resp := m.Handle(context.Background(), request("shop", pod))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("offloaded namespace: allowed %v with %d patches, want a patched pod: %v", resp.Allowed, len(resp.Patches), resp.Result)
	}
	if resp := m.Handle(context.Background(), request("other", pod)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("namespace not offloaded: allowed %v with %d patches, want untouched", resp.Allowed, len(resp.Patches))
	}
	widening := pod.DeepCopy()
	widening.Annotations = map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}
	resp = m.Handle(context.Background(), request("shop", widening))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.annotations[ferry.io/pod-offloading-strategy]") {
		t.Errorf("a pod widening a Local namespace: allowed %v, %q", resp.Allowed, resp.Result.Message)
	}
	bad := request("shop", pod)
	bad.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Service"}
	if resp := m.Handle(context.Background(), bad); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("a Service: allowed %v, code %d; want refused as a bad request", resp.Allowed, resp.Result.Code)
	}
	bad = request("shop", pod)
	bad.Object.Raw = []byte(`{"metadata": 1}`)
	if resp := m.Handle(context.Background(), bad); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("a pod that does not decode: allowed %v, code %d; want refused as a bad request", resp.Allowed, resp.Result.Code)
	}
}

// TestPodMutatorPatchesTheWholePod: the handler decodes only the fields
// placement reads; its patch, applied to the whole pod's JSON as the API
// server does, must give what Apply gives on the whole pod, every other
// field kept.
func TestPodMutatorPatchesTheWholePod(t *testing.T) {
	eu := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "eu")}}}}
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: "shop"},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote, ClusterSelector: eu, SchedulerName: "ferry-scheduler"}}
	m := &PodMutator{Reader: cachedReader{nso: nso}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote", "note": "kept"}},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{{Name: "web", Image: "web", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
			SchedulerName: corev1.DefaultSchedulerName, NodeSelector: map[string]string{"disk": "ssd"},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}, NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a")}}}}}},
		},
	}
	raw, _ := json.Marshal(pod)
	resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "shop", Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}})
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("allowed %v with %d patches: %v", resp.Allowed, len(resp.Patches), resp.Result)
	}
	patchJSON, _ := json.Marshal(resp.Patches)
	patch, err := jsonpatchv4.DecodePatch(patchJSON)
	if err != nil {
		t.Fatalf("decode patch %s: %v", patchJSON, err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch %s: %v", patchJSON, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	want := pod.DeepCopy()
	Apply(want, Policy{Strategy: ferryv1alpha1.PodOffloadingRemote, ClusterSelector: eu, SchedulerName: "ferry-scheduler"})
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("patched pod differs from Apply's on the whole pod:\n got  %+v\n want %+v", got, *want)
	}
}

// TestPatchOpsReproduceApply applies the webhook's patch to the pod's JSON,
// as the API server does, and compares with Apply's result.
func TestPatchOpsReproduceApply(t *testing.T) {
	eu := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "eu")}}}}
	base := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, SchedulerName: corev1.DefaultSchedulerName}
	withEverything := base.DeepCopy()
	withEverything.Tolerations = []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
	withEverything.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}, NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, "ssd")}}}}}}
	for _, tt := range []struct {
		name        string
		spec        corev1.PodSpec
		annotations map[string]string
		policy      Policy
	}{
		{"bare pod, Remote", base, nil, Policy{Strategy: ferryv1alpha1.PodOffloadingRemote, ClusterSelector: eu}},
		{"bare pod, Local", base, map[string]string{"a": "b"}, Policy{Strategy: ferryv1alpha1.PodOffloadingLocal}},
		{"own tolerations, affinity, annotations; scheduler", *withEverything, map[string]string{"x/y~z": "1"},
			Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, SchedulerName: "ferry-scheduler"}},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tt.annotations}, Spec: tt.spec}
		want := pod.DeepCopy()
		Apply(want, tt.policy)
		ops := patchOps(pod, want)
		raw, _ := json.Marshal(pod)
		patchJSON, _ := json.Marshal(ops)
		patch, err := jsonpatchv4.DecodePatch(patchJSON)
		if err != nil {
			t.Fatalf("%s: decode patch %s: %v", tt.name, patchJSON, err)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("%s: apply patch %s: %v", tt.name, patchJSON, err)
		}
		var got corev1.Pod
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(&got, want) {
			t.Errorf("%s: patched pod differs from Apply's:\n got  %+v\n want %+v", tt.name, got, *want)
		}
		// Applied again (reinvocation), the webhook has nothing to patch.
		reinvoked := want.DeepCopy()
		Apply(reinvoked, tt.policy)
		if again := patchOps(want, reinvoked); len(again) != 0 {
			t.Errorf("%s: second pass patches %v", tt.name, again)
		}
	}
}

func TestApplyPreferredAffinity(t *testing.T) {
	real, virtual := testNodes[0], testNodes[len(testNodes)-1]
	if placement.IsVirtualNode(real) || !placement.IsVirtualNode(virtual) {
		t.Fatalf("test nodes changed: %s, %s", real.Name, virtual.Name)
	}
	for _, tc := range []struct {
		name      string
		scheduler string
		policy    Policy
		prefers   string // the node the preferred term matches; "" for no term
	}{
		{"LocalFirst, default scheduler", "", Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, Preference: ferryv1alpha1.PlacementPreferenceLocalFirst}, real.Name},
		{"RemoteFirst, default-scheduler named", corev1.DefaultSchedulerName, Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, Preference: ferryv1alpha1.PlacementPreferenceRemoteFirst}, virtual.Name},
		{"LocalFirst, namespace gives ferry-scheduler", "", Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, Preference: ferryv1alpha1.PlacementPreferenceLocalFirst, SchedulerName: "ferry-scheduler"}, ""},
		{"LocalFirst, pod names ferry-scheduler", "ferry-scheduler", Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, Preference: ferryv1alpha1.PlacementPreferenceLocalFirst}, ""},
		{"None", "", Policy{Strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, Preference: ferryv1alpha1.PlacementPreferenceNone}, ""},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{SchedulerName: tc.scheduler}}
		Apply(pod, tc.policy)
		terms := pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		switch {
		case tc.prefers == "" && len(terms) != 0:
			t.Errorf("%s: got preferred terms %v", tc.name, terms)
		case tc.prefers != "":
			if len(terms) != 1 || terms[0].Weight != 100 {
				t.Errorf("%s: preferred terms %v, want one of weight 100", tc.name, terms)
				continue
			}
			for _, n := range []*corev1.Node{real, virtual} {
				sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{terms[0].Preference}}
				if got := matches(t, sel, n); got != (n.Name == tc.prefers) {
					t.Errorf("%s: term matches %s: %v", tc.name, n.Name, got)
				}
			}
			if !strings.Contains(pod.Annotations[AnnotationAppliedPolicy], "preferredNodeAffinity") {
				t.Errorf("%s: recorded %q", tc.name, pod.Annotations[AnnotationAppliedPolicy])
			}
			before, _ := json.Marshal(pod)
			Apply(pod, tc.policy)
			if after, _ := json.Marshal(pod); string(before) != string(after) {
				t.Errorf("%s: applying twice changed the pod:\n%s\n%s", tc.name, before, after)
			}
		}
	}
}
