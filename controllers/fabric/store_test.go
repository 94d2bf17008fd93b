package fabric

import (
	"context"
	"maps"
	"net/netip"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Two writers that read the same table (a restarted manager and the old
// one, or two replicas) cannot both write: the second gets a conflict and
// starts over from the first one's table.
func TestSaveAllocationsIsOptimistic(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	empty, err := loadAllocations(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]netip.Prefix{"pods/eu": netip.MustParsePrefix("10.65.0.0/16")}
	if err := saveAllocations(ctx, c, empty, first); err != nil {
		t.Fatal(err)
	}
	if err := saveAllocations(ctx, c, empty, map[string]netip.Prefix{"pods/us": netip.MustParsePrefix("10.65.0.0/16")}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second creator: %v, want AlreadyExists", err)
	}
	a, _ := loadAllocations(ctx, c)
	b, _ := loadAllocations(ctx, c)
	if !maps.Equal(a.holders, first) {
		t.Fatalf("read back %v, want %v", a.holders, first)
	}
	withUS := map[string]netip.Prefix{"pods/eu": first["pods/eu"], "pods/us": netip.MustParsePrefix("10.66.0.0/16")}
	if err := saveAllocations(ctx, c, a, withUS); err != nil {
		t.Fatal(err)
	}
	if err := saveAllocations(ctx, c, b, map[string]netip.Prefix{"pods/us": netip.MustParsePrefix("10.65.0.0/16")}); !apierrors.IsConflict(err) {
		t.Fatalf("stale writer: %v, want a conflict", err)
	}
	got, _ := loadAllocations(ctx, c)
	if !maps.Equal(got.holders, withUS) {
		t.Fatalf("table %v, want %v", got.holders, withUS)
	}
	// Nothing changed: no write.
	if err := saveAllocations(ctx, c, got, withUS); err != nil {
		t.Fatal(err)
	}
	again, _ := loadAllocations(ctx, c)
	if again.cm.ResourceVersion != got.cm.ResourceVersion {
		t.Errorf("an unchanged table was written")
	}
}
