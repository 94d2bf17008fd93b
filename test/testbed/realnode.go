package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// RealNode is a node with a real kubelet, containerd (with runc) and
// kube-proxy, and CNI networking (ptp + host-local): its pods' containers
// run on this machine.
//
// Each node is confined. Its programs run in a network namespace of their
// own, plugged into the Underlay, and in a private mount namespace where
// /run, /var/lib and /var/log are empty tmpfs and the kernel settings the
// kubelet writes (vm.overcommit_memory, vm.panic_on_oom, kernel.panic,
// kernel.panic_on_oops, kernel.keys.root_maxkeys/maxbytes) are per-node
// files bound over /proc/sys: the host's stay as they were. containerd's
// root, state and socket, runc's root, the kubelet's root and logs, and the
// CNI configuration and leases live in the node's folder. Containers run in
// the node's own cgroupRoot (the same path in every cgroup v1 hierarchy),
// and the node's programs in a cgroup under it, so Stop ends every process
// the node started, down to containerd's shims, by their cgroup.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// IP is the node's InternalIP on the underlay.
	IP netip.Addr
	// Dir is the node's folder (inside its cluster's).
	Dir string
	// PodCIDR is the range kube-controller-manager gave the node.
	PodCIDR netip.Prefix

	c                  *Cluster
	holder             *process // holds the node's network and mount namespaces
	procs              []*process
	netNS              *netns.Namespace
	cgroup             *nodeCgroup
	mntInode, netInode uint64
}

// sysctlsKubeletWrites are the host-wide kernel settings the kubelet sets
// at start (pkg/kubelet/cm's setupKernelTunables). Each node gets its own
// copy, bound over the /proc/sys file in its mount namespace.
var sysctlsKubeletWrites = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// HostSysctls reads the host's values of the kernel settings the kubelet
// writes, for tests that check they stay unchanged.
func HostSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, s := range sysctlsKubeletWrites {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, fmt.Errorf("read /proc/sys/%s: %w", s, err)
		}
		out[s] = strings.TrimSpace(string(v))
	}
	return out, nil
}

// Paths inside a node's folder.
func (n *RealNode) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir}, elem...)...)
}

func (n *RealNode) containerdSocket() string { return n.path("containerd", "containerd.sock") }

// start brings the node up to a registered kubelet: namespaces, cgroups,
// network, containerd with the images imported, the kubelet. CNI and
// kube-proxy follow once kube-controller-manager has given it a pod range
// (Cluster.startRealNodes).
func (n *RealNode) start(ctx context.Context, index int, images []string) error {
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "runc", "kubelet", "pods", "cni/net.d", "cni/data", "sysctl", "pki"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	var err error
	if n.cgroup, err = newNodeCgroup(filepath.Base(n.c.Dir) + "-" + strconv.Itoa(index)); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startHolder(ctx); err != nil {
		return err
	}
	if n.IP, err = n.c.underlay.allocate(); err != nil {
		return err
	}
	if err := n.c.underlay.plug(n.netNS, fmt.Sprintf("n%d-%d", n.c.underlayIndex, index), n.IP); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	for _, img := range images {
		if err := n.importImage(ctx, img); err != nil {
			return err
		}
	}
	return n.startKubelet()
}

// startHolder starts the process that owns the node's network and mount
// namespaces (sleep, after setting the mount namespace up); every other
// program of the node joins them with nsenter.
func (n *RealNode) startHolder(ctx context.Context) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range []string{"/run", "/var/lib", "/var/log"} {
		fmt.Fprintf(&script, "mount -t tmpfs -o mode=0755 ferry-node %s\n", d)
	}
	for _, s := range sysctlsKubeletWrites {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return fmt.Errorf("node %s: read /proc/sys/%s: %w", n.Name, s, err)
		}
		f := n.path("sysctl", strings.ReplaceAll(s, "/", "."))
		if err := os.WriteFile(f, v, 0o644); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s\n", f, s)
	}
	ready := n.path("namespaces-ready")
	fmt.Fprintf(&script, "touch %s\nexec sleep infinity\n", ready)
	p, err := startProcess(n.Dir, "namespaces", "unshare", []string{"--net", "--mount", "--propagation", "private", "--", "sh", "-c", script.String()}, nil)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.holder = p
	if err := n.cgroup.enter(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.waitFor(ctx, "its namespaces", 10*time.Second, func(context.Context) error {
		_, err := os.Stat(ready)
		return err
	}); err != nil {
		return err
	}
	pid := p.cmd.Process.Pid
	if n.netNS, err = netns.Open(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if n.mntInode, err = nsInode(pid, "mnt"); err != nil {
		return err
	}
	if n.netInode, err = nsInode(pid, "net"); err != nil {
		return err
	}
	return nil
}

func nsInode(pid int, kind string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), &st); err != nil {
		return 0, fmt.Errorf("read %s namespace of process %d: %w", kind, pid, err)
	}
	return st.Ino, nil
}

// run starts one of the node's programs inside its namespaces and cgroup.
func (n *RealNode) run(name, bin string, args ...string) (*process, error) {
	nsArgs := append([]string{"-t", strconv.Itoa(n.holder.cmd.Process.Pid), "-m", "-n", "--", bin}, args...)
	p, err := startProcess(n.Dir, name, "nsenter", nsArgs, nil)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.procs = append(n.procs, p)
	if err := n.cgroup.enter(p.cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return p, nil
}

func (n *RealNode) startContainerd(ctx context.Context) error {
	bin, err := NodeCommand("containerd")
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # No CAP_SYS_RESOURCE here: runc cannot lower oom_score_adj below its own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(), n.path("containerd", "opt"),
		SandboxImage, CNIPluginDir, n.path("cni", "net.d"), n.path("runc"))
	cfg := n.path("containerd.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if _, err := n.run("containerd", bin, "--config", cfg); err != nil {
		return err
	}
	return n.waitFor(ctx, "containerd", 30*time.Second, func(ctx context.Context) error {
		_, err := n.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's client against the node's containerd (its socket is
// in the node's folder: no namespace to enter).
func (n *RealNode) ctr(ctx context.Context, args ...string) (string, error) {
	ctr, err := NodeCommand("ctr")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, ctr, append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("node %s: ctr %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// importImage loads an image archive (docker or OCI tarball) into the
// node's containerd, where pods find it without a pull.
func (n *RealNode) importImage(ctx context.Context, tarball string) error {
	_, err := n.ctr(ctx, "images", "import", tarball)
	return err
}

// ImportImage loads an image archive into the node's containerd.
func (n *RealNode) ImportImage(ctx context.Context, tarball string) error {
	return n.importImage(ctx, tarball)
}

func (n *RealNode) startKubelet() error {
	c := n.c
	client, err := c.ca.issue(n.path("pki"), "kubelet-client", "system:node:"+n.Name, []string{"system:nodes"}, false, nil, nil)
	if err != nil {
		return err
	}
	serving, err := c.ca.issue(n.path("pki"), "kubelet-serving", n.Name, nil, true, []string{n.Name}, []net.IP{n.IP.AsSlice()})
	if err != nil {
		return err
	}
	kubeconfig := n.path("kubelet.kubeconfig")
	if _, err := writeKubeconfig(kubeconfig, c.Name, c.InClusterAPIServerURL, c.ca.certPEM, client); err != nil {
		return err
	}
	resolv := n.path("resolv.conf")
	// Pods with dnsPolicy Default get this: nothing outside the test bed.
	if err := os.WriteFile(resolv, []byte("# no upstream resolver in the test bed\n"), 0o644); err != nil {
		return err
	}
	dnsIP, err := clusterDNSIP(c.opts.ServiceCIDR)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
tlsCertFile: %[3]q
tlsPrivateKeyFile: %[4]q
# This kind of machine has cgroup v1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[5]q
containerRuntimeEndpoint: unix://%[6]s
clusterDNS: [%[7]s]
clusterDomain: cluster.local
resolvConf: %[8]q
podLogsDir: %[9]q
failSwapOn: false
serializeImagePulls: false
# Images are imported, never pulled: never collect them, and never evict
# for a machine's disk filling up with other things.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
maxPods: 110
`, n.IP, c.ca.CertFile, serving.CertFile, serving.KeyFile, n.cgroup.CgroupRoot(), n.containerdSocket(), dnsIP, resolv, n.path("pods"))
	cfg := n.path("kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return err
	}
	bin, err := binaries.Path(binaries.Kubelet)
	if err != nil {
		return err
	}
	_, err = n.run("kubelet", bin,
		"--config="+cfg,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+n.path("kubelet"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP.String(),
		"--node-labels="+RealNodeLabel+"=true",
		"--v=1",
	)
	return err
}

// RealNodeLabel marks the test bed's real nodes (kwok's carry type=kwok).
const RealNodeLabel = "testbed.ferry.io/real-node"

// network finishes the node's networking once it has a pod range: the CNI
// configuration (ptp: one veth per pod, of 1500 bytes whatever the
// underlay's MTU, as ptp gives by default; routed by the node, so Service
// traffic to a pod on the same node goes through kube-proxy's rules both
// ways without the host's br_netfilter), a route to each other node's
// range, and masquerading for pods' traffic leaving the pod network (to the
// API server's underlay address, other clusters' nodes).
func (n *RealNode) network(ctx context.Context, clusterCIDR string, peers []*RealNode) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "testbed",
  "plugins": [
    {
      "type": "ptp",
      "mtu": 1500,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.path("cni", "data"), n.PodCIDR.String())
	if err := os.WriteFile(n.path("cni", "net.d", "10-testbed.conflist"), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("node %s: write CNI configuration: %w", n.Name, err)
	}
	h, err := netlink.NewHandleAt(n.netNS.Handle())
	if err != nil {
		return fmt.Errorf("node %s: netlink: %w", n.Name, err)
	}
	defer h.Close()
	for _, p := range peers {
		if p == n {
			continue
		}
		dst := &net.IPNet{IP: p.PodCIDR.Addr().AsSlice(), Mask: net.CIDRMask(p.PodCIDR.Bits(), 32)}
		if err := h.RouteReplace(&netlink.Route{Dst: dst, Gw: p.IP.AsSlice()}); err != nil {
			return fmt.Errorf("node %s: route %s via %s: %w", n.Name, p.PodCIDR, p.IP, err)
		}
	}
	rules := fmt.Sprintf(`table ip ferry-testbed {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "eth0" ip saddr %[1]s ip daddr != %[1]s masquerade
  }
}
`, clusterCIDR)
	nft, err := NodeCommand("nft")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(n.holder.cmd.Process.Pid), "-n", "--", nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("node %s: masquerade rule: %w: %s", n.Name, err, out)
	}
	return nil
}

// startKubeProxy runs kube-proxy in nftables mode. It leaves the host-wide
// conntrack settings alone (they are not per network namespace).
func (n *RealNode) startKubeProxy(clusterCIDR string) error {
	c := n.c
	client, err := c.ca.issue(n.path("pki"), "kube-proxy", "system:kube-proxy", nil, false, nil, nil)
	if err != nil {
		return err
	}
	kubeconfig := n.path("kube-proxy.kubeconfig")
	if _, err := writeKubeconfig(kubeconfig, c.Name, c.InClusterAPIServerURL, c.ca.certPEM, client); err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.Name, clusterCIDR)
	cfg := n.path("kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return err
	}
	bin, err := binaries.Path(binaries.KubeProxy)
	if err != nil {
		return err
	}
	_, err = n.run("kube-proxy", bin, "--config="+cfg, "--v=1")
	return err
}

// waitFor polls check, failing early with the log of a node program that
// exited.
func (n *RealNode) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		for _, p := range append([]*process{n.holder}, n.procs...) {
			if p == nil {
				continue
			}
			if done, exitErr := p.exited(); done {
				return fmt.Errorf("node %s: waiting for %s: %s exited (%v); last lines of %s:\n%s", n.Name, what, p.name, exitErr, p.logPath, p.logTail(25))
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: waiting for %s: %w (last error: %v)", n.Name, what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends every process of the node (the kubelet first, so it stops
// starting containers, then everything in the node's cgroup: containers,
// shims, containerd, kube-proxy, the namespace holder) and removes its
// cgroups. The namespaces go with their last process; the kernel drops the
// mounts made in them (overlay roots, volumes, the tmpfs over /run).
func (n *RealNode) stop() error {
	var errs []error
	for _, p := range n.procs {
		if p.name == "kubelet" {
			p.stop(5 * time.Second)
		}
	}
	if n.cgroup != nil {
		if err := n.cgroup.killAll(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range append(n.procs, n.holder) {
		if p != nil {
			p.stop(5 * time.Second) // already dead: reaps them
		}
	}
	if n.netNS != nil {
		_ = n.netNS.Close()
	}
	if n.cgroup != nil {
		if err := n.cgroup.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Logs returns the last lines of each of the node's programs.
func (n *RealNode) Logs(lines int) string {
	var b strings.Builder
	for _, p := range n.procs {
		fmt.Fprintf(&b, "==== %s/%s (last %d lines) ====\n%s\n", n.Name, p.name, lines, p.logTail(lines))
	}
	return b.String()
}

// Namespaces returns the inodes of the node's network and mount
// namespaces, for checks that nothing is left in them.
func (n *RealNode) Namespaces() (net, mnt uint64) { return n.netInode, n.mntInode }

// Cgroup is the node's cgroupRoot.
func (n *RealNode) Cgroup() string { return n.cgroup.CgroupRoot() }

// startRealNodes brings up Options.RealNodes nodes and returns once all are
// Ready with kube-proxy running, then deploys cluster DNS.
func (c *Cluster) startRealNodes(ctx context.Context) error {
	images, err := realNodeImages(c.opts.Images)
	if err != nil {
		return err
	}
	for i := range c.opts.RealNodes {
		n := &RealNode{Name: fmt.Sprintf("%s-node-%d", c.Name, i), c: c}
		n.Dir = filepath.Join(c.Dir, "nodes", n.Name)
		c.RealNodes = append(c.RealNodes, n)
		if err := n.start(ctx, i, images); err != nil {
			return err
		}
		c.egressNS.CompareAndSwap(nil, n.netNS)
	}
	// kube-controller-manager gives each registered node a /24 of the
	// cluster's range; the node's CNI configuration and the others' routes
	// follow from it.
	for _, n := range c.RealNodes {
		if err := n.waitFor(ctx, "a pod range from kube-controller-manager", 90*time.Second, func(ctx context.Context) error {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if node.Spec.PodCIDR == "" {
				return errors.New("no spec.podCIDR yet")
			}
			n.PodCIDR, err = netip.ParsePrefix(node.Spec.PodCIDR)
			return err
		}); err != nil {
			return err
		}
	}
	for _, n := range c.RealNodes {
		if err := n.network(ctx, c.opts.PodCIDR, c.RealNodes); err != nil {
			return err
		}
		if err := n.startKubeProxy(c.opts.PodCIDR); err != nil {
			return err
		}
		if c.opts.NetworkPolicies {
			if err := n.startNetworkPolicies(ctx); err != nil {
				return err
			}
		}
	}
	for _, n := range c.RealNodes {
		if err := n.waitFor(ctx, "Ready", 90*time.Second, func(ctx context.Context) error {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("node %s is not Ready: %s", n.Name, readyMessage(node))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return c.deployDNS(ctx)
}

func readyMessage(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Reason + ": " + c.Message
		}
	}
	return "no Ready condition"
}

// dialInCluster dials addr from inside the cluster's first real node, for
// the API server's egress proxy; before it is up, from the underlay. A
// loopback address is the API server's own host, as it is for an API
// server on a real control-plane node (a webhook or a kubelet API served on
// 127.0.0.1 beside it): dialed from the host's namespace, where the API
// server runs.
func (c *Cluster) dialInCluster(ctx context.Context, addr string) (net.Conn, error) {
	if dialsFromHost(addr) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	ns := c.egressNS.Load()
	if ns == nil {
		ns = c.underlay.ns
	}
	return dialIn(ctx, ns, addr)
}

// dialsFromHost says whether the egress proxy dials addr (host:port) from
// the host's namespace: a loopback address or localhost.
func dialsFromHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// clusterDNSIP is the cluster DNS Service's IP: the tenth of the Service
// range, as kubeadm chooses it.
func clusterDNSIP(serviceCIDR string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("options.serviceCIDR %q: %w", serviceCIDR, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a, nil
}

// prepareRealNodes sets up what the API server of a cluster with real nodes
// needs before it starts: an underlay address (in its serving certificate,
// advertised as the kubernetes Service's endpoint) and the egress proxy it
// reaches nodes, Services and pods through. It returns the API server's
// extra flags.
func (c *Cluster) prepareRealNodes(apiPort int) ([]string, error) {
	if err := NodePackages(); err != nil {
		return nil, err
	}
	c.underlay = c.opts.Underlay
	if c.underlay == nil {
		u, err := NewUnderlay()
		if err != nil {
			return nil, err
		}
		c.underlay, c.ownUnderlay = u, true
	}
	var err error
	if c.apiAddr, err = c.underlay.allocate(); err != nil {
		return nil, err
	}
	c.underlayIndex = int(c.apiAddr.As4()[3])
	c.InClusterAPIServerURL = "https://" + netip.AddrPortFrom(c.apiAddr, uint16(apiPort)).String()
	socket := filepath.Join(c.Dir, "egress.sock")
	if c.egress, err = startEgressProxy(socket, c.dialInCluster); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket)
	file := filepath.Join(c.Dir, "egress-selector.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("write egress selector configuration: %w", err)
	}
	return []string{
		"--egress-selector-config-file=" + file,
		// Logs, exec and port-forward dial the node's InternalIP; its name
		// resolves nowhere here.
		"--kubelet-preferred-address-types=InternalIP",
	}, nil
}

// MemoryRSS is the resident memory of everything the node runs (its
// programs, containerd's shims and the containers), summed over the
// processes of its cgroup tree (pages shared between them count once per
// process).
func (n *RealNode) MemoryRSS() (int64, error) {
	var total int64
	for _, pid := range n.cgroup.pids() {
		rss, err := rssOf(pid, fmt.Sprintf("process %d of node %s", pid, n.Name))
		if err != nil {
			continue // exited meanwhile
		}
		total += rss
	}
	return total, nil
}

// PIDs lists every process of the node: its programs, containerd's shims
// and its containers' processes.
func (n *RealNode) PIDs() []int { return n.cgroup.pids() }
