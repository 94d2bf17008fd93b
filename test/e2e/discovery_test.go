package e2e

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/cmd/ferryctl/app"
	"github.com/ferry-io/ferry/discovery/discoverytest"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// Discovery gives ferryctl peer the provider's endpoint; the credentials
// still come from a kubeconfig of the provider's, here one whose server is
// dead, so that peering succeeds only through the discovered endpoint.
var _ = Describe("Discovery of peers by DNS-SD", Label("discovery", "peering"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	var credentials, port string

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "8", Memory: "32Gi"}}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{})
		u, err := url.Parse(provider.APIServerURL)
		Expect(err).NotTo(HaveOccurred())
		port = u.Port()

		cfg, err := clientcmd.LoadFromFile(provider.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred())
		for _, c := range cfg.Clusters {
			c.Server = "https://127.0.0.1:1"
		}
		credentials = filepath.Join(GinkgoT().TempDir(), "provider-credentials.kubeconfig")
		Expect(clientcmd.WriteToFile(*cfg, credentials)).To(Succeed())
	})

	// peerDiscovered peers through discovery, checks where the consumer
	// reaches the provider, and unpeers.
	peerDiscovered := func(ctx context.Context, endpoint string, source ...string) {
		args := append([]string{"peer", "--discovered", "provider", "--consumer-kubeconfig", consumer.KubeconfigPath,
			"--provider-kubeconfig", credentials, "--timeout", "90s"}, source...)
		out, err := ferryctl(ctx, args...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`Discovered provider "provider"`))
		Expect(out).To(ContainSubstring("using " + endpoint + " instead of the kubeconfig's https://127.0.0.1:1"))
		Expect(out).To(ContainSubstring("[6/6]"))
		var fc ferryv1alpha1.ForeignCluster
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
		Expect(fc.Spec.APIServerURL).To(Equal(endpoint))

		out, err = ferryctl(ctx, "unpeer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
	}

	It("peers with a cluster whose records an administrator added to a DNS domain", func(ctx context.Context) {
		endpoint := "https://localhost:" + port // the test bed's certificate covers localhost
		zone, err := ferryctl(ctx, "advertise", "--kubeconfig", provider.KubeconfigPath, "--server", endpoint, "--domain", "clusters.example.org")
		Expect(err).NotTo(HaveOccurred(), zone)
		server := discoverytest.ServeZone(GinkgoTB(), discoverytest.ParseZone(GinkgoTB(), zone), true)

		out, err := ferryctl(ctx, "discover", "--domain", "clusters.example.org", "--dns-server", server)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`provider\s+provider\s+` + endpoint))
		peerDiscovered(ctx, endpoint, "--domain", "clusters.example.org", "--dns-server", server)
	})

	It("peers with a cluster answering on the local link", func(ctx context.Context) {
		link := discoverytest.NewLink(GinkgoTB())
		// The provider's API server listens on the test's loopback, which
		// is the browser's too: the responder publishes 127.0.0.1.
		endpoint := provider.APIServerURL
		link.Serve(GinkgoTB(), "Answering for cluster", func(ctx context.Context, out io.Writer) error {
			cmd := app.NewCommand()
			cmd.SetArgs([]string{"advertise", "--mdns", "--interface", link.Remote.Name, "--kubeconfig", provider.KubeconfigPath, "--cluster-id", "provider"})
			cmd.SetOut(out)
			cmd.SetErr(os.Stderr)
			return cmd.ExecuteContext(ctx)
		})
		peerDiscovered(ctx, endpoint, "--mdns", "--interface", link.Local.Name)
	})
})
