package storage

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// watchingProvider is one provider whose client also watches.
type watchingProvider struct {
	id ferryv1alpha1.ClusterID
	c  client.WithWatch
}

func (p watchingProvider) Client(ctx context.Context, id ferryv1alpha1.ClusterID) (client.Client, error) {
	return p.WatchClient(ctx, id)
}

func (p watchingProvider) WatchClient(_ context.Context, id ferryv1alpha1.ClusterID) (client.WithWatch, error) {
	if id != p.id {
		return nil, ErrNotPeered
	}
	return p.c, nil
}

// A provider claim's binding reaches its volume when the provider binds
// it, not at the next poll: the watch wakes the volume, whose reconcile
// reads the claim from the watch and polls no more while it waits.
func TestProviderClaimBindingWakesItsVolumeWithoutAPoll(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	user := claim("1Gi") // shop/data-web-0
	ref := remoteRef{Cluster: "eu", Namespace: "shop-home", Name: user.Name}
	pv := remoteVolume("pvc-uid-1", user, &storagev1.StorageClass{}, ref, "standard")
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: ferryv1alpha1.NamespaceOffloadingName},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu", TwinNamespace: "shop-home"}}}}
	consumer := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(nso, pv).
		WithIndex(&corev1.PersistentVolume{}, indexRemoteClaim, remoteClaimIndex).Build()
	remote := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop-home", Name: user.Name, Labels: originLabels("home", user)},
		Spec:       claimSpecFor(user, "standard"),
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	provider := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(remote).Build()
	providers := watchingProvider{"eu", noWatchList{provider}}

	w := NewRemoteClaimWatcher(consumer, providers, "home")
	w.Resync = 50 * time.Millisecond
	go func() { _ = w.Start(ctx) }()
	r := &RemoteVolumeReconciler{Client: consumer, Providers: providers, Watcher: w, PendingPoll: time.Hour, SettledPoll: 2 * time.Hour}

	deadline := time.After(10 * time.Second)
	for !w.Watching(ref) {
		select {
		case <-deadline:
			t.Fatal("the provider claims of shop-home are not watched after 10s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	drain(w) // the informer's first list woke the volume
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 2*time.Hour {
		t.Errorf("a watched pending claim's volume is looked at again after %s, want the settled poll (2h): no pending poll", res.RequeueAfter)
	}

	// The provider binds its claim.
	bound := remote.DeepCopy()
	if err := provider.Get(ctx, client.ObjectKeyFromObject(remote), bound); err != nil {
		t.Fatal(err)
	}
	bound.Spec.VolumeName = "pv-real-1"
	bound.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}
	status := bound.Status
	if err := provider.Update(ctx, bound); err != nil {
		t.Fatal(err)
	}
	bound.Status = status
	if err := provider.Status().Update(ctx, bound); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Wake():
		if e.Object.GetName() != pv.Name {
			t.Fatalf("woke volume %q, want %q", e.Object.GetName(), pv.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's binding woke no volume within 5s")
	}
	for {
		if got, ok := w.Get(ref); ok && got.Status.Phase == corev1.ClaimBound {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the watch's cache does not show the binding")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
		t.Fatal(err)
	}
	got := &corev1.PersistentVolume{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(pv), got); err != nil {
		t.Fatal(err)
	}
	capacity := got.Spec.Capacity[corev1.ResourceStorage]
	if got.Annotations[AnnotationRemotePhase] != string(corev1.ClaimBound) || got.Annotations[AnnotationRemoteVolume] != "pv-real-1" || capacity.String() != "2Gi" {
		t.Errorf("volume after the binding: phase %q, volume %q, capacity %s; want Bound, pv-real-1, 2Gi",
			got.Annotations[AnnotationRemotePhase], got.Annotations[AnnotationRemoteVolume], capacity.String())
	}

	// A twin namespace no NamespaceOffloading reports any more is no
	// longer watched.
	nso.Status.Clusters = nil
	if err := consumer.Update(ctx, nso); err != nil {
		t.Fatal(err)
	}
	for w.Watching(ref) {
		select {
		case <-deadline:
			t.Fatal("shop-home is still watched after its offloading went")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// noWatchList is a client of an API server without streaming lists
// (WatchList): the fake client never ends their initial events, so the
// informer falls back to list and watch, as with such a server.
type noWatchList struct{ client.WithWatch }

func (c noWatchList) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.Raw != nil && o.Raw.SendInitialEvents != nil {
		return nil, apierrors.NewBadRequest("sendInitialEvents is not supported")
	}
	return c.WithWatch.Watch(ctx, list, opts...)
}

// drain empties the watcher's wake channel.
func drain(w *RemoteClaimWatcher) {
	for {
		select {
		case <-w.Wake():
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}

// The provider names its claim's volume a write before it binds the claim:
// the local volume is written once, at the binding, not at each step.
func TestPendingProviderClaimWithAVolumeNameWritesNothing(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := claim("1Gi")
	ref := remoteRef{Cluster: "eu", Namespace: "shop-home", Name: user.Name}
	pv := remoteVolume("pvc-uid-1", user, &storagev1.StorageClass{}, ref, "standard")
	consumer := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(pv).Build()
	remote := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop-home", Name: user.Name, Labels: originLabels("home", user)},
		Spec:       claimSpecFor(user, "standard"),
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	remote.Spec.VolumeName = "pv-real-1"
	provider := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(remote).Build()
	r := &RemoteVolumeReconciler{Client: consumer, Providers: oneProvider{"eu", provider}}
	before := &corev1.PersistentVolume{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(pv), before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
		t.Fatal(err)
	}
	after := &corev1.PersistentVolume{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(pv), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the local volume was written (annotations %v) while its provider claim is still Pending", after.Annotations)
	}
}

// Provisioning a claim in a provider writes nothing to the user's claim:
// kube-controller-manager binds it next, and a write just before only
// delays that. The remote volume controller labels it with its provider
// once it is bound.
func TestProviderHeldClaimIsLabelledOnceBoundNotWhileProvisioned(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	user := claim("1Gi") // asks for class "fast"
	node := virtualNode("ferry-eu", "eu")
	node.Annotations = map[string]string{ferryv1alpha1.AnnotationStorageClasses: `[{"name":"fast","providerClass":"ssd"}]`}
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: ferryv1alpha1.NamespaceOffloadingName},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu", TwinNamespace: "shop-home", Phase: ferryv1alpha1.OffloadingReady}}}}
	consumer := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(user, node, nso).Build()
	provider := fake.NewClientBuilder().WithScheme(s).Build()
	providers := oneProvider{"eu", provider}
	p := NewProvisioner(consumer, nil, Options{ClusterID: "home", Namespace: DefaultNamespace, Providers: providers})
	before := &corev1.PersistentVolumeClaim{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(user), before); err != nil {
		t.Fatal(err)
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.StorageClassVirtual}}
	pv, _, err := p.Provision(ctx, provisionOptions(before, class, node.Name, "pvc-uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Get(ctx, client.ObjectKey{Namespace: "shop-home", Name: user.Name}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Fatalf("no provider claim: %v", err)
	}
	after := &corev1.PersistentVolumeClaim{}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(user), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("provisioning in a provider wrote the user's claim (labels %v) before its binding", after.Labels)
	}

	// kube-controller-manager binds the claim to the volume.
	if err := consumer.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	after.Spec.VolumeName = pv.Name
	if err := consumer.Update(ctx, after); err != nil {
		t.Fatal(err)
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: user.Namespace, Name: user.Name, UID: user.UID}
	if err := consumer.Update(ctx, pv); err != nil {
		t.Fatal(err)
	}
	r := &RemoteVolumeReconciler{Client: consumer, Providers: providers}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
		t.Fatal(err)
	}
	if err := consumer.Get(ctx, client.ObjectKeyFromObject(user), after); err != nil {
		t.Fatal(err)
	}
	if after.Labels[ferryv1alpha1.LabelClusterID] != "eu" {
		t.Errorf("bound claim labels %v, want %s=eu", after.Labels, ferryv1alpha1.LabelClusterID)
	}
}

func provisionOptions(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node, pvName string) controller.ProvisionOptions {
	return controller.ProvisionOptions{PVC: pvc, StorageClass: class, SelectedNodeName: node, PVName: pvName}
}

// A provider that lets the consumer list and watch claims cluster-wide is
// watched with one informer, whatever the number of twin namespaces; one
// that does not, with one per twin namespace. Either way every twin
// namespace's claims are read from the watch.
func TestProviderClaimsWatchedOnceWhenTheProviderAllowsClusterWide(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		allowed   bool
		informers int
	}{
		{name: "allowed cluster-wide", allowed: true, informers: 1},
		{name: "twin namespaces only", allowed: false, informers: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var objs []runtime.Object
			var remotes []runtime.Object
			var refs []remoteRef
			for _, ns := range []string{"shop", "blog", "crm"} {
				objs = append(objs, &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName},
					Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "eu", TwinNamespace: ns + "-home"}}}})
				user := claim("1Gi")
				user.Namespace = ns
				remotes = append(remotes, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns + "-home", Name: user.Name, Labels: originLabels("home", user)},
					Spec:       claimSpecFor(user, "standard"),
				})
				refs = append(refs, remoteRef{Cluster: "eu", Namespace: ns + "-home", Name: user.Name})
			}
			consumer := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(objs...).
				WithIndex(&corev1.PersistentVolume{}, indexRemoteClaim, remoteClaimIndex).Build()
			reviews := 0
			provider := fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(remotes...).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if r, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
						reviews++
						attrs := r.Spec.ResourceAttributes
						r.Status.Allowed = tc.allowed && attrs.Resource == "persistentvolumeclaims" && attrs.Namespace == ""
						return nil
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			w := NewRemoteClaimWatcher(consumer, watchingProvider{"eu", &noWatchList{provider}}, "home") // a pointer: the watcher compares clients
			w.Resync = 20 * time.Millisecond
			go func() { _ = w.Start(ctx) }()
			deadline := time.After(10 * time.Second)
			for _, ref := range refs {
				for {
					if got, ok := w.Get(ref); ok && got.Name == ref.Name {
						break
					}
					select {
					case <-deadline:
						t.Fatalf("claim %s is not read from a watch after 10s", ref)
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			time.Sleep(100 * time.Millisecond) // a few more syncs: the scope is not asked again
			w.mu.Lock()
			informers := len(w.watching)
			w.mu.Unlock()
			if informers != tc.informers {
				t.Errorf("%d informers for 3 twin namespaces, want %d", informers, tc.informers)
			}
			if reviews == 0 || reviews > 2 {
				t.Errorf("the provider was asked %d access reviews, want 1 or 2 (list, watch) once, not at every sync", reviews)
			}
		})
	}
}
