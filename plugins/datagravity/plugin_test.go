package datagravity

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

// world holds claims and volumes: claim name -> (cluster, size, gravity).
type volume struct {
	cluster ferryv1alpha1.ClusterID
	size    string
	gravity bool
	unbound bool
	// virtual: an unbound claim of ferry's virtual class asking for
	// requested.
	virtual   bool
	requested string
}

func newPlugin(t *testing.T, args Args, nodes []*corev1.Node, claims map[string]volume) *Plugin {
	t.Helper()
	pvcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var claimList []*corev1.PersistentVolumeClaim
	var volumeList []*corev1.PersistentVolume
	for name, v := range claims {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if v.gravity {
			pvc.Annotations = map[string]string{placement.AnnotationDataGravity: "true"}
		}
		if v.virtual {
			v.unbound = true
			pvc.Annotations = map[string]string{ferryv1alpha1.AnnotationRequestedStorageClass: v.requested}
			pvc.Spec.StorageClassName = new(ferryv1alpha1.StorageClassVirtual)
		}
		if !v.unbound {
			pvc.Spec.VolumeName = "pv-" + name
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
				Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(v.size)}}}
			if v.cluster != placement.LocalCluster {
				pv.Labels = map[string]string{ferryv1alpha1.LabelClusterID: string(v.cluster)}
			}
			if err := pvs.Add(pv); err != nil {
				t.Fatal(err)
			}
			volumeList = append(volumeList, pv)
		}
		if err := pvcs.Add(pvc); err != nil {
			t.Fatal(err)
		}
		claimList = append(claimList, pvc)
	}
	return NewWith(args, corelisters.NewPersistentVolumeClaimLister(pvcs), corelisters.NewPersistentVolumeLister(pvs), virtualnodes.NewStatic(nodes...),
		NewStaticGravityIndex(claimList, volumeList))
}

func mounting(claims ...string) *corev1.Pod {
	p := plugintest.Tolerating(plugintest.Pod("ns", "p"))
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

var testNodes = []*corev1.Node{
	plugintest.RealNode("real"),
	plugintest.VirtualNode("virtual-a", "a", nil),
	plugintest.VirtualNode("virtual-b", "b", nil),
}

func TestHardGravity(t *testing.T) {
	claims := map[string]volume{
		"in-a": {cluster: "a", size: "1Gi"}, "also-a": {cluster: "a", size: "1Gi"},
		"local": {size: "1Gi"}, "pending": {unbound: true},
		"in-c": {cluster: "c", size: "1Gi"},
	}
	pl := newPlugin(t, DefaultArgs(), testNodes, claims)
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		want       string // admitted nodes
		wantSet    string
		wantSkip   bool
		wantPreErr string
		wantReason string
	}{
		"no volumes: skipped":       {pod: mounting(), wantSkip: true},
		"unbound claim: skipped":    {pod: mounting("pending", "missing"), wantSkip: true},
		"data in a: a's nodes only": {pod: mounting("in-a", "also-a", "pending"), want: "virtual-a", wantSet: "virtual-a"},
		"local data: real nodes":    {pod: mounting("local"), want: "real", wantReason: "the data of claim local lives in this cluster"},
		"two clusters: never":       {pod: mounting("in-a", "local"), wantPreErr: "the pod's volumes live in different clusters: claim in-a in cluster a, claim local in this cluster"},
		"cluster without a node":    {pod: mounting("in-c"), wantPreErr: "the data of claim in-c lives in cluster c, which has no virtual node"},
	} {
		cs := framework.NewCycleState()
		res, pre := pl.PreFilter(context.Background(), cs, tc.pod, nil)
		if tc.wantPreErr != "" {
			if pre.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(pre.Message(), tc.wantPreErr) {
				t.Errorf("%s: PreFilter %v, want %q", name, pre, tc.wantPreErr)
			}
			continue
		}
		if pre.IsSkip() != tc.wantSkip {
			t.Errorf("%s: PreFilter %v, skip wanted %v", name, pre, tc.wantSkip)
		}
		if tc.wantSkip {
			continue
		}
		gotSet := ""
		if !res.AllNodes() {
			gotSet = strings.Join(sets.List(res.NodeNames), ",")
		}
		if gotSet != tc.wantSet {
			t.Errorf("%s: node set %q, want %q", name, gotSet, tc.wantSet)
		}
		var admitted []string
		for _, n := range testNodes {
			st := pl.Filter(context.Background(), cs, tc.pod, plugintest.Info(n))
			if st.IsSuccess() {
				admitted = append(admitted, n.Name)
			} else if tc.wantReason != "" && st.Message() != tc.wantReason {
				t.Errorf("%s: node %s refused with %q, want %q", name, n.Name, st.Message(), tc.wantReason)
			}
		}
		if got := strings.Join(admitted, ","); got != tc.want {
			t.Errorf("%s: admitted %s, want %s", name, got, tc.want)
		}
	}
}

func scores(t *testing.T, pl *Plugin, pod *corev1.Pod) (map[string]int64, *fwk.Status) {
	t.Helper()
	cs := framework.NewCycleState()
	var infos []fwk.NodeInfo
	for _, n := range testNodes {
		infos = append(infos, plugintest.Info(n))
	}
	if st := pl.PreScore(context.Background(), cs, pod, infos); !st.IsSuccess() {
		return nil, st
	}
	out := map[string]int64{}
	for _, ni := range infos {
		s, st := pl.Score(context.Background(), cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatalf("Score %s: %v", ni.Node().Name, st)
		}
		out[ni.Node().Name] = s
	}
	return out, nil
}

func TestSoftGravity(t *testing.T) {
	claims := map[string]volume{
		"big-a":   {cluster: "a", size: "30Gi", gravity: true},
		"small-b": {cluster: "b", size: "5Gi", gravity: true},
		"local":   {size: "10Gi", gravity: true},
		"plain-b": {cluster: "b", size: "500Gi"}, // no annotation: no pull
		"pending": {unbound: true, gravity: true},
	}
	got, st := scores(t, newPlugin(t, DefaultArgs(), testNodes, claims), mounting())
	if st != nil {
		t.Fatalf("PreScore %v", st)
	}
	// Over FullPullBytes (10Gi), scores are relative to the largest: 30Gi.
	if want := map[string]int64{"virtual-a": 100, "virtual-b": 16, "real": 33}; !equal(got, want) {
		t.Errorf("scores %v, want %v", got, want)
	}
	small := map[string]volume{"some-a": {cluster: "a", size: "1Gi", gravity: true}}
	got, _ = scores(t, newPlugin(t, DefaultArgs(), testNodes, small), mounting())
	if want := map[string]int64{"virtual-a": 10, "virtual-b": 0, "real": 0}; !equal(got, want) {
		t.Errorf("1Gi against a full pull at 10Gi: scores %v, want %v", got, want)
	}
	args, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"fullPullBytes":"1Gi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = scores(t, newPlugin(t, args, testNodes, small), mounting())
	if want := map[string]int64{"virtual-a": 100, "virtual-b": 0, "real": 0}; !equal(got, want) {
		t.Errorf("fullPullBytes 1Gi: scores %v, want %v", got, want)
	}
	if _, st := scores(t, newPlugin(t, DefaultArgs(), testNodes, map[string]volume{"plain": {cluster: "a", size: "1Ti"}}), mounting()); !st.IsSkip() {
		t.Errorf("no gravity data: PreScore %v, want Skip", st)
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestDataGravityArgs(t *testing.T) {
	for raw, want := range map[string]string{
		`{"fullPullBytes":"0"}`:    "fullPullBytes: 0 must be more than 0",
		`{"fullPullBytes":"lots"}`: "fullPullBytes",
		`{"maxPreFilterNodes":-2}`: "maxPreFilterNodes: -2",
		`{"kind":"RemoteFitArgs"}`: `kind "RemoteFitArgs", want DataGravityArgs`,
	} {
		if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(raw)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", raw, err, want)
		}
	}
}

// A pod whose claims of the virtual class wait for it goes only to virtual
// nodes whose provider serves the classes they ask for; real nodes are
// VolumeBinding's to judge.
func TestUnboundClaimsNeedTheirClassOffered(t *testing.T) {
	withClasses := func(n *corev1.Node, raw string) *corev1.Node {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[ferryv1alpha1.AnnotationStorageClasses] = raw
		return n
	}
	nodes := []*corev1.Node{
		plugintest.RealNode("real"),
		withClasses(plugintest.VirtualNode("virtual-a", "a", nil), `[{"name":"","providerClass":"standard"},{"name":"fast","providerClass":"ssd"}]`),
		plugintest.VirtualNode("virtual-b", "b", nil),
		withClasses(plugintest.VirtualNode("virtual-c", "c", nil), `{not json`),
	}
	pl := newPlugin(t, DefaultArgs(), nodes, map[string]volume{
		"in-a":      {cluster: "a", size: "1Gi"},
		"want-fast": {virtual: true, requested: "fast"}, "want-gold": {virtual: true, requested: "gold"}, "want-default": {virtual: true},
	})
	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		want   string
		reason string
	}{
		"offered class":           {pod: mounting("want-fast"), want: "real,virtual-a"},
		"default class":           {pod: mounting("want-default"), want: "real,virtual-a"},
		"class offered nowhere":   {pod: mounting("want-gold"), want: "real", reason: `claim want-gold asks for storage class "gold": cluster a does not offer storage class "gold" (offers: the default (standard), "fast")`},
		"with data in a, too":     {pod: mounting("in-a", "want-fast"), want: "virtual-a"},
		"with data in a, no gold": {pod: mounting("in-a", "want-gold"), want: ""},
	} {
		cs := framework.NewCycleState()
		if _, pre := pl.PreFilter(context.Background(), cs, tc.pod, nil); !pre.IsSuccess() {
			t.Fatalf("%s: PreFilter %v", name, pre)
		}
		var admitted []string
		for _, n := range nodes {
			st := pl.Filter(context.Background(), cs, tc.pod, plugintest.Info(n))
			switch {
			case st.IsSuccess():
				admitted = append(admitted, n.Name)
			case st.Code() != fwk.UnschedulableAndUnresolvable:
				t.Errorf("%s: node %s: %v", name, n.Name, st)
			case n.Name == "virtual-a" && tc.reason != "" && st.Message() != tc.reason:
				t.Errorf("%s: refused with %q, want %q", name, st.Message(), tc.reason)
			case n.Name == "virtual-b" && !strings.Contains(st.Message(), "cluster b offers no storage") && !strings.Contains(st.Message(), "lives in cluster a"):
				t.Errorf("%s: virtual-b refused with %q, want it to say the provider offers no storage", name, st.Message())
			case n.Name == "virtual-c" && !strings.Contains(st.Message(), ferryv1alpha1.AnnotationStorageClasses) && !strings.Contains(st.Message(), "lives in cluster a"):
				t.Errorf("%s: virtual-c refused with %q, want the malformed annotation named", name, st.Message())
			}
		}
		if got := strings.Join(admitted, ","); got != tc.want {
			t.Errorf("%s: admitted %q, want %q", name, got, tc.want)
		}
	}
}

// When the pod fits nowhere, each waiting claim whose class a provider
// refused says so in an event naming the clusters and what they offer.
func TestPostFilterSaysOnTheClaimWhichProvidersDoNotServeItsClass(t *testing.T) {
	a := plugintest.VirtualNode("virtual-a", "a", nil)
	a.Annotations = map[string]string{ferryv1alpha1.AnnotationStorageClasses: `[{"name":"","providerClass":"standard"}]`}
	nodes := []*corev1.Node{plugintest.RealNode("real"), a, plugintest.VirtualNode("virtual-b", "b", nil)}
	pl := newPlugin(t, DefaultArgs(), nodes, map[string]volume{
		"want-gold": {virtual: true, requested: "gold"}, "want-default": {virtual: true},
	})
	recorder := events.NewFakeRecorder(10)
	pl.recorder = recorder
	for claims, want := range map[string]string{
		"want-gold": `Warning StorageClassNotOffered pod p fits no node; cluster a does not offer storage class "gold" (offers: the default (standard)); ` +
			`cluster b offers no storage, so not storage class "gold"`,
		"want-default": "Warning StorageClassNotOffered pod p fits no node; cluster b offers no storage, so not a default storage class",
	} {
		pod := mounting(claims)
		cs := framework.NewCycleState()
		if _, st := pl.PreFilter(context.Background(), cs, pod, nil); !st.IsSuccess() {
			t.Fatalf("%s: PreFilter %v", claims, st)
		}
		if _, st := pl.PostFilter(context.Background(), cs, pod, nil); st.Code() != fwk.Unschedulable {
			t.Errorf("%s: PostFilter %v, want Unschedulable", claims, st)
		}
		select {
		case got := <-recorder.Events:
			if want == "" || got != want {
				t.Errorf("%s: event %q, want %q", claims, got, want)
			}
		default:
			if want != "" {
				t.Errorf("%s: no event, want %q", claims, want)
			}
		}
	}
}
