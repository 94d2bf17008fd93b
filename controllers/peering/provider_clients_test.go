package peering

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

const tenantKubeconfig = `
apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: p, user: {token: t}}]
contexts: [{name: p, context: {cluster: p, user: p, namespace: ferry-tenant-home}}]
current-context: p
`

func providerFC(name string, id ferryv1alpha1.ClusterID, role ferryv1alpha1.PeeringRole) *ferryv1alpha1.ForeignCluster {
	return &ferryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: id, Role: role,
			CredentialsSecretRef: &ferryv1alpha1.SecretReference{Namespace: ferryv1alpha1.SystemNamespace, Name: CredentialsSecretName(id)}},
	}
}

func TestProviderClientsShareClientsUntilTheCredentialChanges(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: CredentialsSecretName("eu")},
		Data: map[string][]byte{ferryv1alpha1.KubeconfigSecretKey: []byte(tenantKubeconfig)}}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(
		providerFC("eu", "eu", ferryv1alpha1.RoleProvider), providerFC("them", "them", ferryv1alpha1.RoleConsumer), secret).Build()
	clients := NewProviderClients(c, 5, 10)

	first, err := clients.ForCluster(ctx, "eu")
	if err != nil {
		t.Fatal(err)
	}
	if first.TenantNamespace != "ferry-tenant-home" || first.Config.QPS != 5 || first.Config.Burst != 10 {
		t.Errorf("provider clients: tenant %q, qps %g, burst %d", first.TenantNamespace, first.Config.QPS, first.Config.Burst)
	}
	if again, _ := clients.ForCluster(ctx, "eu"); again != first {
		t.Error("new clients for an unchanged credential")
	}
	secret.Data[ferryv1alpha1.KubeconfigSecretKey] = []byte(tenantKubeconfig + "\n# renewed\n")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if renewed, _ := clients.ForCluster(ctx, "eu"); renewed == first {
		t.Error("the same clients after the credential changed")
	}

	for id, why := range map[ferryv1alpha1.ClusterID]string{"them": "a consumer, not a provider", "nobody": "no ForeignCluster"} {
		if _, err := clients.ForCluster(ctx, id); !errors.Is(err, ErrNotPeered) {
			t.Errorf("%s (%s): %v, want ErrNotPeered", id, why, err)
		}
	}
	var fc ferryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "eu"}, &fc); err != nil {
		t.Fatal(err)
	}
	fc.Finalizers = []string{PeerFinalizer}
	if err := c.Update(ctx, &fc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &fc); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.ForCluster(ctx, "eu"); !errors.Is(err, ErrNotPeered) {
		t.Errorf("while unpeering: %v, want ErrNotPeered", err)
	}
}
