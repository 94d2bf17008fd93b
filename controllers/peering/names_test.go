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
