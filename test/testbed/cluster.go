package testbed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// Options shape one cluster. The zero value is etcd and kube-apiserver alone.
type Options struct {
	// Name shows in folder names, kubeconfig contexts and errors.
	Name string

	// ControllerManager starts kube-controller-manager (deployments, replica
	// sets, namespaces, service accounts, garbage collection, CSR signing).
	ControllerManager bool

	// Scheduler starts kube-scheduler.
	Scheduler bool

	// Kwok starts kwok, which keeps the nodes it manages Ready and runs their
	// pods. It is implied by Nodes.
	Kwok bool

	// Nodes are the simulated nodes to create, managed by kwok.
	Nodes []NodePool

	// PodCIDR is the range kwok gives pod IPs from (default 10.244.0.0/16,
	// the same for every cluster, as in real clusters that overlap).
	PodCIDR string

	// ServiceCIDR is the Service cluster-IP range (default 10.96.0.0/16).
	ServiceCIDR string

	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string

	// Storage gives the cluster dynamic provisioning: StorageClasses
	// StorageClassStandard (the default) and StorageClassFast, both waiting
	// for the first consumer, served by a hostpath provisioner running in
	// the test process (see package hostpath); its volumes are directories
	// under Dir/VolumesDir, which real nodes' kubelets mount into their
	// containers as hostPath volumes. It implies ControllerManager, whose PV
	// controller hands claims to the provisioner and binds them; a pod's
	// claims are provisioned once a scheduler (Scheduler, or ferry's) has
	// picked its node. Start returns once the provisioner watches claims.
	//
	// It is not on by default with ControllerManager: a default class makes
	// claims without a class provisioned where tests expect them to wait,
	// and the provisioner's requests would count in the benchmarks.
	Storage bool

	// RealNodes is the number of real nodes to start (see RealNode): a
	// kubelet, containerd and kube-proxy each, in namespaces of their own.
	// It implies ControllerManager (which gives nodes their pod ranges) and
	// Scheduler, and deploys CoreDNS as the cluster's DNS. It needs root,
	// cgroup v1 and the machine packages of `make node-packages`.
	RealNodes int

	// NetworkPolicies runs a NetworkPolicy engine on each real node
	// (SIG Network's kube-network-policies, see
	// binaries.KubeNetworkPolicies): NetworkPolicies are enforced on its
	// pods. Start returns once every node's engine checks new connections.
	NetworkPolicies bool

	// Underlay is the network the real nodes are plugged into; clusters
	// whose pods must reach each other share one. Nil makes one for this
	// cluster alone, removed with it.
	Underlay *Underlay

	// Images are image archives (docker or OCI tarballs) imported into
	// every real node's containerd besides the test bed's own (agnhost, the
	// sandbox, CoreDNS).
	Images []string
}

// Cluster is one running test cluster.
type Cluster struct {
	// Name is Options.Name.
	Name string
	// Dir holds the cluster's certificates, kubeconfigs, etcd data and logs.
	Dir string
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// KubeconfigPath is an admin (system:masters) kubeconfig.
	KubeconfigPath string
	// Config is the admin rest.Config.
	Config *rest.Config
	// Kube is an admin clientset.
	Kube kubernetes.Interface
	// Client is an admin controller-runtime client knowing core, CRD and ferry kinds.
	Client client.Client
	// StartupDuration is how long Start took for this cluster.
	StartupDuration time.Duration

	opts     Options
	ca       *authority
	procs    []*process // in start order
	storage  *storage   // the in-process provisioner, with Options.Storage
	stopOnce sync.Once
	stopErr  error

	// InClusterAPIServerURL is where the cluster's nodes and pods, and
	// other clusters' pods, reach the API server: https://<underlay
	// address>:<port> with real nodes, else APIServerURL.
	InClusterAPIServerURL string
	// RealNodes are the cluster's real nodes (Options.RealNodes).
	RealNodes []*RealNode

	underlay      *Underlay
	ownUnderlay   bool
	underlayIndex int
	apiAddr       netip.Addr // the API server's underlay address
	egress        *egressProxy
	egressNS      atomic.Pointer[netns.Namespace] // where egress dials: the first real node's

	apiServerArgs []string // to restart it as it was
	etcdArgs      []string // the same for etcd
	etcdURL       string
}

// Scheme knows the kinds test clients read and write: core Kubernetes, CRDs
// and ferry's.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, ferryv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("build test bed scheme: %v", err))
		}
	}
	return s
}()

// EnvKeep, when set to a non-empty value, keeps cluster folders (logs, etcd
// data) after Stop, for debugging.
const EnvKeep = "FERRY_TESTBED_KEEP"

const startAttempts = 3

// StartClusters starts several clusters in parallel. If one fails, the others
// are stopped and the error names the failed one.
func StartClusters(ctx context.Context, opts ...Options) ([]*Cluster, error) {
	clusters := make([]*Cluster, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i := range opts {
		wg.Go(func() { clusters[i], errs[i] = Start(ctx, opts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clusters {
			if c != nil {
				_ = c.Stop()
			}
		}
		return nil, err
	}
	return clusters, nil
}

// Start starts one cluster and returns once it is usable: the API server
// ready, and each component asked for working (controller-manager has made
// the default service account, kwok's nodes are Ready). A port taken by
// another process in the meantime is retried with fresh ports.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = "10.244.0.0/16"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if len(opts.Nodes) > 0 {
		opts.Kwok = true
	}
	if opts.Storage {
		opts.ControllerManager = true
	}
	if opts.RealNodes > 0 {
		opts.ControllerManager, opts.Scheduler = true, true
	}
	reapStaleClusterDirs()
	var err error
	for range startAttempts {
		var c *Cluster
		c, err = startOnce(ctx, opts)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, fmt.Errorf("start test cluster %q: %w", opts.Name, err)
}

var errPortTaken = errors.New("a port was taken by another process")

func startOnce(ctx context.Context, opts Options) (c *Cluster, err error) {
	begin := time.Now()
	dir, err := os.MkdirTemp("", dirPrefix+opts.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("create cluster folder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, fmt.Errorf("record owner of %s: %w", dir, err)
	}
	c = &Cluster{Name: opts.Name, Dir: dir, opts: opts}
	defer func() {
		if err != nil {
			if c.portConflict() {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			_ = c.Stop()
		}
	}()

	ports, err := FreePorts(6)
	if err != nil {
		return c, err
	}
	etcdPort, etcdPeerPort, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.InClusterAPIServerURL = c.APIServerURL
	advertise := "127.0.0.1"
	var egressArgs []string
	if opts.RealNodes > 0 {
		if egressArgs, err = c.prepareRealNodes(apiPort); err != nil {
			return c, err
		}
		advertise = c.apiAddr.String()
	}

	if c.ca, err = newAuthority(dir, opts.Name); err != nil {
		return c, err
	}
	pki, err := c.writeCredentials()
	if err != nil {
		return c, err
	}

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	c.etcdURL = etcdURL
	c.etcdArgs = []string{
		"--name=" + opts.Name,
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeerPort),
		fmt.Sprintf("--initial-cluster=%s=http://127.0.0.1:%d", opts.Name, etcdPeerPort),
		"--unsafe-no-fsync", // throwaway data: durability costs seconds here
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	}
	if err := c.start(binaries.Etcd, c.etcdArgs, nil); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "etcd health", 30*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, etcdURL+"/health")
	}); err != nil {
		return c, err
	}

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=" + advertise,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file=" + pki.apiServing.CertFile,
		"--tls-private-key-file=" + pki.apiServing.KeyFile,
		"--client-ca-file=" + c.ca.CertFile,
		"--kubelet-client-certificate=" + pki.apiKubeletClient.CertFile,
		"--kubelet-client-key=" + pki.apiKubeletClient.KeyFile,
		// Kubelets' serving certificates are verified: kwok's and the virtual
		// kubelets' are signed by the cluster CA (kube-controller-manager
		// signs kubernetes.io/kubelet-serving requests with it).
		"--kubelet-certificate-authority=" + c.ca.CertFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + opts.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
	apiArgs = append(apiArgs, egressArgs...)
	c.apiServerArgs = append(apiArgs, opts.ExtraAPIServerArgs...)
	if err := c.start(binaries.KubeAPIServer, c.apiServerArgs, nil); err != nil {
		return c, err
	}
	if c.underlay != nil {
		if err := c.underlay.forward(c.apiAddr, apiPort); err != nil {
			return c, err
		}
	}
	if c.Config, err = writeKubeconfig(c.KubeconfigPath, opts.Name, c.APIServerURL, c.ca.certPEM, pki.admin); err != nil {
		return c, err
	}
	// Tests drive the cluster hard and briefly; client-go's default 5 QPS
	// would make them wait on themselves.
	c.Config.QPS, c.Config.Burst = 500, 1000
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		return c, fmt.Errorf("build clientset: %w", err)
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: Scheme}); err != nil {
		return c, fmt.Errorf("build controller-runtime client: %w", err)
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", 90*time.Second, func(ctx context.Context) error {
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return c, err
	}

	if opts.ControllerManager {
		kc := filepath.Join(dir, "controller-manager.kubeconfig")
		if _, err := writeKubeconfig(kc, opts.Name, c.APIServerURL, c.ca.certPEM, pki.controllerManager); err != nil {
			return c, err
		}
		if err := c.start(binaries.KubeControllerManager, []string{
			"--kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", kcmPort),
			"--cert-dir=" + filepath.Join(dir, "controller-manager"),
			"--leader-elect=false",
			"--use-service-account-credentials=true",
			// Each controller gets its own service account and token at
			// start; the default client rate limit spreads that over seconds.
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--service-account-private-key-file=" + pki.saKey,
			"--root-ca-file=" + c.ca.CertFile,
			"--cluster-signing-cert-file=" + c.ca.CertFile,
			"--cluster-signing-key-file=" + c.ca.KeyFile,
			"--service-cluster-ip-range=" + opts.ServiceCIDR,
			// Real nodes get their pod range from here, as on kubeadm.
			fmt.Sprintf("--allocate-node-cidrs=%t", opts.RealNodes > 0),
			"--cluster-cidr=" + opts.PodCIDR,
			"--node-cidr-mask-size=24",
			// No --controllers: the default (*) runs the PV controllers
			// (persistentvolume-binder, -expander, -protection and
			// persistentvolumeclaim-protection) Options.Storage relies on.
			"--v=1",
		}, nil); err != nil {
			return c, err
		}
	}
	if opts.Scheduler {
		kc := filepath.Join(dir, "scheduler.kubeconfig")
		if _, err := writeKubeconfig(kc, opts.Name, c.APIServerURL, c.ca.certPEM, pki.scheduler); err != nil {
			return c, err
		}
		if err := c.start(binaries.KubeScheduler, []string{
			"--kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", schedPort),
			"--leader-elect=false",
			"--v=1",
		}, nil); err != nil {
			return c, err
		}
	}
	if opts.Kwok {
		if err := c.startKwok(pki, kwokPort); err != nil {
			return c, err
		}
	}

	if opts.ControllerManager {
		// The service-account controller making "default" shows the
		// controller-manager is up and reconciling.
		if err := c.waitFor(ctx, "kube-controller-manager (default service account)", 60*time.Second, func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			return err
		}); err != nil {
			return c, err
		}
	}
	if opts.Scheduler {
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // our own child on loopback
		if err := c.waitFor(ctx, "kube-scheduler /healthz", 60*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort))
		}); err != nil {
			return c, err
		}
	}
	if len(opts.Nodes) > 0 {
		if err := c.AddNodes(ctx, opts.Nodes...); err != nil {
			return c, err
		}
	}
	if opts.RealNodes > 0 {
		if err := c.startRealNodes(ctx); err != nil {
			return c, err
		}
	}
	if opts.Storage {
		if err := c.startStorage(ctx); err != nil {
			return c, err
		}
	}
	// A program that lost its port to another process exits at once; make
	// sure none did, so no check above was answered by someone else's server.
	if err := c.waitFor(ctx, "every program still running", time.Second, func(context.Context) error { return nil }); err != nil {
		return c, err
	}
	c.StartupDuration = time.Since(begin)
	return c, nil
}

// credentials are the certificates and keys a cluster's components use.
type credentials struct {
	apiServing, apiKubeletClient, admin, controllerManager, scheduler, kwokServing *keyPair
	saKey, saPub                                                                   string
}

func (c *Cluster) writeCredentials() (*credentials, error) {
	var p credentials
	var err error
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	svcIP, err := firstServiceIP(c.opts.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	steps := []func() error{
		func() (err error) {
			ips := append(loopback, svcIP)
			if c.apiAddr.IsValid() {
				ips = append(ips, c.apiAddr.AsSlice())
			}
			p.apiServing, err = c.ca.issue(c.Dir, "apiserver", "kube-apiserver", nil, true,
				[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
				ips)
			return err
		},
		func() (err error) {
			p.apiKubeletClient, err = c.ca.issue(c.Dir, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, false, nil, nil)
			return err
		},
		func() (err error) {
			p.admin, err = c.ca.issue(c.Dir, "admin", "ferry-testbed-admin", []string{"system:masters"}, false, nil, nil)
			return err
		},
		func() (err error) {
			p.controllerManager, err = c.ca.issue(c.Dir, "controller-manager", "system:kube-controller-manager", nil, false, nil, nil)
			return err
		},
		func() (err error) {
			p.scheduler, err = c.ca.issue(c.Dir, "scheduler", "system:kube-scheduler", nil, false, nil, nil)
			return err
		},
		func() (err error) {
			p.kwokServing, err = c.ca.issue(c.Dir, "kwok", "kwok", nil, true, []string{"localhost"}, loopback)
			return err
		},
		func() (err error) {
			p.saKey, p.saPub, err = writeServiceAccountKeys(c.Dir)
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "admin.kubeconfig")
	return &p, err
}

// start launches one of the cluster's programs from the test bed binaries.
func (c *Cluster) start(name string, args, env []string) error {
	bin, err := binaries.Path(name)
	if err != nil {
		return err
	}
	p, err := startProcess(c.Dir, name, bin, args, env)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// waitFor polls check until it succeeds, failing early with the log of a
// program that exited, so a broken flag shows as its own error message.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		for _, p := range c.procs {
			if done, exitErr := p.exited(); done {
				return fmt.Errorf("waiting for %s: %s exited (%v); last lines of %s:\n%s", what, p.name, exitErr, p.logPath, p.logTail(25))
			}
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		last = check(attempt)
		cancelAttempt()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// portConflict says whether a program failed because its port was taken.
func (c *Cluster) portConflict() bool {
	for _, p := range c.procs {
		if strings.Contains(p.logTail(50), "address already in use") {
			return true
		}
	}
	return false
}

// Stop ends every process of the cluster, the in-process provisioner first
// and the API server and the other components before etcd, and removes the
// cluster's folder (unless FERRY_TESTBED_KEEP is set). It is safe to call
// more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.storage != nil {
			c.storage.stop()
		}
		var errs []error
		for _, n := range c.RealNodes {
			if err := n.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		var wg sync.WaitGroup
		var etcd *process
		for _, p := range c.procs {
			if p.name == binaries.Etcd {
				etcd = p
				continue
			}
			wg.Go(func() { p.stop(5 * time.Second) })
		}
		wg.Wait()
		if etcd != nil {
			etcd.stop(5 * time.Second)
		}
		if c.egress != nil {
			c.egress.close()
		}
		if c.ownUnderlay {
			if err := c.underlay.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if os.Getenv(EnvKeep) == "" {
			if err := os.RemoveAll(c.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove folder of cluster %s: %w", c.Name, err))
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// StopAPIServer stops the cluster's kube-apiserver, leaving etcd and the
// other components running: to the outside the cluster is unreachable, as
// in an outage. StartAPIServer brings it back on the same address.
func (c *Cluster) StopAPIServer() {
	for _, p := range c.procs {
		if p.name == binaries.KubeAPIServer {
			p.stop(5 * time.Second)
		}
	}
}

// StartAPIServer restarts a kube-apiserver stopped by StopAPIServer, on the
// same port, with the same data and credentials, and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	for i, p := range c.procs {
		if p.name != binaries.KubeAPIServer {
			continue
		}
		if done, _ := p.exited(); !done {
			return fmt.Errorf("cluster %s: kube-apiserver is running", c.Name)
		}
		if err := c.restart(i, c.apiServerArgs); err != nil {
			return err
		}
		return c.waitFor(ctx, "restarted kube-apiserver /readyz", 90*time.Second, func(ctx context.Context) error {
			_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		})
	}
	return fmt.Errorf("cluster %s has no kube-apiserver", c.Name)
}

// RestartEtcd kills the cluster's etcd with SIGKILL, as a crash would,
// leaves it down for down, and starts it again on its data and port; it
// returns once etcd and then the API server are healthy again.
func (c *Cluster) RestartEtcd(ctx context.Context, down time.Duration) error {
	for i, p := range c.procs {
		if p.name != binaries.Etcd {
			continue
		}
		if done, _ := p.exited(); !done {
			_ = p.cmd.Process.Kill() // by the PID it started
			<-p.done
		}
		select {
		case <-time.After(down):
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := c.restart(i, c.etcdArgs); err != nil {
			return err
		}
		if err := c.waitFor(ctx, "restarted etcd health", 30*time.Second, func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, c.etcdURL+"/health")
		}); err != nil {
			return err
		}
		return c.waitFor(ctx, "kube-apiserver /readyz after etcd's restart", 90*time.Second, func(ctx context.Context) error {
			_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		})
	}
	return fmt.Errorf("cluster %s has no etcd", c.Name)
}

// restart starts the program of the stopped process c.procs[i] again with
// args, in its place.
func (c *Cluster) restart(i int, args []string) error {
	name := c.procs[i].name
	bin, err := binaries.Path(name)
	if err != nil {
		return err
	}
	np, err := startProcess(c.Dir, name, bin, args, nil)
	if err != nil {
		return err
	}
	c.procs[i] = np
	return nil
}

// MemoryRSS returns the resident memory of each running program of the cluster.
func (c *Cluster) MemoryRSS() (map[string]int64, error) {
	out := map[string]int64{}
	for _, p := range c.procs {
		rss, err := p.rssBytes()
		if err != nil {
			return nil, err
		}
		out[p.name] = rss
	}
	return out, nil
}

// Logs returns the last n lines of each program's log, and of the
// in-process provisioner's, for failure reports.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "==== %s/%s (last %d lines) ====\n%s\n", c.Name, p.name, n, p.logTail(n))
	}
	if c.storage != nil {
		fmt.Fprintf(&b, "==== %s/%s (last %d lines) ====\n%s\n", c.Name, storageLog, n, fileTail(c.storage.logPath, n))
	}
	return b.String()
}

func httpOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// firstServiceIP is the cluster IP of the kubernetes Service: the first
// address of the range, which the API server's certificate must name.
func firstServiceIP(cidr string) (net.IP, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("options.serviceCIDR %q: %w", cidr, err)
	}
	ip := ipnet.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("options.serviceCIDR %q: only IPv4 ranges are supported", cidr)
	}
	first := make(net.IP, len(ip))
	copy(first, ip)
	first[3]++
	return first, nil
}

// PIDs returns the process ID of each program the cluster started.
func (c *Cluster) PIDs() map[string]int {
	out := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

// PodCIDR is the range the cluster's pods get their IPs from.
func (c *Cluster) PodCIDR() string { return c.opts.PodCIDR }
