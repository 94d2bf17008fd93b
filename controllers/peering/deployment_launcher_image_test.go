package peering

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// A controller manager without --virtual-kubelet-image starts (a provider
// needs none) and fails only when it must run a virtual kubelet, naming the
// flag, without making a Deployment of no image.
func TestDeploymentLauncherWithoutAnImageFailsNamingTheFlag(t *testing.T) {
	vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: "ferry-provider", Namespace: ferryv1alpha1.SystemNamespace}}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(vn).Build()
	l := &DeploymentLauncher{Client: c}
	err := l.Ensure(t.Context(), client.ObjectKeyFromObject(vn))
	if err == nil || !strings.Contains(err.Error(), "--virtual-kubelet-image") {
		t.Fatalf("Ensure = %v, want an error naming --virtual-kubelet-image", err)
	}
	var deployments appsv1.DeploymentList
	if err := c.List(t.Context(), &deployments); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 0 {
		t.Errorf("Ensure made Deployment %s with image %q", deployments.Items[0].Name, deployments.Items[0].Spec.Template.Spec.Containers[0].Image)
	}
}
