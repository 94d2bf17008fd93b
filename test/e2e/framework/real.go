package framework

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/ferry-io/ferry/test/testbed"
)

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
