package reflection

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func nsOffloading(ns string, clusters ...ferryv1alpha1.ClusterOffloadingStatus) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName},
		Status:     ferryv1alpha1.NamespaceOffloadingStatus{Clusters: clusters},
	}
}

func TestNamespacesRefresh(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	n := &namespaces{provider: "eu"}
	ready := func(id ferryv1alpha1.ClusterID, twin string) ferryv1alpha1.ClusterOffloadingStatus {
		return ferryv1alpha1.ClusterOffloadingStatus{ClusterID: id, TwinNamespace: twin, Phase: ferryv1alpha1.OffloadingReady}
	}
	_ = store.Add(nsOffloading("shop", ready("eu", "shop-home"), ready("us", "shop-home")))
	_ = store.Add(nsOffloading("blog", ready("us", "blog-home")))
	_ = store.Add(nsOffloading("cart", ferryv1alpha1.ClusterOffloadingStatus{ClusterID: "eu", TwinNamespace: "cart-home", Phase: ferryv1alpha1.OffloadingTerminating}))

	changes := n.refresh(store)
	if want := []change{{local: "shop", twin: "shop-home", added: true}}; !slices.Equal(changes, want) {
		t.Fatalf("first refresh: changes %v, want %v", changes, want)
	}
	if n.twin("shop") != "shop-home" || n.local("shop-home") != "shop" || n.twin("blog") != "" || n.twin("cart") != "" {
		t.Fatalf("mapping wrong: %v / %v", n.byLocal, n.byTwin)
	}
	if changes := n.refresh(store); len(changes) != 0 {
		t.Fatalf("unchanged store: changes %v, want none", changes)
	}
	// The twin is renamed (offloaded afresh), then the offloading goes.
	_ = store.Update(nsOffloading("shop", ready("eu", "shop-2")))
	changes = n.refresh(store)
	slices.SortFunc(changes, func(a, b change) int {
		if a.added == b.added {
			return 0
		}
		if a.added {
			return 1
		}
		return -1
	})
	if want := []change{{local: "shop", twin: "shop-home"}, {local: "shop", twin: "shop-2", added: true}}; !slices.Equal(changes, want) {
		t.Fatalf("renamed twin: changes %v, want %v", changes, want)
	}
	_ = store.Delete(nsOffloading("shop"))
	if changes := n.refresh(store); !slices.Equal(changes, []change{{local: "shop", twin: "shop-2"}}) {
		t.Fatalf("deleted offloading: changes %v", changes)
	}
	if n.local("shop-2") != "" || len(n.twins()) != 0 {
		t.Fatalf("mapping not emptied: %v", n.byTwin)
	}
}
