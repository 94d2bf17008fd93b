package remotefit

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

func shape(count int32, kv ...string) ferryv1alpha1.NodeShape {
	s := ferryv1alpha1.NodeShape{Count: count, Resources: corev1.ResourceList{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Resources[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return s
}

func podRequesting(kv ...string) *corev1.Pod {
	p := plugintest.Tolerating(plugintest.Pod("ns", "p"))
	reqs := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		reqs[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}}}
	return p
}

func filter(t *testing.T, pl *Plugin, pod *corev1.Pod, node *corev1.Node) (*fwk.Status, *fwk.Status) {
	t.Helper()
	cs := framework.NewCycleState()
	_, pre := pl.PreFilter(context.Background(), cs, pod, nil)
	if !pre.IsSuccess() {
		return pre, nil
	}
	return pre, pl.Filter(context.Background(), cs, pod, plugintest.Info(node))
}

func TestRemoteFit(t *testing.T) {
	// 90 CPUs in total, but no node with more than 8 free.
	big := plugintest.VirtualNode("big", "prov", []ferryv1alpha1.NodeShape{
		shape(10, "cpu", "8", "memory", "16Gi", "pods", "100"),
		shape(2, "cpu", "5", "memory", "64Gi", "pods", "100", "nvidia.com/gpu", "1"),
	})
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		node *corev1.Node
		want string // "" admitted; else a substring of the reason
	}{
		"fits the big shape":          {podRequesting("cpu", "8", "memory", "1Gi"), big, ""},
		"fits the GPU shape":          {podRequesting("cpu", "2", "nvidia.com/gpu", "1"), big, ""},
		"12 CPUs on 8-CPU nodes":      {podRequesting("cpu", "12"), big, "cluster prov: no real node fits the pod: cpu 12 requested, at most 8 free on a node"},
		"each fits, never together":   {podRequesting("cpu", "8", "memory", "64Gi"), big, "cluster prov: no single real node has cpu 8, memory 64Gi, pods 1 free together"},
		"unknown extended resource":   {podRequesting("example.com/fpga", "1"), big, "example.com/fpga 1 requested, at most 0 free"},
		"real node: not judged":       {podRequesting("cpu", "100"), plugintest.RealNode("r"), ""},
		"no summary: allowed":         {podRequesting("cpu", "100"), plugintest.VirtualNode("old", "old", nil), ""},
		"empty summary: nothing fits": {podRequesting("cpu", "1"), plugintest.VirtualNode("full", "full", []ferryv1alpha1.NodeShape{}), "cluster full: no real node has free resources"},
		"pods slot counted":           {podRequesting("cpu", "1"), plugintest.VirtualNode("np", "np", []ferryv1alpha1.NodeShape{shape(1, "cpu", "4", "pods", "0")}), "pods 1 requested, at most 0 free"},
	} {
		pl := NewWith(DefaultArgs(), virtualnodes.NewStatic(tc.node))
		_, st := filter(t, pl, tc.pod, tc.node)
		switch {
		case tc.want == "" && !st.IsSuccess():
			t.Errorf("%s: %v, want admitted", name, st)
		case tc.want != "" && (st.IsSuccess() || !strings.Contains(st.Message(), tc.want)):
			t.Errorf("%s: %v, want refused with %q", name, st, tc.want)
		case tc.want != "" && st.Code() != fwk.Unschedulable:
			t.Errorf("%s: code %v, want Unschedulable (shapes change)", name, st.Code())
		}
	}
}

func TestRemoteFitSkipsPodsThatCannotGoRemote(t *testing.T) {
	pod := podRequesting("cpu", "100")
	pod.Spec.Tolerations = nil
	pre, _ := filter(t, NewWith(DefaultArgs(), virtualnodes.NewStatic()), pod, plugintest.RealNode("r"))
	if !pre.IsSkip() {
		t.Errorf("PreFilter %v, want Skip", pre)
	}
}

func TestRemoteFitArgs(t *testing.T) {
	node := plugintest.VirtualNode("v", "prov", nil)
	args, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"unknownShapes":"Deny"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, st := filter(t, NewWith(args, virtualnodes.NewStatic(node)), podRequesting("cpu", "1"), node); st.IsSuccess() ||
		!strings.Contains(st.Message(), "publishes no node-shape summary") {
		t.Errorf("unknownShapes Deny: %v", st)
	}
	args, err = DecodeArgs(&runtime.Unknown{Raw: []byte(`{"ignoredResources":["example.com/fpga"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	node = plugintest.VirtualNode("v", "prov", []ferryv1alpha1.NodeShape{shape(1, "cpu", "4", "pods", "10")})
	if _, st := filter(t, NewWith(args, virtualnodes.NewStatic(node)), podRequesting("cpu", "1", "example.com/fpga", "1"), node); !st.IsSuccess() {
		t.Errorf("ignored resource still checked: %v", st)
	}
	if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"unknownShapes":"Maybe"}`)}); err == nil || !strings.Contains(err.Error(), "unknownShapes") {
		t.Errorf("bad unknownShapes: %v", err)
	}
}

// FuzzShapes: whatever a node's annotation holds, Filter neither panics
// nor admits a pod on an unreadable summary.
func FuzzShapes(f *testing.F) {
	f.Add(`[{"resources":{"cpu":"8"},"count":1}]`)
	f.Add(`[{"resources":{"cpu":"lots"},"count":1}]`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, raw string) {
		node := plugintest.VirtualNode("v", "prov", nil)
		node.Annotations = map[string]string{ferryv1alpha1.AnnotationNodeShapes: raw}
		_, known, perr := virtualnodes.ParseShapes(raw, true)
		_, st := filter(t, NewWith(DefaultArgs(), virtualnodes.NewStatic(node)), podRequesting("cpu", "1"), node)
		if perr != nil && (st.IsSuccess() || !strings.Contains(st.Message(), "ferry.io/node-shapes")) {
			t.Errorf("unreadable summary %q: %v", raw, st)
		}
		if !known {
			t.Errorf("present annotation reported unknown")
		}
	})
}
