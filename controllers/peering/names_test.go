package peering

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestTenantNamespaceIsAValidNameForEveryClusterID(t *testing.T) {
	if got := TenantNamespace("consumer"); got != "ferry-tenant-consumer" {
		t.Fatalf("TenantNamespace(consumer) = %q", got)
	}
	long1 := ferryv1alpha1.ClusterID(strings.Repeat("a", 62) + "1")
	long2 := ferryv1alpha1.ClusterID(strings.Repeat("a", 62) + "2")
	n1, n2 := TenantNamespace(long1), TenantNamespace(long2)
	for _, n := range []string{n1, n2} {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("TenantNamespace of a 63-character ID = %q: %v", n, errs)
		}
	}
	if n1 == n2 {
		t.Errorf("two long IDs sharing a prefix got the same tenant namespace %q", n1)
	}
	if TenantNamespace(long1) != n1 {
		t.Error("TenantNamespace is not deterministic")
	}
}

func TestPoolVirtualNodeNamesAreValidStableUniqueAndShort(t *testing.T) {
	long := ferryv1alpha1.ClusterID(strings.Repeat("p", 63))
	cases := []struct {
		provider   ferryv1alpha1.ClusterID
		key, value string
	}{
		{"acme", "gpu-model", "a100"},
		{"acme", "gpu-model", "A100"},                        // upper case
		{"acme", "gpu-model", "a_100"},                       // not in a name
		{"acme", "gpu-model", "a.100"},                       // a dot
		{"acme", "node.kubernetes.io/instance-type", "a100"}, // another key
		{"acme-gpu-model", "gpu-model", "a100"},              // a provider ID sharing a prefix
		{"acme", "gpu-model", "x-a100"},
		{long, "gpu-model", strings.Repeat("v", 63)},
		{long, "gpu-model", strings.Repeat("v", 62) + "w"},
		{"acme", "gpu-model", "-_-"}, // nothing left but dashes
	}
	seen := map[string]int{VirtualNodeName("acme"): -1, VirtualNodeName("acme-gpu-model"): -1}
	for i, c := range cases {
		name := PoolVirtualNodeName(c.provider, c.key, c.value)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("pool %s=%s of %s: name %q: %v", c.key, c.value, c.provider, name, errs)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("pool %+v and %d share the name %q", c, prev, name)
		}
		seen[name] = i
		if again := PoolVirtualNodeName(c.provider, c.key, c.value); again != name {
			t.Errorf("not stable: %q then %q", name, again)
		}
	}
	if got := PoolVirtualNodeName("acme", "gpu-model", "a100"); !strings.HasPrefix(got, "ferry-acme-a100-") {
		t.Errorf("name %q does not start with ferry-acme-a100-", got)
	}
}
