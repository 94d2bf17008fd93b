package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

func fakeCluster(role string, id ferryv1alpha1.ClusterID, objs ...client.Object) *cluster {
	return &cluster{role: role, id: id, c: fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(objs...).Build()}
}

func foreign(peer ferryv1alpha1.ClusterID, role ferryv1alpha1.PeeringRole) *ferryv1alpha1.ForeignCluster {
	fc := &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: string(peer)}, Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: peer, Role: role}}
	if fc.Spec.IsProvider() {
		fc.Spec.APIServerURL = "https://" + string(peer) + ".example:6443"
		fc.Spec.CredentialsSecretRef = &ferryv1alpha1.SecretReference{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-peer-" + string(peer)}
		fc.Spec.ResourceRequest = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	return fc
}

// checkNotPeered finds the peering the other way round, and refuses an
// existing peering or half of one, naming what it found.
func TestCheckNotPeeredFindsTheReverseDirection(t *testing.T) {
	for name, tc := range map[string]struct {
		onConsumer, onProvider *ferryv1alpha1.ForeignCluster
		reverse                bool
		err                    string
	}{
		"no peering":                            {},
		"the provider offloads to the consumer": {onConsumer: foreign("b", ferryv1alpha1.RoleConsumer), onProvider: foreign("a", ferryv1alpha1.RoleProvider), reverse: true},
		"peered already":                        {onConsumer: foreign("b", ferryv1alpha1.RoleProvider), onProvider: foreign("a", ferryv1alpha1.RoleConsumer), err: "already peered: consumer \"a\""},
		"peered both ways already":              {onConsumer: foreign("b", ferryv1alpha1.RoleConsumerAndProvider), onProvider: foreign("a", ferryv1alpha1.RoleConsumerAndProvider), err: "role ConsumerAndProvider"},
		"the provider serves the consumer":      {onProvider: foreign("a", ferryv1alpha1.RoleConsumer), err: "already peered: provider \"b\""},
		"half of the reverse, on the consumer":  {onConsumer: foreign("b", ferryv1alpha1.RoleConsumer), err: "half a peering: consumer \"a\" has ForeignCluster \"b\""},
		"half of the reverse, on the provider":  {onProvider: foreign("a", ferryv1alpha1.RoleProvider), err: "half a peering: provider \"b\" has ForeignCluster \"a\""},
	} {
		t.Run(name, func(t *testing.T) {
			var cObjs, pObjs []client.Object
			if tc.onConsumer != nil {
				cObjs = append(cObjs, tc.onConsumer)
			}
			if tc.onProvider != nil {
				pObjs = append(pObjs, tc.onProvider)
			}
			reverse, err := checkNotPeered(t.Context(), fakeCluster("consumer", "a", cObjs...), fakeCluster("provider", "b", pObjs...))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to say %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (reverse != nil) != tc.reverse {
				t.Errorf("reverse = %+v, want found %v", reverse, tc.reverse)
			}
		})
	}
}

// Dropping one direction of a peering both ways leaves each ForeignCluster
// with the other role, and the consumer's without the provider's fields
// once the controllers are done (here at once: no finalizers).
func TestDropOneDirectionKeepsTheOther(t *testing.T) {
	ctx := t.Context()
	consumer := fakeCluster("consumer", "a", foreign("b", ferryv1alpha1.RoleConsumerAndProvider))
	provider := fakeCluster("provider", "b", foreign("a", ferryv1alpha1.RoleConsumerAndProvider))
	var onConsumer, onProvider ferryv1alpha1.ForeignCluster
	if err := consumer.c.Get(ctx, client.ObjectKey{Name: "b"}, &onConsumer); err != nil {
		t.Fatal(err)
	}
	if err := dropProvider(ctx, consumer, &onConsumer); err != nil {
		t.Fatal(err)
	}
	if err := consumer.c.Get(ctx, client.ObjectKey{Name: "b"}, &onConsumer); err != nil {
		t.Fatal(err)
	}
	if s := onConsumer.Spec; s.Role != ferryv1alpha1.RoleConsumer || s.APIServerURL != "" || s.CredentialsSecretRef != nil || s.ResourceRequest != nil {
		t.Errorf("consumer's ForeignCluster = %+v, want a Consumer without the provider's fields", s)
	}
	if err := provider.c.Get(ctx, client.ObjectKey{Name: "a"}, &onProvider); err != nil {
		t.Fatal(err)
	}
	// The tenant namespace is gone from the provider (kube has none).
	provider.kube = kubefake.NewClientset()
	if err := dropConsumer(ctx, provider, &onProvider); err != nil {
		t.Fatal(err)
	}
	if err := provider.c.Get(ctx, client.ObjectKey{Name: "a"}, &onProvider); err != nil {
		t.Fatal(err)
	}
	if s := onProvider.Spec; s.Role != ferryv1alpha1.RoleProvider || s.APIServerURL == "" || s.CredentialsSecretRef == nil {
		t.Errorf("provider's ForeignCluster = %+v, want a Provider that keeps its fields", s)
	}
}

// setRole works from the current object, whatever the controllers wrote
// since it was read, and refuses when the role is no longer the expected one.
func TestSetRoleRereadsAndChecksTheRole(t *testing.T) {
	ctx := t.Context()
	c := fakeCluster("consumer", "a", foreign("b", ferryv1alpha1.RoleConsumer)).c
	var stale, fresh ferryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "b"}, &stale); err != nil {
		t.Fatal(err)
	}
	fresh = *stale.DeepCopy()
	fresh.Finalizers = []string{"ferry.io/tenant"} // a controller's write
	if err := c.Update(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	if err := setRole(ctx, c, stale.DeepCopy(), ferryv1alpha1.RoleConsumer, ferryv1alpha1.RoleConsumerAndProvider, func(s *ferryv1alpha1.ForeignClusterSpec) {
		s.APIServerURL, s.CredentialsSecretRef = "https://b.example:6443", &ferryv1alpha1.SecretReference{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-peer-b"}
	}); err != nil {
		t.Fatalf("from a stale copy: %v", err)
	}
	var got ferryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "b"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Role != ferryv1alpha1.RoleConsumerAndProvider || len(got.Finalizers) != 1 {
		t.Errorf("got role %s, finalizers %v; want ConsumerAndProvider, the controller's finalizer kept", got.Spec.Role, got.Finalizers)
	}
	err := setRole(ctx, c, &got, ferryv1alpha1.RoleProvider, ferryv1alpha1.RoleConsumerAndProvider, nil)
	if err == nil || !strings.Contains(err.Error(), "role changed meanwhile: ConsumerAndProvider, not Provider") {
		t.Errorf("from the wrong role: %v", err)
	}
}

// Unpeering clusters that are not peered this way round removes nothing
// and fails naming both (kubectl delete of a missing object fails too),
// whatever else is there; anything of the peering left is removed.
func TestUnpeerOfNoPeeringFailsNamingBothClusters(t *testing.T) {
	credential := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("b")}}
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: peering.TenantNamespace("a")}}
	for name, tc := range map[string]struct {
		onConsumer, onProvider []client.Object
		peered                 bool
	}{
		"nothing":                               {},
		"the provider offloads to the consumer": {onConsumer: []client.Object{foreign("b", ferryv1alpha1.RoleConsumer)}, onProvider: []client.Object{foreign("a", ferryv1alpha1.RoleProvider)}},
		"peered":                                {onConsumer: []client.Object{foreign("b", ferryv1alpha1.RoleProvider)}, onProvider: []client.Object{foreign("a", ferryv1alpha1.RoleConsumer)}, peered: true},
		"peered both ways":                      {onConsumer: []client.Object{foreign("b", ferryv1alpha1.RoleConsumerAndProvider)}, peered: true},
		"half a peering, on the provider":       {onProvider: []client.Object{foreign("a", ferryv1alpha1.RoleConsumer)}, peered: true},
		"a credential left by a failed peer":    {onConsumer: []client.Object{credential}, peered: true},
		"a tenant left by a failed peer":        {onProvider: []client.Object{tenant}, peered: true},
	} {
		t.Run(name, func(t *testing.T) {
			consumer, provider := fakeCluster("consumer", "a", tc.onConsumer...), fakeCluster("provider", "b", tc.onProvider...)
			provider.kube = kubefake.NewClientset()
			err := checkPeered(t.Context(), consumer, provider)
			if tc.peered {
				if err != nil {
					t.Fatalf("checkPeered = %v, want the peering found", err)
				}
				return
			}
			var out strings.Builder
			err = unpeer(t.Context(), &out, consumer, provider)
			if !errors.Is(err, ErrNotPeered) || !strings.Contains(err.Error(), `"a" does not offload to "b"`) {
				t.Fatalf("unpeer = %v, want ErrNotPeered naming both clusters", err)
			}
			if out.Len() != 0 {
				t.Errorf("unpeer printed %q before finding nothing to do", out.String())
			}
			for _, obj := range tc.onConsumer {
				if err := consumer.c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
					t.Errorf("unpeer removed %s from the consumer: %v", obj.GetName(), err)
				}
			}
		})
	}
}

func TestFencingFlags(t *testing.T) {
	f, err := FencingFlags(8*time.Second, 4*time.Second, true, true)
	if err != nil || f.LeaseDurationSeconds != 8 || f.SafetyMarginSeconds != 4 || !f.OutOfService || f.SelfFencing != nil {
		t.Fatalf("FencingFlags = %+v, %v", f, err)
	}
	if f, err := FencingFlags(0, 0, false, true); err != nil || f != (ferryv1alpha1.Fencing{}) {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	if f, err := FencingFlags(0, 0, false, false); err != nil || f.SelfFencing == nil || *f.SelfFencing {
		t.Fatalf("self-fencing off: %+v, %v", f, err)
	}
	for _, bad := range []struct {
		lease, margin time.Duration
		oos, self     bool
		flag          string
	}{
		{3 * time.Second, 0, false, true, "--lease-duration"},
		{4500 * time.Millisecond, 0, false, true, "--lease-duration"},
		{0, 500 * time.Millisecond, false, true, "--fencing-margin"},
		{0, 25 * time.Hour, false, true, "--fencing-margin"},
		{0, 0, true, false, "--out-of-service-failover"},
	} {
		if _, err := FencingFlags(bad.lease, bad.margin, bad.oos, bad.self); err == nil || !strings.Contains(err.Error(), bad.flag) {
			t.Errorf("FencingFlags(%v, %v, %v, %v) = %v, want an error naming %s", bad.lease, bad.margin, bad.oos, bad.self, err, bad.flag)
		}
	}
}
