package framework

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-io/ferry/test/testbed"
)

// APIProxy relays TCP between one client process and a cluster's API
// server on 127.0.0.1, and can cut it: while cut, it neither dials nor
// relays a byte (a partition: requests hang, nothing is refused), and on
// healing what was held goes through, late, as TCP would deliver it.
type APIProxy struct {
	// Kubeconfig is the cluster's admin kubeconfig, pointed at the proxy.
	Kubeconfig string
	ln         net.Listener
	target     string
	cut        atomic.Bool
	mu         sync.Mutex
	conns      []net.Conn
}

// StartAPIProxy relays to c's API server; the spec's end stops it.
func StartAPIProxy(c *testbed.Cluster, name string) *APIProxy {
	GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &APIProxy{ln: ln}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		Expect(err).NotTo(HaveOccurred())
		p.target = u.Host
		u.Host = ln.Addr().String() // 127.0.0.1, which the serving certificate names too
		cl.Server = u.String()
	}
	p.Kubeconfig = filepath.Join(c.Dir, "proxied-"+name+".kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, p.Kubeconfig)).To(Succeed())
	go p.accept()
	DeferCleanup(p.stop)
	return p
}

// Cut partitions the client from the API server (true) or heals it.
func (p *APIProxy) Cut(cut bool) { p.cut.Store(cut) }

func (p *APIProxy) wait() {
	for p.cut.Load() {
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *APIProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(in)
		go func() {
			p.wait()
			out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				_ = in.Close()
				return
			}
			p.track(out)
			go p.relay(out, in)
			p.relay(in, out)
		}()
	}
}

func (p *APIProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *APIProxy) relay(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *APIProxy) stop(context.Context) {
	p.cut.Store(false)
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	_ = os.Remove(p.Kubeconfig)
}

// String names the proxy for messages.
func (p *APIProxy) String() string { return fmt.Sprintf("proxy %s to %s", p.ln.Addr(), p.target) }
