package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/placement"
	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = ferryv1alpha1.AddToScheme(s)
	return s
}

func admissionRequest(op admissionv1.Operation, ns string, obj, old any) admission.Request {
	raw, _ := json.Marshal(obj)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: ns, Operation: op, Object: runtime.RawExtension{Raw: raw}}}
	if old != nil {
		oldRaw, _ := json.Marshal(old)
		req.OldObject = runtime.RawExtension{Raw: oldRaw}
	}
	return req
}

func nsoIn(ns string, strategy ferryv1alpha1.PodOffloadingStrategy) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy}}
}

func TestPVCMutator(t *testing.T) {
	s := testScheme()
	claim := func(class *string, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class, VolumeName: volume}}
	}
	fast, empty, virtual := "fast", "", ferryv1alpha1.StorageClassVirtual
	classes := []client.Object{nsoIn("shop", ferryv1alpha1.PodOffloadingRemote), nsoIn("stay", ferryv1alpha1.PodOffloadingLocal),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.StorageClassVirtual}, Provisioner: "ferry.io/virtual"}}
	m := &PVCMutator{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(classes...).Build(), Decoder: admission.NewDecoder(s)}
	for _, tt := range []struct {
		name      string
		ns        string
		pvc       *corev1.PersistentVolumeClaim
		remapped  bool
		requested string
	}{
		{"asks for a class", "shop", claim(&fast, ""), true, "fast"},
		{"asks for the default class", "shop", claim(nil, ""), true, ""},
		{"asks for no class (static)", "shop", claim(&empty, ""), false, ""},
		{"already virtual", "shop", claim(&virtual, ""), false, ""},
		{"pre-bound", "shop", claim(&fast, "pv-1"), false, ""},
		{"selects a volume", "shop", func() *corev1.PersistentVolumeClaim {
			c := claim(&fast, "")
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
			return c
		}(), false, ""},
		{"Local namespace", "stay", claim(&fast, ""), false, ""},
		{"namespace not offloaded", "other", claim(&fast, ""), false, ""},
	} {
		resp := m.Handle(context.Background(), admissionRequest(admissionv1.Create, tt.ns, tt.pvc, nil))
		if !resp.Allowed {
			t.Errorf("%s: denied: %v", tt.name, resp.Result)
			continue
		}
		if got := len(resp.Patches) > 0; got != tt.remapped {
			t.Errorf("%s: remapped %v, want %v (%v)", tt.name, got, tt.remapped, resp.Patches)
		}
		for _, p := range resp.Patches {
			if p.Path == "/spec/storageClassName" && p.Value != ferryv1alpha1.StorageClassVirtual {
				t.Errorf("%s: storage class patched to %v", tt.name, p.Value)
			}
			if p.Path == "/metadata/annotations" {
				got, ok := p.Value.(map[string]any)[ferryv1alpha1.AnnotationRequestedStorageClass]
				if !ok || got != tt.requested {
					t.Errorf("%s: annotations patched to %v, want %s=%q", tt.name, p.Value, ferryv1alpha1.AnnotationRequestedStorageClass, tt.requested)
				}
			}
		}
	}

	noClass := &PVCMutator{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(nsoIn("shop", ferryv1alpha1.PodOffloadingRemote)).Build(), Decoder: admission.NewDecoder(s)}
	resp := noClass.Handle(context.Background(), admissionRequest(admissionv1.Create, "shop", claim(&fast, ""), nil))
	if !resp.Allowed || len(resp.Patches) > 0 || len(resp.Warnings) != 1 {
		t.Errorf("virtual class not installed: allowed %v, %d patches, warnings %v; want allowed unchanged with a warning", resp.Allowed, len(resp.Patches), resp.Warnings)
	}
}

func TestAnnotationValidator(t *testing.T) {
	s := testScheme()
	v := &AnnotationValidator{Kind: "Pod", Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(nsoIn("shop", ferryv1alpha1.PodOffloadingLocalAndRemote)).Build(), Decoder: admission.NewDecoder(s)}
	pod := func(annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: annotations}}
	}
	for _, tt := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old *corev1.Pod
		denied   string
	}{
		{"narrowing", admissionv1.Create, pod(map[string]string{placement.AnnotationPodOffloadingStrategy: "Local"}), nil, ""},
		{"ferry's own record", admissionv1.Create, pod(map[string]string{AnnotationAppliedPolicy: "anything"}), nil, ""},
		{"unknown key", admissionv1.Create, pod(map[string]string{"ferry.io/gravity": "true"}), nil, "metadata.annotations[ferry.io/gravity]"},
		{"bad value", admissionv1.Create, pod(map[string]string{placement.AnnotationPodOffloadingStrategy: "Anywhere"}), nil, `"LocalAndRemote"`},
		{"strategy changed", admissionv1.Update, pod(map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}), pod(map[string]string{placement.AnnotationPodOffloadingStrategy: "Local"}), "immutable"},
		{"old unknown key kept on update", admissionv1.Update, pod(map[string]string{"ferry.io/old": "x", "a": "b"}), pod(map[string]string{"ferry.io/old": "x"}), ""},
		{"unknown key added on update", admissionv1.Update, pod(map[string]string{"ferry.io/new": "x"}), pod(nil), "ferry.io/new"},
	} {
		resp := v.Handle(context.Background(), admissionRequest(tt.op, "shop", tt.obj, tt.old))
		switch {
		case tt.denied == "" && !resp.Allowed:
			t.Errorf("%s: denied: %s", tt.name, resp.Result.Message)
		case tt.denied != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tt.denied)):
			t.Errorf("%s: allowed %v, message %q, want a denial naming %s", tt.name, resp.Allowed, resp.Result.Message, tt.denied)
		}
	}
}

func TestValidateNamespaceOffloading(t *testing.T) {
	sel := func(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
	term := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	withTwin := nsoIn("shop", ferryv1alpha1.PodOffloadingRemote)
	withTwin.Spec.NamespaceMappingStrategy = ferryv1alpha1.NamespaceMappingDefaultName
	withTwin.Status.Clusters = []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "p", TwinNamespace: "shop-c", Phase: ferryv1alpha1.OffloadingReady}}
	changedMapping := withTwin.DeepCopy()
	changedMapping.Spec.NamespaceMappingStrategy = ferryv1alpha1.NamespaceMappingEnforceSameName
	changedPods := withTwin.DeepCopy()
	changedPods.Spec.PodOffloadingStrategy = ferryv1alpha1.PodOffloadingLocal
	named := nsoIn("shop", "")
	named.Name = "other"
	for _, tt := range []struct {
		name     string
		nso, old *ferryv1alpha1.NamespaceOffloading
		want     []string
	}{
		{"valid", func() *ferryv1alpha1.NamespaceOffloading {
			n := nsoIn("shop", "")
			n.Spec.ClusterSelector = sel(term("region", corev1.NodeSelectorOpIn, "eu"))
			return n
		}(), nil, nil},
		{"bad operator value", func() *ferryv1alpha1.NamespaceOffloading {
			n := nsoIn("shop", "")
			n.Spec.ClusterSelector = sel(term("cpus", corev1.NodeSelectorOpGt, "many"))
			return n
		}(), nil, []string{"spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]"}},
		{"bad key and empty term", func() *ferryv1alpha1.NamespaceOffloading {
			n := nsoIn("shop", "")
			n.Spec.ClusterSelector = sel(term("a b", corev1.NodeSelectorOpExists), corev1.NodeSelectorTerm{})
			return n
		}(), nil, []string{"spec.clusterSelector.nodeSelectorTerms[1]", "spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].key"}},
		{"wrong name", named, nil, []string{"metadata.name"}},
		{"reserved namespace", nsoIn("kube-system", ""), nil, []string{"metadata.namespace"}},
		{"mapping change with twins", changedMapping, withTwin, []string{"spec.namespaceMappingStrategy"}},
		{"pod strategy change with twins", changedPods, withTwin, nil},
	} {
		errs := ValidateNamespaceOffloading(tt.nso, tt.old)
		if len(errs) != len(tt.want) {
			t.Errorf("%s: errors %v, want %d naming %v", tt.name, errs, len(tt.want), tt.want)
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(errs[i].Error(), w) {
				t.Errorf("%s: error %d %q does not name %s", tt.name, i, errs[i].Error(), w)
			}
		}
	}
}

func TestShadowPodValidatorIdentityAndQuota(t *testing.T) {
	s := testScheme()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-tenant-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c2", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c2", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		&ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "ferry-tenant-c1"},
			Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "c1", Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&ferryv1alpha1.PeeringQuota{}).
		WithIndex(&ferryv1alpha1.PeeringQuota{}, quota.ConsumerIndex, func(o client.Object) []string {
			return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
		}).Build()
	v := &ShadowPodValidator{Reader: c, APIReader: c, Writer: c, Decoder: admission.NewDecoder(s)}
	sp := func(name, consumer, cpu string) *ferryv1alpha1.ShadowPod {
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: consumer}},
			Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: ferryv1alpha1.ClusterID(consumer), Template: ferryv1alpha1.ShadowPodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}}}
	}
	asC1 := func(req admission.Request) admission.Request {
		req.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:ferry-tenant-c1:ferry-consumer"}
		return req
	}
	for _, tt := range []struct {
		name   string
		req    admission.Request
		denied string
	}{
		{"first 600m", asC1(admissionRequest(admissionv1.Create, "twin-c1", sp("a", "c1", "600m"), nil)), ""},
		{"second 600m", asC1(admissionRequest(admissionv1.Create, "twin-c1", sp("b", "c1", "600m"), nil)), "cpu: requested 600m, used 600m, limited to 1"},
		{"400m to the millicore", asC1(admissionRequest(admissionv1.Create, "twin-c1", sp("c", "c1", "400m"), nil)), ""},
		{"another consumer's twin", asC1(admissionRequest(admissionv1.Create, "twin-c2", sp("d", "c1", "1m"), nil)), "only in its own twin namespaces"},
		{"its tenant namespace", asC1(admissionRequest(admissionv1.Create, "ferry-tenant-c1", sp("e", "c1", "1m"), nil)), "only in its own twin namespaces"},
		{"posing as another", asC1(admissionRequest(admissionv1.Create, "twin-c1", sp("f", "c2", "0"), nil)), "spec.consumerClusterID"},
		{"an admin, no quota for c2", admissionRequest(admissionv1.Create, "twin-c2", sp("g", "c2", "64"), nil), ""},
		{"an admin in c1's twin is charged too", admissionRequest(admissionv1.Create, "twin-c1", sp("h", "c1", "1m"), nil), "PeeringQuota of consumer c1 exceeded"},
	} {
		resp := v.Handle(context.Background(), tt.req)
		switch {
		case tt.denied == "" && !resp.Allowed:
			t.Errorf("%s: denied: %s", tt.name, resp.Result.Message)
		case tt.denied != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tt.denied)):
			t.Errorf("%s: allowed %v, message %q, want a denial with %q", tt.name, resp.Allowed, resp.Result.Message, tt.denied)
		}
	}
	var q ferryv1alpha1.PeeringQuota
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ferry-tenant-c1", Name: "c1"}, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Status.Reservations) != 2 {
		t.Errorf("reservations %v, want the two admitted ShadowPods", q.Status.Reservations)
	}
}

// TestShadowPodValidatorChargesUpdatesAndNeverLeaks: an update that raises
// a ShadowPod's requests is charged (its increase only, once used counts
// it), one that lowers them is not; a reservation made in one quota is
// taken back when another quota of the same consumer denies.
func TestShadowPodValidatorChargesUpdatesAndNeverLeaks(t *testing.T) {
	ctx := context.Background()
	s := testScheme()
	quotaOf := func(name string, limits corev1.ResourceList) *ferryv1alpha1.PeeringQuota {
		return &ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ferry-tenant-c1"},
			Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "c1", Limits: limits}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		quotaOf("a-cpu", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}),
		quotaOf("b-memory", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}),
	).WithStatusSubresource(&ferryv1alpha1.PeeringQuota{}).
		WithIndex(&ferryv1alpha1.PeeringQuota{}, quota.ConsumerIndex, func(o client.Object) []string {
			return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
		}).Build()
	v := &ShadowPodValidator{Reader: c, APIReader: c, Writer: c, Decoder: admission.NewDecoder(s)}
	sp := func(name string, generation int64, cpu, memory string) *ferryv1alpha1.ShadowPod {
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Generation: generation},
			Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "c1", Template: ferryv1alpha1.ShadowPodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}}}}}
	}
	reservations := func(name string) []ferryv1alpha1.QuotaReservation {
		var q ferryv1alpha1.PeeringQuota
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ferry-tenant-c1", Name: name}, &q); err != nil {
			t.Fatal(err)
		}
		return q.Status.Reservations
	}
	expect := func(what string, resp admission.Response, denied string) {
		t.Helper()
		switch {
		case denied == "" && !resp.Allowed:
			t.Errorf("%s: denied: %s", what, resp.Result.Message)
		case denied != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, denied)):
			t.Errorf("%s: allowed %v, message %q, want a denial with %q", what, resp.Allowed, resp.Result.Message, denied)
		}
	}

	expect("a pod over the memory quota", v.Handle(ctx, admissionRequest(admissionv1.Create, "twin-c1", sp("big", 1, "100m", "2Gi"), nil)), "memory")
	if r := reservations("a-cpu"); len(r) != 0 {
		t.Errorf("the cpu quota keeps a reservation for a ShadowPod another quota refused: %v", r)
	}

	expect("create 600m", v.Handle(ctx, admissionRequest(admissionv1.Create, "twin-c1", sp("web", 1, "600m", "100Mi"), nil)), "")
	expect("raise to 1100m while its create is pending", v.Handle(ctx, admissionRequest(admissionv1.Update, "twin-c1", sp("web", 2, "1100m", "100Mi"), sp("web", 1, "600m", "100Mi"))), "cpu")
	expect("raise to 900m", v.Handle(ctx, admissionRequest(admissionv1.Update, "twin-c1", sp("web", 2, "900m", "100Mi"), sp("web", 1, "600m", "100Mi"))), "")
	if r := reservations("a-cpu"); len(r) != 1 || r[0].Generation != 2 || r[0].Requests.Cpu().String() != "900m" {
		t.Errorf("cpu reservations %v, want one of 900m at generation 2", r)
	}

	// The quota controller counts web at 900m: used holds it, the
	// reservation is folded in.
	var q ferryv1alpha1.PeeringQuota
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ferry-tenant-c1", Name: "a-cpu"}, &q); err != nil {
		t.Fatal(err)
	}
	q.Status.Reservations = nil
	q.Status.Used = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}
	if err := c.Status().Update(ctx, &q); err != nil {
		t.Fatal(err)
	}
	expect("lower to 500m", v.Handle(ctx, admissionRequest(admissionv1.Update, "twin-c1", sp("web", 3, "500m", "100Mi"), sp("web", 2, "900m", "100Mi"))), "")
	if r := reservations("a-cpu"); len(r) != 0 {
		t.Errorf("a decrease reserved %v", r)
	}
	expect("raise by 200m over 900m used", v.Handle(ctx, admissionRequest(admissionv1.Update, "twin-c1", sp("web", 3, "1100m", "100Mi"), sp("web", 2, "900m", "100Mi"))), "cpu")
	expect("raise by 100m over 900m used", v.Handle(ctx, admissionRequest(admissionv1.Update, "twin-c1", sp("web", 3, "1", "100Mi"), sp("web", 2, "900m", "100Mi"))), "")
	if r := reservations("a-cpu"); len(r) != 1 || r[0].Requests.Cpu().String() != "100m" {
		t.Errorf("cpu reservations %v, want the 100m increase only", r)
	}
}

// TestShadowPodValidatorPodSecurity: a consumer's template must meet its
// level (baseline when its ForeignCluster names none); a write that keeps
// the template passes even under a level tightened since.
func TestShadowPodValidatorPodSecurity(t *testing.T) {
	ctx := context.Background()
	s := testScheme()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c1", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c1", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "twin-c2", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "c2", ferryv1alpha1.LabelOriginNamespace: "shop"}}},
		&ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "c2"}, Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "c2", Role: ferryv1alpha1.RoleConsumer, PodSecurity: ferryv1alpha1.PodSecurityRestricted}},
	).WithIndex(&ferryv1alpha1.PeeringQuota{}, quota.ConsumerIndex, func(o client.Object) []string {
		return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
	}).Build()
	v := &ShadowPodValidator{Reader: c, APIReader: c, Writer: c, Decoder: admission.NewDecoder(s)}
	sp := func(consumer string, sc *corev1.SecurityContext) *ferryv1alpha1.ShadowPod {
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: consumer}},
			Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: ferryv1alpha1.ClusterID(consumer), Template: ferryv1alpha1.ShadowPodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app", SecurityContext: sc}}}}}}
	}
	privileged := &corev1.SecurityContext{Privileged: ptr.To(true)}
	for _, tt := range []struct {
		name   string
		req    admission.Request
		denied string
	}{
		{"baseline by default: privileged refused", admissionRequest(admissionv1.Create, "twin-c1", sp("c1", privileged), nil),
			`spec.template: consumer c1's pods must meet the baseline level here: violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)`},
		{"baseline: a plain pod passes", admissionRequest(admissionv1.Create, "twin-c1", sp("c1", nil), nil), ""},
		{"restricted: a plain pod refused", admissionRequest(admissionv1.Create, "twin-c2", sp("c2", nil), nil), `"restricted:latest"`},
		{"restricted: an update keeping the template passes", admissionRequest(admissionv1.Update, "twin-c2", sp("c2", nil), sp("c2", nil)), ""},
		{"restricted: an update changing it is checked", admissionRequest(admissionv1.Update, "twin-c2", sp("c2", privileged), sp("c2", nil)), "privileged"},
	} {
		resp := v.Handle(ctx, tt.req)
		switch {
		case tt.denied == "" && !resp.Allowed:
			t.Errorf("%s: denied: %s", tt.name, resp.Result.Message)
		case tt.denied != "" && (resp.Allowed || !strings.Contains(resp.Result.Message, tt.denied)):
			t.Errorf("%s: allowed %v, message %q, want a denial with %q", tt.name, resp.Allowed, resp.Result.Message, tt.denied)
		case tt.denied != "" && (resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid):
			// The virtual kubelet fails a pod refused as Invalid, and keeps
			// retrying one refused as Forbidden (an exceeded quota).
			t.Errorf("%s: denied with %d %s, want 422 Invalid: the template is never accepted as it is", tt.name, resp.Result.Code, resp.Result.Reason)
		}
	}
}
