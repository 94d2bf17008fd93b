// Package realbed sets up the real-node bed that the e2e specs labelled
// `real` and `make bench-real` share: ferry's images built for linux/amd64,
// two test-bed clusters with one real node each on one underlay, ferry
// installed from those images (Helm on the consumer, `ferryctl install` on
// the provider, the network fabric's gateway on with a NodePort Service),
// and the two peered with `ferryctl peer`. It returns errors rather than
// asserting, so that a plain main and a ginkgo suite can both use it.
package realbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/cmd/ferryctl/app"
	"github.com/ferry-io/ferry/hack/crossbuild"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
	"github.com/ferry-io/ferry/test/testbed/images"
)

// ImageRegistry and ImageTag name ferry's images on the real nodes: built
// by hack/images for linux/amd64, imported into every node's containerd,
// never pulled.
const (
	ImageRegistry = "ferry.test"
	ImageTag      = "e2e"
)

// The cluster IDs of the bed.
const (
	ConsumerID ferryv1alpha1.ClusterID = "real-consumer"
	ProviderID ferryv1alpha1.ClusterID = "real-provider"
)

// BuildFerryImages builds every ferry component's image for linux/amd64
// with hack/images (as `make images IMAGE_PLATFORMS=linux/amd64` does) into
// dir, from the module at root, and exports them as one archive tagged
// <ImageRegistry>/<component>:<ImageTag> for Options.Images of real nodes.
// It returns the archive's path.
func BuildFerryImages(ctx context.Context, root, dir string) (string, error) {
	layout := filepath.Join(dir, "layout")
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/images", "-platforms", "linux/amd64", "-version", ImageTag, "-out", layout)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/images: %w\n%s", err, out)
	}
	tarball := filepath.Join(dir, "ferry-images.tar")
	if _, err := images.ExportComponents(layout, ImageRegistry, ImageTag, tarball); err != nil {
		return "", fmt.Errorf("export ferry's images: %w", err)
	}
	return tarball, nil
}

// StartClusters starts the consumer and the provider, one real node each
// with a NetworkPolicy engine (Options.NetworkPolicies), and the test bed's
// storage (Options.Storage), on u, with the image archives given (ferry's, and any a caller's pods
// run) in every node's containerd. The caller stops both.
func StartClusters(ctx context.Context, u *testbed.Underlay, archives ...string) (consumer, provider *testbed.Cluster, err error) {
	clusters, err := testbed.StartClusters(ctx,
		testbed.Options{Name: string(ConsumerID), RealNodes: 1, Storage: true, NetworkPolicies: true, Underlay: u, Images: archives},
		testbed.Options{Name: string(ProviderID), RealNodes: 1, Storage: true, NetworkPolicies: true, Underlay: u, Images: archives})
	if err != nil {
		return nil, nil, fmt.Errorf("start the real-node clusters: %w", err)
	}
	return clusters[0], clusters[1], nil
}

// InstallSets are the only values the bed changes from the defaults: where
// the images are; the network fabric's gateway and route agent on (off by
// default); and the gateway Service's type, a NodePort, since the test bed,
// like a kubeadm cluster on bare metal, has no load balancer (the default
// LoadBalancer would stay pending, and the gateway with it, as
// docs/concepts/network-fabric.md says).
func InstallSets() []string {
	return []string{
		"images.registry=" + ImageRegistry,
		"images.tag=" + ImageTag,
		"network.gateway.enabled=true",
		"network.gateway.serviceType=NodePort",
	}
}

// InstallValues are InstallSets as Helm values, with the cluster ID.
func InstallValues(id ferryv1alpha1.ClusterID) map[string]any {
	return map[string]any{
		"clusterID": string(id),
		"images":    map[string]any{"registry": ImageRegistry, "tag": ImageTag},
		"network":   map[string]any{"gateway": map[string]any{"enabled": true, "serviceType": "NodePort"}},
	}
}

// HelmInstall installs ferry's chart into c with InstallValues(id) and
// waits (up to 4 minutes) until its resources are ready.
func HelmInstall(ctx context.Context, c *testbed.Cluster, id ferryv1alpha1.ClusterID) error {
	cfg := action.NewConfiguration()
	kubeconfig, namespace := c.KubeconfigPath, charts.Namespace
	if err := cfg.Init(&genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &namespace}, namespace, "secret"); err != nil {
		return fmt.Errorf("helm on %s: %w", c.Name, err)
	}
	ch, err := charts.Chart()
	if err != nil {
		return fmt.Errorf("ferry's chart: %w", err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = charts.ReleaseName, namespace, true
	install.WaitStrategy, install.Timeout = kube.StatusWatcherStrategy, 4*time.Minute
	if _, err := install.RunWithContext(ctx, ch, InstallValues(id)); err != nil {
		return fmt.Errorf("helm install on %s: %w", c.Name, err)
	}
	return nil
}

// FerryctlInstall runs `ferryctl install` on c with InstallSets.
func FerryctlInstall(ctx context.Context, c *testbed.Cluster, id ferryv1alpha1.ClusterID) error {
	args := []string{"install", "--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--timeout", "4m"}
	for _, set := range InstallSets() {
		args = append(args, "--set", set)
	}
	if out, err := Ferryctl(ctx, args...); err != nil {
		return fmt.Errorf("ferryctl install on %s: %w\n%s", c.Name, err, out)
	}
	return nil
}

// Peer peers consumer with provider with `ferryctl peer`, the consumer
// reaching the provider's API server at its underlay address.
func Peer(ctx context.Context, consumer, provider *testbed.Cluster) error {
	out, err := Ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath,
		"--provider-api-server-url", provider.InClusterAPIServerURL, "--timeout", "3m")
	if err != nil {
		return fmt.Errorf("ferryctl peer: %w\n%s", err, out)
	}
	return nil
}

// Ferryctl runs ferryctl's command line in this process with args and
// returns its output.
func Ferryctl(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := app.NewCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// FerryPodsReady is nil once every pod in ferry-system of c is Running,
// Ready, from one of ferry's images and never restarted, and the last
// reason it is not when timeout passes first.
func FerryPodsReady(ctx context.Context, c *testbed.Cluster, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = ferryPodsReady(ctx, c)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func ferryPodsReady(ctx context.Context, c *testbed.Cluster) error {
	pods, err := c.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("%s: list ferry's pods: %w", c.Name, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("%s: no pod in %s", c.Name, charts.Namespace)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%s: pod %s is %s", c.Name, p.Name, p.Status.Phase)
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case !cs.Ready:
				return fmt.Errorf("%s: pod %s container %s not Ready", c.Name, p.Name, cs.Name)
			case cs.RestartCount != 0:
				return fmt.Errorf("%s: pod %s container %s restarted %d times", c.Name, p.Name, cs.Name, cs.RestartCount)
			case !strings.HasPrefix(cs.Image, ImageRegistry+"/"):
				return fmt.Errorf("%s: pod %s container %s runs %s, not one of ferry's images", c.Name, p.Name, cs.Name, cs.Image)
			}
		}
	}
	return nil
}

// VirtualNodeName is the name of the consumer's virtual node for provider.
func VirtualNodeName(ctx context.Context, c *testbed.Cluster, provider ferryv1alpha1.ClusterID) (string, error) {
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes, client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(provider)}); err != nil {
		return "", fmt.Errorf("%s: list the virtual nodes: %w", c.Name, err)
	}
	if len(nodes.Items) != 1 {
		return "", fmt.Errorf("%s: %d virtual nodes of %s, want 1", c.Name, len(nodes.Items), provider)
	}
	return nodes.Items[0].Name, nil
}

// Bed is the whole bed, set up by Start.
type Bed struct {
	Underlay           *testbed.Underlay
	Consumer, Provider *testbed.Cluster
	dir                string
}

// Options of Start.
type Options struct {
	// Root is the folder of ferry's go.mod.
	Root string
	// Images are archives imported into both real nodes besides ferry's.
	Images []string
	// Log gets a line per step and its duration.
	Log io.Writer
}

// Start builds ferry's images, starts both clusters, installs ferry and
// peers them, waiting until ferry's pods are Ready on both sides; on
// error it has already undone what it did.
func Start(ctx context.Context, opts Options) (_ *Bed, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	b := &Bed{}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	if b.dir, err = os.MkdirTemp("", "ferry-realbed-images-"); err != nil {
		return nil, err
	}
	step := func(what string, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return err
		}
		fmt.Fprintf(opts.Log, "realbed: %s in %s\n", what, time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	var tarball string
	if err := step("ferry's images built and exported", func() (err error) {
		tarball, err = BuildFerryImages(ctx, opts.Root, b.dir)
		return err
	}); err != nil {
		return nil, err
	}
	if err := step("two clusters with a real node each up", func() (err error) {
		if b.Underlay, err = testbed.NewUnderlay(); err != nil {
			return fmt.Errorf("underlay: %w", err)
		}
		b.Consumer, b.Provider, err = StartClusters(ctx, b.Underlay, append([]string{tarball}, opts.Images...)...)
		return err
	}); err != nil {
		return nil, err
	}
	if err := step("helm install on the consumer", func() error { return HelmInstall(ctx, b.Consumer, ConsumerID) }); err != nil {
		return nil, err
	}
	if err := step("ferryctl install on the provider", func() error { return FerryctlInstall(ctx, b.Provider, ProviderID) }); err != nil {
		return nil, err
	}
	if err := step("ferry's pods Ready on both", func() error {
		return errors.Join(FerryPodsReady(ctx, b.Consumer, 2*time.Minute), FerryPodsReady(ctx, b.Provider, 2*time.Minute))
	}); err != nil {
		return nil, err
	}
	if err := step("peered", func() error { return Peer(ctx, b.Consumer, b.Provider) }); err != nil {
		return nil, err
	}
	return b, nil
}

// Close stops both clusters and the underlay and removes the images' folder.
func (b *Bed) Close() error {
	var errs []error
	for _, c := range []*testbed.Cluster{b.Consumer, b.Provider} {
		if c != nil {
			errs = append(errs, c.Stop())
		}
	}
	if b.Underlay != nil {
		errs = append(errs, b.Underlay.Close())
	}
	if b.dir != "" {
		errs = append(errs, os.RemoveAll(b.dir))
	}
	return errors.Join(errs...)
}

// KubectlImage runs /kubectl (k8s.io/kubernetes' kubectl of the test bed's
// version, static): a pod runs it as a user would, with the in-cluster
// configuration (its service account's token, CA and KUBERNETES_SERVICE_*).
const KubectlImage = "registry.k8s.io/kubectl:" + binaries.KubernetesVersion + "-ferry"

// BuildKubectlImage builds kubectl static for linux/amd64 (as ferry's own
// images are built, sharing their build cache) into dir, and writes
// KubectlImage holding it as an archive there for Options.Images. It
// returns the archive's path.
func BuildKubectlImage(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "kubectl")
	if err := crossbuild.Build(ctx, "k8s.io/kubernetes/cmd/kubectl", "linux", "amd64", binaries.KubernetesVersion, "", bin); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubectl-image.tar")
	if err := images.WriteBinaryImage(KubectlImage, bin, path); err != nil {
		return "", err
	}
	return path, nil
}
