package offloading

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestTwinNamespaceNameFollowsTheMappingStrategy(t *testing.T) {
	long := strings.Repeat("n", 60)
	for name, tc := range map[string]struct {
		spec      ferryv1alpha1.NamespaceOffloadingSpec
		namespace string
		// want is the name, or with a trailing "*" its first 55 characters
		// (8 hex digits of a hash follow).
		want string
	}{
		"DefaultName when unset":               {ferryv1alpha1.NamespaceOffloadingSpec{}, "shop", "shop-home"},
		"DefaultName":                          {ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingDefaultName}, "shop", "shop-home"},
		"DefaultName too long, cut and hashed": {ferryv1alpha1.NamespaceOffloadingSpec{}, long, long[:54] + "-*"},
		"EnforceSameName":                      {ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName}, "shop", "shop"},
		"SelectedName": {ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingSelectedName, RemoteNamespaceName: "chosen"},
			"shop", "chosen"},
	} {
		got := TwinNamespaceName(&tc.spec, tc.namespace, "home")
		if prefix, hashed := strings.CutSuffix(tc.want, "*"); hashed {
			if len(got) != 63 || !strings.HasPrefix(got, prefix) {
				t.Errorf("%s: %q, want %s<8 hex digits>", name, got, prefix)
			}
		} else if got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestDefaultTwinNamespaceNameKeepsLongNamesDistinct(t *testing.T) {
	base := strings.Repeat("a", 58)
	a := DefaultTwinNamespaceName(base+"x", "consumer-with-a-long-id")
	b := DefaultTwinNamespaceName(base+"y", "consumer-with-a-long-id")
	c := DefaultTwinNamespaceName(base+"x", "consumer-with-a-long-iD2")
	if a == b || a == c {
		t.Errorf("names that differ past the cut collide: %q %q %q", a, b, c)
	}
	if len(a) != 63 {
		t.Errorf("%q: %d characters, want the 63 allowed", a, len(a))
	}
}

// FuzzDefaultTwinNamespaceName checks, for any namespace and consumer ID
// (both DNS labels, as the API server guarantees), that the twin's name is
// a valid namespace name, the same every time, and distinct for distinct
// inputs. Two inputs whose "<namespace>-<consumer>" is the same string
// (a-b + c and a + b-c) share it by design; the provider refuses the second
// with NamespaceConflict rather than mixing them.
func FuzzDefaultTwinNamespaceName(f *testing.F) {
	for _, seed := range [][4]string{
		{"shop", "home", "shop", "away"},
		{"default", "c1", "default", "c2"},
		{strings.Repeat("a", 63), "consumer", strings.Repeat("a", 62) + "b", "consumer"},
		{strings.Repeat("x", 63), strings.Repeat("y", 63), strings.Repeat("x", 63), strings.Repeat("y", 62) + "z"},
		{"a-", "b", "a", "-b"},
		{"n", "0", "n0", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, ns1, id1, ns2, id2 string) {
		ns1, id1, ns2, id2 = toLabel(ns1), toLabel(id1), toLabel(ns2), toLabel(id2)
		name := DefaultTwinNamespaceName(ns1, ferryv1alpha1.ClusterID(id1))
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Fatalf("DefaultTwinNamespaceName(%q, %q) = %q: %v", ns1, id1, name, errs)
		}
		if again := DefaultTwinNamespaceName(ns1, ferryv1alpha1.ClusterID(id1)); again != name {
			t.Fatalf("not deterministic: %q then %q", name, again)
		}
		if ns1+"-"+id1 == ns2+"-"+id2 {
			return
		}
		if other := DefaultTwinNamespaceName(ns2, ferryv1alpha1.ClusterID(id2)); other == name {
			t.Fatalf("(%q, %q) and (%q, %q) both map to %q", ns1, id1, ns2, id2, name)
		}
	})
}

// toLabel turns any string into a DNS label (what the API server lets
// through as a namespace name or ClusterID), so the fuzzer's inputs all count.
func toLabel(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b[:min(len(b), 63)]), "-")
	if out == "" {
		return "x"
	}
	return out
}
