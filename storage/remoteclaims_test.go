package storage

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

type oneProvider struct {
	id ferryv1alpha1.ClusterID
	c  client.Client
}

func (p oneProvider) Client(_ context.Context, id ferryv1alpha1.ClusterID) (client.Client, error) {
	if id != p.id {
		return nil, ErrNotPeered
	}
	return p.c, nil
}

// Only a provider claim nothing stands for goes: its claim is gone (or is
// another claim of that name), no volume stands for it, and it is not new.
func TestRemoteClaimCollectorDeletesOnlyWhatNothingStandsFor(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	user := claim("1Gi") // shop/data-web-0, uid-1
	remote := func(name string, origin *corev1.PersistentVolumeClaim, created metav1.Time) *corev1.PersistentVolumeClaim {
		o := origin.DeepCopy()
		o.Name = name
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop-home", Name: name,
			CreationTimestamp: created, Labels: originLabels("home", o)}}
	}
	gone := claim("1Gi")
	gone.UID = "uid-gone"
	stood := remote("stood-for", gone, old)
	pv := remoteVolume("pvc-x", gone, &storagev1.StorageClass{}, remoteRef{Cluster: "eu", Namespace: "shop-home", Name: "stood-for"}, "standard")
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: ferryv1alpha1.NamespaceOffloadingName},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu", TwinNamespace: "shop-home"}}}}
	consumer := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(user, nso, pv).Build()
	provider := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(
		remote("data-web-0", user, old), // its claim waits for its volume
		stood,
		remote("orphan", gone, old),
		remote("young", gone, metav1.Now()),
	).Build()
	r := &RemoteClaimCollector{Client: consumer, Providers: oneProvider{"eu", provider}, ClusterID: "home"}
	if err := r.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, kept := range map[string]bool{"data-web-0": true, "stood-for": true, "young": true, "orphan": false} {
		err := provider.Get(context.Background(), client.ObjectKey{Namespace: "shop-home", Name: name}, &corev1.PersistentVolumeClaim{})
		if kept && err != nil {
			t.Errorf("%s deleted (%v), want it kept", name, err)
		}
		if !kept && !apierrors.IsNotFound(err) {
			t.Errorf("%s kept (%v), want it deleted", name, err)
		}
	}
}
