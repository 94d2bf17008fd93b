package clusterselector

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

func nso(ns string, strategy ferryv1alpha1.PodOffloadingStrategy, sel *corev1.NodeSelector) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy, ClusterSelector: sel}}
}

func inRegion(values ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}
}

// run runs PreFilter, then Filter on every node, and returns the names of
// the nodes admitted, the PreFilter status and result, and the Filter
// reasons by node.
func run(t *testing.T, pl *Plugin, pod *corev1.Pod, nodes []*corev1.Node) (admitted []string, pre *fwk.Status, res *fwk.PreFilterResult, reasons map[string]string) {
	t.Helper()
	cs := framework.NewCycleState()
	res, pre = pl.PreFilter(context.Background(), cs, pod, nil)
	reasons = map[string]string{}
	if !pre.IsSuccess() && !pre.IsSkip() {
		return nil, pre, res, reasons
	}
	for _, n := range nodes {
		if !res.AllNodes() && !res.NodeNames.Has(n.Name) {
			continue
		}
		if pre.IsSkip() {
			admitted = append(admitted, n.Name)
			continue
		}
		st := pl.Filter(context.Background(), cs, pod, plugintest.Info(n))
		if st.IsSuccess() {
			admitted = append(admitted, n.Name)
		} else {
			reasons[n.Name] = st.Message()
			if st.Code() != fwk.UnschedulableAndUnresolvable {
				t.Errorf("node %s: code %v, want UnschedulableAndUnresolvable", n.Name, st.Code())
			}
		}
	}
	return admitted, pre, res, reasons
}

func withRC(p *corev1.Pod, name string) *corev1.Pod {
	p.Spec.RuntimeClassName = &name
	return p
}

func ferryRC(p *corev1.Pod) *corev1.Pod { return withRC(p, ferryv1alpha1.RuntimeClassVirtual) }

func TestClusterSelector(t *testing.T) {
	nodes := []*corev1.Node{
		plugintest.RealNode("real-0"),
		plugintest.VirtualNode("virtual-eu", "eu", nil, "region", "eu"),
		plugintest.VirtualNode("virtual-us", "us", nil, "region", "us"),
	}
	policies := NewStaticPolicies(
		nso("remote-eu", ferryv1alpha1.PodOffloadingRemote, inRegion("eu")),
		nso("both-eu", ferryv1alpha1.PodOffloadingLocalAndRemote, inRegion("eu")),
		nso("local", ferryv1alpha1.PodOffloadingLocal, nil),
		nso("remote-mars", ferryv1alpha1.PodOffloadingRemote, inRegion("mars")),
		nso("bad", ferryv1alpha1.PodOffloadingRemote, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "region", Operator: corev1.NodeSelectorOpIn}}}}}),
	)
	pl := NewWith(DefaultArgs(), policies, virtualnodes.NewStatic(nodes...))
	tol := plugintest.Tolerating
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		want       string // admitted nodes, comma separated
		wantSkip   bool
		wantSet    string // PreFilterResult, comma separated, "" for all nodes
		wantPreErr string
		wantReason map[string]string
	}{
		"not offloaded, no toleration: skipped": {pod: plugintest.Pod("plain", "p"), wantSkip: true, want: "real-0,virtual-eu,virtual-us"},
		"not offloaded, tolerating: local only": {pod: tol(plugintest.Pod("plain", "p")), want: "real-0",
			wantReason: map[string]string{"virtual-eu": ReasonNotOffloaded}},
		"Remote with selector: node set": {pod: tol(plugintest.Pod("remote-eu", "p")), want: "virtual-eu", wantSet: "virtual-eu"},
		"LocalAndRemote with selector":   {pod: tol(plugintest.Pod("both-eu", "p")), want: "real-0,virtual-eu", wantReason: map[string]string{"virtual-us": ReasonNotSelected}},
		"narrowed to Remote by the pod": {pod: tol(plugintest.Pod("both-eu", "p", placement.AnnotationPodOffloadingStrategy, "Remote")),
			want: "virtual-eu", wantSet: "virtual-eu"},
		"narrowed to Local by the pod": {pod: tol(plugintest.Pod("both-eu", "p", placement.AnnotationPodOffloadingStrategy, "Local")),
			want: "real-0", wantReason: map[string]string{"virtual-eu": ReasonLocalOnly}},
		"widening refused": {pod: tol(plugintest.Pod("local", "p", placement.AnnotationPodOffloadingStrategy, "Remote")),
			wantPreErr: "metadata.annotations[ferry.io/pod-offloading-strategy]: Invalid value: \"Remote\""},
		"Local namespace, tolerating":                     {pod: tol(plugintest.Pod("local", "p")), want: "real-0", wantReason: map[string]string{"virtual-us": ReasonLocalOnly}},
		"no cluster selected":                             {pod: tol(plugintest.Pod("remote-mars", "p")), wantPreErr: ReasonNoneSelected},
		"invalid selector":                                {pod: tol(plugintest.Pod("bad", "p")), wantPreErr: "spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values"},
		"RuntimeClass ferry in a Local namespace: Remote": {pod: ferryRC(tol(plugintest.Pod("local", "p"))), want: "virtual-eu,virtual-us", wantSet: "virtual-eu,virtual-us"},
		"RuntimeClass ferry, both-eu: the selector holds": {pod: ferryRC(tol(plugintest.Pod("both-eu", "p"))), want: "virtual-eu", wantSet: "virtual-eu"},
		"RuntimeClass ferry annotated Local: refused": {pod: ferryRC(tol(plugintest.Pod("both-eu", "p", placement.AnnotationPodOffloadingStrategy, "Local"))),
			wantPreErr: `spec.runtimeClassName "ferry" runs the pod on virtual nodes`},
		"RuntimeClass ferry, not offloaded: refused": {pod: ferryRC(tol(plugintest.Pod("plain", "p"))),
			wantPreErr: "spec.runtimeClassName: Forbidden: RuntimeClass \"ferry\" runs pods on ferry's virtual nodes, but namespace plain is not offloaded"},
		"another RuntimeClass in a Local namespace: Local": {pod: withRC(tol(plugintest.Pod("local", "p")), "gvisor"), want: "real-0",
			wantReason: map[string]string{"virtual-us": ReasonLocalOnly}},
	} {
		admitted, pre, res, reasons := run(t, pl, tc.pod, nodes)
		if tc.wantPreErr != "" {
			if pre.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(pre.Message(), tc.wantPreErr) {
				t.Errorf("%s: PreFilter %v, want UnschedulableAndUnresolvable with %q", name, pre, tc.wantPreErr)
			}
			continue
		}
		if pre.IsSkip() != tc.wantSkip {
			t.Errorf("%s: PreFilter %v, skip wanted %v", name, pre, tc.wantSkip)
		}
		if got := strings.Join(admitted, ","); got != tc.want {
			t.Errorf("%s: admitted %s, want %s", name, got, tc.want)
		}
		gotSet := ""
		if !res.AllNodes() {
			gotSet = strings.Join(sets.List(res.NodeNames), ",")
		}
		if gotSet != tc.wantSet {
			t.Errorf("%s: PreFilterResult %q, want %q", name, gotSet, tc.wantSet)
		}
		for node, want := range tc.wantReason {
			if reasons[node] != want {
				t.Errorf("%s: node %s refused with %q, want %q", name, node, reasons[node], want)
			}
		}
		if !tc.wantSkip && strings.Contains(name, "Remote") && reasons["real-0"] != "" && reasons["real-0"] != ReasonRemoteOnly {
			t.Errorf("%s: real node refused with %q", name, reasons["real-0"])
		}
	}
}

func TestPreFilterSetIsBounded(t *testing.T) {
	var nodes []*corev1.Node
	for _, name := range []string{"v-a", "v-b", "v-c"} {
		nodes = append(nodes, plugintest.VirtualNode(name, ferryv1alpha1.ClusterID(name), nil))
	}
	policies := NewStaticPolicies(nso("remote", ferryv1alpha1.PodOffloadingRemote, nil))
	args := DefaultArgs()
	args.MaxPreFilterNodes = 2
	pl := NewWith(args, policies, virtualnodes.NewStatic(nodes...))
	admitted, _, res, _ := run(t, pl, plugintest.Tolerating(plugintest.Pod("remote", "p")), append(nodes, plugintest.RealNode("r")))
	if !res.AllNodes() {
		t.Errorf("3 matching nodes over a limit of 2 gave a node set %v", res.NodeNames)
	}
	if got := strings.Join(admitted, ","); got != "v-a,v-b,v-c" {
		t.Errorf("admitted %s", got)
	}
}

func TestDecodeArgs(t *testing.T) {
	if a, err := DecodeArgs(nil); err != nil || a.MaxPreFilterNodes != 256 {
		t.Errorf("defaults: %+v, %v", a, err)
	}
	if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"maxPreFilterNodes": -1}`)}); err == nil || !strings.Contains(err.Error(), "maxPreFilterNodes") {
		t.Errorf("negative limit: %v", err)
	}
	if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"maxPrefilterNodes": 3}`)}); err == nil || !strings.Contains(err.Error(), `unknown field "maxPrefilterNodes"`) {
		t.Errorf("typo: %v", err)
	}
}
