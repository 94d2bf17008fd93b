package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/netlab"
	"github.com/ferry-io/ferry/test/testbed"
)

// BuildGateway builds ferry-gateway into a folder removed when the suite
// ends, and returns its path.
func BuildGateway(ctx context.Context) string {
	GinkgoHelper()
	return buildBinary(ctx, "ferry-gateway")
}

// LinkPrefix starts the names of the links ferry makes in the lab: the
// lab's prefix and an x, which none of the lab's own links has there.
func LinkPrefix(lab *netlab.Lab) string { return lab.Prefix + "x" }

// Proc is a ferry process a spec starts, kills and restarts; the end of
// the node that started it stops it (SIGTERM, then SIGKILL).
type Proc struct {
	Name string
	bin  string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartGateway runs ferry-gateway for cluster c with its data plane in the
// lab pod gw (its endpoint: the pod's WAN address).
func StartGateway(ctx context.Context, bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, gw *netlab.Pod, extra ...string) *Proc {
	GinkgoHelper()
	args := append([]string{"--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--netns", lab.Path(gw.NS),
		// One prefix per gateway: userspace WireGuard's control socket is
		// named after the link, in one folder for the whole host.
		"--link-prefix", LinkPrefix(lab) + c.Name[:1], "--endpoint", fmt.Sprintf("%s:51820", gw.WANIP), "--pod-address", gw.IP.String(),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "-v=2"}, extra...)
	p := &Proc{Name: "gateway-" + c.Name, bin: bin, args: args, log: filepath.Join(c.Dir, "ferry-gateway.log")}
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	return p
}

// StartRouteAgent runs the route agent of cluster c for the lab node n.
func StartRouteAgent(ctx context.Context, bin string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, lab *netlab.Lab, n *netlab.Node) *Proc {
	GinkgoHelper()
	args := []string{"route-agent", "--kubeconfig", c.KubeconfigPath, "--cluster-id", string(id), "--netns", lab.Path(n.NS),
		"--link-prefix", LinkPrefix(lab), "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "-v=2"}
	p := &Proc{Name: "route-agent-" + n.Name, bin: bin, args: args, log: filepath.Join(c.Dir, "ferry-route-agent-"+n.Name+".log")}
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	return p
}

// Start runs the process (again), appending to its log.
func (p *Proc) Start() {
	GinkgoHelper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(cmd.Start()).To(Succeed(), "start %s", p.Name)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	GinkgoHelper()
	Expect(p.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed(), "kill %s", p.Name)
	<-p.done
}

// Stop ends the process with SIGTERM (it then removes what it made), or
// SIGKILL after 30 s.
func (p *Proc) Stop(ctx context.Context) {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		Fail(fmt.Sprintf("%s did not stop within 30s of SIGTERM; its log: %s", p.Name, p.log))
	case <-ctx.Done():
	}
}

// Log is the process's output so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}
