package datagravity

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/clusterselector"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

// TestExcludedClusterNamesClaim runs ClusterSelector and DataGravity in a
// scheduler framework, in the profile's order, as ferry-scheduler does: a
// pod whose data lives in a cluster its namespace's NamespaceOffloading
// excludes is refused at PreFilter with a reason naming the claim and the
// cluster, not the framework's "didn't satisfy plugin(s) ...
// simultaneously".
func TestExcludedClusterNamesClaim(t *testing.T) {
	metrics.Register() // the framework counts into them
	nodes := []*corev1.Node{
		plugintest.RealNode("real"),
		plugintest.VirtualNode("virtual-eu", "eu", nil, "region", "eu"),
		plugintest.VirtualNode("virtual-us", "us", nil, "region", "us"),
	}
	claims := map[string]volume{"data-eu": {cluster: "eu", size: "1Gi"}, "data-local": {size: "1Gi"}}
	inRegion := func(r string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: []string{r}}}}}}
	}
	nso := func(strategy ferryv1alpha1.PodOffloadingStrategy, sel *corev1.NodeSelector) *ferryv1alpha1.NamespaceOffloading {
		return &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ferryv1alpha1.NamespaceOffloadingName},
			Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy, ClusterSelector: sel}}
	}
	for name, tc := range map[string]struct {
		policy  *ferryv1alpha1.NamespaceOffloading
		pod     *corev1.Pod
		want    string // PreFilter's message; "" for success
		wantSet string // with success: the node set
	}{
		"Remote, selector excludes the data's cluster": {
			policy: nso(ferryv1alpha1.PodOffloadingRemote, inRegion("us")), pod: mounting("data-eu"),
			want: "the data of claim data-eu lives in cluster eu, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonNotSelected,
		},
		"LocalAndRemote, selector excludes the data's cluster": {
			policy: nso(ferryv1alpha1.PodOffloadingLocalAndRemote, inRegion("us")), pod: mounting("data-eu"),
			want: "the data of claim data-eu lives in cluster eu, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonNotSelected,
		},
		"Local, data in a provider": {
			policy: nso(ferryv1alpha1.PodOffloadingLocal, nil), pod: mounting("data-eu"),
			want: "the data of claim data-eu lives in cluster eu, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonLocalOnly,
		},
		"not offloaded, data in a provider": {
			pod:  mounting("data-eu"),
			want: "the data of claim data-eu lives in cluster eu, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonNotOffloaded,
		},
		"Remote, data in this cluster": {
			policy: nso(ferryv1alpha1.PodOffloadingRemote, nil), pod: mounting("data-local"),
			want: "the data of claim data-local lives in this cluster, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonRemoteOnly,
		},
		"selector includes the data's cluster": {
			policy: nso(ferryv1alpha1.PodOffloadingRemote, inRegion("eu")), pod: mounting("data-eu"), wantSet: "virtual-eu",
		},
		"annotation narrows to Remote, data in this cluster": {
			policy: nso(ferryv1alpha1.PodOffloadingLocalAndRemote, nil),
			pod:    withAnnotation(mounting("data-local"), placement.AnnotationPodOffloadingStrategy, string(ferryv1alpha1.PodOffloadingRemote)),
			want:   "the data of claim data-local lives in this cluster, which the namespace's NamespaceOffloading excludes: " + clusterselector.ReasonRemoteOnly,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var policies *clusterselector.Policies
			if tc.policy != nil {
				policies = clusterselector.NewStaticPolicies(tc.policy)
			} else {
				policies = clusterselector.NewStaticPolicies()
			}
			index := virtualnodes.NewStatic(nodes...)
			gravity := newPlugin(t, DefaultArgs(), nodes, claims).WithPolicies(policies)
			selector := clusterselector.NewWith(clusterselector.DefaultArgs(), policies, index)
			factory := func(p fwk.Plugin) frameworkruntime.PluginFactory {
				return func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return p, nil }
			}
			ctx := context.Background()
			f, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
				tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
				tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
				// The order of manifests/scheduler/config.yaml.
				tf.RegisterPluginAsExtensions(clusterselector.Name, factory(selector), "PreFilter", "Filter"),
				tf.RegisterPluginAsExtensions(Name, factory(gravity), "PreFilter", "Filter"),
			}, "ferry-scheduler", frameworkruntime.WithSnapshotSharedLister(cache.NewSnapshot(nil, nodes)))
			if err != nil {
				t.Fatal(err)
			}
			res, st, _ := f.RunPreFilterPlugins(ctx, framework.NewCycleState(), tc.pod)
			if tc.want == "" {
				if !st.IsSuccess() {
					t.Fatalf("PreFilter: %v, want success", st)
				}
				got := ""
				if !res.AllNodes() {
					got = strings.Join(sets.List(res.NodeNames), ",")
				}
				if got != tc.wantSet {
					t.Errorf("node set %q, want %q", got, tc.wantSet)
				}
				return
			}
			if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != tc.want {
				t.Fatalf("PreFilter: %v %q,\nwant UnschedulableAndUnresolvable %q", st.Code(), st.Message(), tc.want)
			}
			if st.Plugin() != Name {
				t.Errorf("refused by %q, want %s (its events requeue the pod)", st.Plugin(), Name)
			}
		})
	}
}

// TestRequeuedOnNamespaceOffloading: a pod refused because its namespace
// excludes its data's cluster is requeued when that NamespaceOffloading
// changes (and only then), as ClusterSelector's refusals are.
func TestRequeuedOnNamespaceOffloading(t *testing.T) {
	pl := newPlugin(t, DefaultArgs(), nil, nil)
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Event.Resource == clusterselector.NamespaceOffloadingsResource {
			t.Fatalf("without policies, registered %v", e.Event)
		}
	}
	pl.WithPolicies(clusterselector.NewStaticPolicies())
	if events, err = pl.EventsToRegister(context.Background()); err != nil {
		t.Fatal(err)
	}
	var hint fwk.QueueingHintFn
	for _, e := range events {
		if e.Event.Resource == clusterselector.NamespaceOffloadingsResource {
			hint = e.QueueingHintFn
		}
	}
	if hint == nil {
		t.Fatalf("events %v: no NamespaceOffloading event", events)
	}
	changed := func(ns string) any {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ferryv1alpha1.GroupVersion.String())
		u.SetKind("NamespaceOffloading")
		u.SetNamespace(ns)
		u.SetName(ferryv1alpha1.NamespaceOffloadingName)
		return u
	}
	pod := mounting("data")
	if h, err := hint(klog.Background(), pod, nil, changed("ns")); err != nil || h != fwk.Queue {
		t.Errorf("own namespace's NamespaceOffloading changed: %v %v, want Queue", h, err)
	}
	if h, err := hint(klog.Background(), pod, nil, changed("other")); err != nil || h != fwk.QueueSkip {
		t.Errorf("another namespace's: %v %v, want QueueSkip", h, err)
	}
}

func withAnnotation(p *corev1.Pod, k, v string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
	return p
}

// BenchmarkPreFilterBound is PreFilter's cost for a pod with a bound claim
// in a provider, without and with the namespace's policy check.
func BenchmarkPreFilterBound(b *testing.B) {
	nodes := []*corev1.Node{plugintest.RealNode("real"), plugintest.VirtualNode("virtual-eu", "eu", nil), plugintest.VirtualNode("virtual-us", "us", nil)}
	t := &testing.T{}
	pod := mounting("data-eu")
	policy := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ferryv1alpha1.NamespaceOffloadingName},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote, ClusterSelector: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}}}}
	for _, withPolicies := range []bool{false, true} {
		pl := newPlugin(t, DefaultArgs(), nodes, map[string]volume{"data-eu": {cluster: "eu", size: "1Gi"}})
		name := "without policies"
		if withPolicies {
			pl.WithPolicies(clusterselector.NewStaticPolicies(policy))
			name = "with policies"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, st := pl.PreFilter(context.Background(), framework.NewCycleState(), pod, nil); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		})
	}
}
