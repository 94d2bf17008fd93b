package realnodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ferry-io/ferry/test/realbed"
	"github.com/ferry-io/ferry/test/testbed"
)

// Options of Run.
type Options struct {
	// RepoRoot is the folder of ferry's go.mod.
	RepoRoot string
	// Pods is the number of pods of each kind the start measurement
	// creates, a pair every StartInterval.
	Pods          int
	StartInterval time.Duration
	// Requests per side, in Rounds alternating which side goes first.
	Requests, Rounds int
	// Stream is how long each TCP stream lasts; StreamRounds per side.
	Stream       time.Duration
	StreamRounds int
	Out          io.Writer
}

// Run sets up the bed, measures, prints the RESULT line and tears the bed
// down. It returns an error when the bed could not be set up or when any
// measurement failed (the RESULT line is printed then too, the failed
// figures as "failed").
func Run(ctx context.Context, opts Options) (err error) {
	dir, err := os.MkdirTemp("", "ferry-bench-real-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	start := time.Now()
	probe, err := realbed.BuildProbeImage(ctx, opts.RepoRoot, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "bench-real: probe image built in %s\n", time.Since(start).Round(100*time.Millisecond))
	bed, err := realbed.Start(ctx, realbed.Options{Root: opts.RepoRoot, Images: []string{probe}, Log: opts.Out})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bed.Close()) }()
	return measure(ctx, bed.Consumer, bed.Provider, opts)
}

func measure(ctx context.Context, consumer, provider *testbed.Cluster, opts Options) error {
	r := Result{Pods: opts.Pods, Requests: opts.Requests, StartInterval: opts.StartInterval}

	// Pod start, offloaded and direct in alternation.
	for _, ns := range []struct {
		c    *testbed.Cluster
		name string
	}{{consumer, "bench-start"}, {provider, "bench-start-direct"}, {consumer, "bench-net"}, {consumer, "bench-client"}, {provider, "bench-client"}} {
		if err := createNamespace(ctx, ns.c, ns.name); err != nil {
			return err
		}
	}
	twin, err := realbed.OffloadNamespace(ctx, consumer, "bench-start", realbed.ProviderID)
	if err != nil {
		return err
	}
	start := time.Now()
	r.StartDirect, r.StartOffload, r.StartRemote = measureStart(ctx, consumer, provider, startOptions{
		Pods: opts.Pods, Interval: opts.StartInterval, Timeout: 5 * time.Minute,
		Offloaded: "bench-start", Twin: twin, Direct: "bench-start-direct",
	}, opts.Out)
	fmt.Fprintf(opts.Out, "bench-real: pod start measured in %s\n", time.Since(start).Round(100*time.Millisecond))
	// The start pods go before the network is measured: they would share
	// the node's CPU with it.
	start = time.Now()
	if err := errors.Join(deletePods(ctx, consumer, "bench-start"), deletePods(ctx, provider, "bench-start-direct"), waitNoPods(ctx, provider, twin)); err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "bench-real: start pods deleted in %s\n", time.Since(start).Round(100*time.Millisecond))

	// Requests and streams: consumer pod to offloaded pods against
	// provider pod to the same pods.
	netTwin, err := realbed.OffloadNamespace(ctx, consumer, "bench-net", realbed.ProviderID)
	if err != nil {
		return err
	}
	srv, err := startServers(ctx, consumer, provider, "bench-net", netTwin, 2, 3*time.Minute)
	if err != nil {
		r.RequestDirect.Err, r.RequestOffload.Err, r.RequestUnderlay.Err = err, err, err
		r.ThroughputDirect.Err, r.ThroughputOffload.Err, r.ThroughputUnderlay.Err = err, err, err
	} else {
		fmt.Fprintf(opts.Out, "bench-real: probe servers: Service %s in the consumer, %s in the provider (node ports %d, %d); server-0 at %s in the consumer, %s in the provider\n",
			srv.ConsumerServiceIP, srv.ProviderServiceIP, srv.NodePortHTTP, srv.NodePortTCP, srv.ConsumerPodIP, srv.ProviderPodIP)
		nodeIP := provider.RealNodes[0].IP.String()
		reqs, tps := measureNetwork(ctx, []side{
			{name: "direct", c: provider, namespace: "bench-client",
				url: httpURL(srv.ProviderServiceIP, 80), addr: net.JoinHostPort(srv.ProviderPodIP, strconv.Itoa(tcpPort))},
			{name: "offload", c: consumer, namespace: "bench-client",
				url: httpURL(srv.ConsumerServiceIP, 80), addr: net.JoinHostPort(srv.ConsumerPodIP, strconv.Itoa(tcpPort))},
			{name: "underlay", c: consumer, namespace: "bench-client",
				url: httpURL(nodeIP, srv.NodePortHTTP), addr: net.JoinHostPort(nodeIP, strconv.Itoa(int(srv.NodePortTCP)))},
		}, netOptions{Requests: opts.Requests, Rounds: opts.Rounds, Stream: opts.Stream, StreamRounds: opts.StreamRounds,
			Clusters: []*testbed.Cluster{consumer, provider}}, opts.Out)
		fmt.Fprintf(opts.Out, "bench-real: the consumer gateway's last round trip through the tunnel to the provider's gateway pod (ICMP, every 10 s): %s\n",
			tunnelRTT(ctx, consumer, realbed.ProviderID))
		r.RequestDirect, r.RequestOffload, r.RequestUnderlay = *reqs["direct"], *reqs["offload"], *reqs["underlay"]
		r.ThroughputDirect, r.ThroughputOffload, r.ThroughputUnderlay = *tps["direct"], *tps["offload"], *tps["underlay"]
	}
	r.Print(opts.Out)
	if fs := r.Failures(); len(fs) > 0 {
		return fmt.Errorf("%d measurements failed (see FAILED lines)", len(fs))
	}
	return nil
}

func httpURL(host string, port int32) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/"
}

func createNamespace(ctx context.Context, c *testbed.Cluster, name string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: create namespace %s: %w", c.Name, name, err)
	}
	return nil
}

func deletePods(ctx context.Context, c *testbed.Cluster, namespace string) error {
	if err := c.Kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("%s: delete the pods of %s: %w", c.Name, namespace, err)
	}
	return waitNoPods(ctx, c, namespace)
}

func waitNoPods(ctx context.Context, c *testbed.Cluster, namespace string) error {
	left := 0
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %d pods of %s still there: %w", c.Name, left, namespace, err)
	}
	return nil
}
