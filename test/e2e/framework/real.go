package framework

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/ferry-io/ferry/hack/crossbuild"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
	"github.com/ferry-io/ferry/test/testbed/images"
)

// BuildFerryImages builds every ferry component's image for linux/amd64
// with hack/images (as `make images IMAGE_PLATFORMS=linux/amd64` does)
// into a folder removed when the calling container ends, and exports them as one archive tagged
// <registry>/<component>:<tag> for Options.Images of real nodes. It returns
// the archive's path.
func BuildFerryImages(ctx context.Context, registry, tag string) string {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "ferry-e2e-images-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	layout := filepath.Join(dir, "layout")
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/images", "-platforms", "linux/amd64", "-version", tag, "-out", layout)
	cmd.Dir = RepoRoot()
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "hack/images:\n%s", out)
	tarball := filepath.Join(dir, "ferry-images.tar")
	_, err = images.ExportComponents(layout, registry, tag, tarball)
	Expect(err).NotTo(HaveOccurred())
	return tarball
}

// PortForward forwards a local port on 127.0.0.1 to port of a pod through
// the API server, as kubectl port-forward does; it returns the local port
// and a function that stops the forwarding.
func PortForward(ctx context.Context, c *testbed.Cluster, ns, pod string, port int) (int, func()) {
	GinkgoHelper()
	transport, upgrader, err := spdy.RoundTripperFor(c.Config)
	Expect(err).NotTo(HaveOccurred())
	req := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stop, ready := make(chan struct{}), make(chan struct{})
	var out bytes.Buffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, &out, &out)
	Expect(err).NotTo(HaveOccurred())
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		Fail(fmt.Sprintf("port-forward to %s/%s:%d: %v\n%s", ns, pod, port, err, out.String()))
	case <-ctx.Done():
		Fail("port-forward: " + ctx.Err().Error())
	}
	ports, err := fw.GetPorts()
	Expect(err).NotTo(HaveOccurred())
	var once sync.Once
	return int(ports[0].Local), func() { once.Do(func() { close(stop) }) }
}

// KubectlImage runs /kubectl (k8s.io/kubernetes' kubectl of the test bed's
// version, static): a pod runs it as a user would, with the in-cluster
// configuration (its service account's token, CA and KUBERNETES_SERVICE_*).
const KubectlImage = "registry.k8s.io/kubectl:" + binaries.KubernetesVersion + "-ferry"

// BuildKubectlImage builds kubectl static for linux/amd64 (as ferry's own
// images are built, sharing their build cache) into an archive holding
// KubectlImage, in a folder removed when the calling container ends, and
// returns the archive's path for Options.Images of real nodes.
func BuildKubectlImage(ctx context.Context) string {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", "ferry-e2e-kubectl-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	bin := filepath.Join(dir, "kubectl")
	Expect(crossbuild.Build(ctx, "k8s.io/kubernetes/cmd/kubectl", "linux", "amd64", binaries.KubernetesVersion, "", bin)).To(Succeed())
	tarball := filepath.Join(dir, "kubectl.tar")
	_, err = images.Write(tarball, bin, map[string][]string{KubectlImage: {"/kubectl"}})
	Expect(err).NotTo(HaveOccurred())
	return tarball
}
