package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestParseClusterSelectorMakesOneTerm(t *testing.T) {
	in := corev1.NodeSelectorOpIn
	for input, want := range map[string][]corev1.NodeSelectorRequirement{
		"":           nil,
		"  ":         nil,
		"region=eu":  {{Key: "region", Operator: in, Values: []string{"eu"}}},
		"region==eu": {{Key: "region", Operator: in, Values: []string{"eu"}}},
		"region=eu,tier in (b,a),!gpu": {
			{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: "region", Operator: in, Values: []string{"eu"}},
			{Key: "tier", Operator: in, Values: []string{"a", "b"}},
		},
		"zone!=a,tier notin (x)": {
			{Key: "tier", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}},
			{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}},
		},
		"example.com/gpu,cores>4,cores<64": {
			{Key: "cores", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
			{Key: "cores", Operator: corev1.NodeSelectorOpLt, Values: []string{"64"}},
			{Key: "example.com/gpu", Operator: corev1.NodeSelectorOpExists},
		},
	} {
		got, err := ParseClusterSelector(input)
		if err != nil {
			t.Errorf("%q: %v", input, err)
			continue
		}
		if want == nil {
			if got != nil {
				t.Errorf("%q: %v, want nil (every provider)", input, got)
			}
			continue
		}
		if got == nil || len(got.NodeSelectorTerms) != 1 || !equality.Semantic.DeepEqual(got.NodeSelectorTerms[0].MatchExpressions, want) {
			t.Errorf("%q:\n got %+v\nwant one term %+v", input, got, want)
		}
	}
}

func TestParseClusterSelectorNamesTheFlag(t *testing.T) {
	for input, want := range map[string]string{
		"region in (eu":                     "--cluster-selector",
		"bad key!=x":                        "--cluster-selector",
		"cores>many":                        "--cluster-selector",
		"region=e u":                        "--cluster-selector",
		"a=b,,c=d":                          "--cluster-selector",
		"=eu":                               "--cluster-selector",
		"region=" + strings.Repeat("x", 64): "--cluster-selector",
	} {
		if _, err := ParseClusterSelector(input); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), input) {
			t.Errorf("%q: %v, want an error naming %s and the input", input, err, want)
		}
	}
}

func TestOffloadingSpecFromFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		pod, mapping, remote, selector string
		mappingSet                     bool
		want                           string // error fragment, "" for success
		check                          func(ferryv1alpha1.NamespaceOffloadingSpec) bool
	}{
		"defaults": {pod: "LocalAndRemote", mapping: "DefaultName", check: func(s ferryv1alpha1.NamespaceOffloadingSpec) bool {
			return s.PodOffloadingStrategy == ferryv1alpha1.PodOffloadingLocalAndRemote && s.NamespaceMappingStrategy == ferryv1alpha1.NamespaceMappingDefaultName && s.ClusterSelector == nil
		}},
		"remote name implies SelectedName": {pod: "Remote", mapping: "DefaultName", remote: "shop-eu", check: func(s ferryv1alpha1.NamespaceOffloadingSpec) bool {
			return s.NamespaceMappingStrategy == ferryv1alpha1.NamespaceMappingSelectedName && s.RemoteNamespaceName == "shop-eu"
		}},
		"selector": {pod: "Local", mapping: "EnforceSameName", mappingSet: true, selector: "region=eu", check: func(s ferryv1alpha1.NamespaceOffloadingSpec) bool {
			return s.ClusterSelector != nil && s.ClusterSelector.NodeSelectorTerms[0].MatchExpressions[0].Key == "region"
		}},
		"unknown pod strategy":  {pod: "remote", mapping: "DefaultName", want: `--pod-offloading-strategy "remote": must be one of Local, Remote, LocalAndRemote`},
		"unknown mapping":       {pod: "Local", mapping: "SameName", mappingSet: true, want: `--namespace-mapping-strategy "SameName": must be one of DefaultName, EnforceSameName, SelectedName`},
		"SelectedName, no name": {pod: "Local", mapping: "SelectedName", mappingSet: true, want: "--remote-namespace-name is required"},
		"name with another one": {pod: "Local", mapping: "EnforceSameName", mappingSet: true, remote: "x", want: "only used with --namespace-mapping-strategy SelectedName, not EnforceSameName"},
		"name not a DNS label":  {pod: "Local", mapping: "SelectedName", mappingSet: true, remote: "Shop_EU", want: `--remote-namespace-name "Shop_EU": not a valid namespace name`},
		"bad selector":          {pod: "Local", mapping: "DefaultName", selector: "tier in (", want: "--cluster-selector"},
	} {
		spec, err := offloadingSpec(tc.pod, tc.mapping, tc.remote, tc.selector, tc.mappingSet)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want == "" && !tc.check(spec):
			t.Errorf("%s: unexpected spec %+v", name, spec)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func TestSchedulerNameFlag(t *testing.T) {
	for in, want := range map[string]string{"": "", "ferry-scheduler": "", "Ferry_Scheduler": `--scheduler-name "Ferry_Scheduler": not a valid scheduler name`} {
		got, err := schedulerNameFlag(in)
		switch {
		case want == "" && (err != nil || got != in):
			t.Errorf("schedulerNameFlag(%q) = %q, %v", in, got, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("schedulerNameFlag(%q) error %v, want one containing %q", in, err, want)
		}
	}
}

func TestPlacementPreferenceFlag(t *testing.T) {
	lr, local := ferryv1alpha1.PodOffloadingLocalAndRemote, ferryv1alpha1.PodOffloadingLocal
	for _, tc := range []struct {
		value    string
		strategy ferryv1alpha1.PodOffloadingStrategy
		want     ferryv1alpha1.PlacementPreference
		err      string
	}{
		{"None", lr, ferryv1alpha1.PlacementPreferenceNone, ""},
		{"None", local, ferryv1alpha1.PlacementPreferenceNone, ""},
		{"LocalFirst", lr, ferryv1alpha1.PlacementPreferenceLocalFirst, ""},
		{"RemoteFirst", lr, ferryv1alpha1.PlacementPreferenceRemoteFirst, ""},
		{"localfirst", lr, "", `--placement-preference`},
		{"LocalFirst", local, "", "--placement-preference LocalFirst needs --pod-offloading-strategy LocalAndRemote, not Local"},
	} {
		got, err := placementPreferenceFlag(tc.value, tc.strategy)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("placementPreferenceFlag(%q, %s) = %q, %v; want %q", tc.value, tc.strategy, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("placementPreferenceFlag(%q, %s) error %v, want one containing %q", tc.value, tc.strategy, err, tc.err)
		}
	}
}

// FuzzParseClusterSelector: any input is refused with an error naming the
// flag, or becomes a clusterSelector that the controller accepts and that
// selects exactly the virtual nodes the label selector would.
func FuzzParseClusterSelector(f *testing.F) {
	for _, seed := range []string{
		"", "region=eu", "region=eu,tier in (a,b),!gpu", "zone!=a", "tier notin (x,y)", "gpu", "!gpu",
		"cores>4", "cores<64", "a==b", "example.com/tier=gold", "a=", "a in (", "a b", "x>y", "a=b,a=c",
	} {
		f.Add(seed, uint16(0xffff))
		f.Add(seed, uint16(0x00f0))
	}
	f.Fuzz(func(t *testing.T, input string, mask uint16) {
		ns, err := ParseClusterSelector(input)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--cluster-selector") {
				t.Fatalf("%q: error %q does not name the flag", input, err)
			}
			return
		}
		sel, err := placement.NewClusterSelector(ns)
		if err != nil {
			t.Fatalf("%q became a clusterSelector the controller refuses: %v", input, err)
		}
		ls, err := labels.Parse(input)
		if err != nil {
			t.Fatalf("%q parsed, but not as a label selector: %v", input, err)
		}
		// A node with some of the selector's keys, set to one of its values
		// or another, as mask says: both sides must agree on every one.
		reqs, _ := ls.Requirements()
		node := labels.Set{}
		for i, r := range reqs {
			if mask&(1<<(i%8)) == 0 {
				continue
			}
			value := "other"
			if vs := r.Values().List(); len(vs) > 0 && mask&(1<<(8+i%8)) != 0 {
				value = vs[0]
			}
			node[r.Key()] = value
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-p", Labels: node}}
		if got, want := sel.Matches(n), ls.Matches(node); got != want {
			t.Fatalf("%q on labels %v: clusterSelector matches=%t, label selector matches=%t", input, node, got, want)
		}
	})
}

func TestShellCompletionOffersStrategies(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{cobra.ShellCompRequestCmd, "offload", "namespace", "shop", "--pod-offloading-strategy", ""})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Local\n", "Remote\n", "LocalAndRemote\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("completion of --pod-offloading-strategy offers no %q:\n%s", strings.TrimSpace(want), out.String())
		}
	}
}
