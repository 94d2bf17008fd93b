package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/localscheduler"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// daemonCommand is the daemon's first argument, by which `down` recognizes
// its process.
const daemonCommand = "daemon"

// Config locates the demo's inputs and state.
type Config struct {
	// StateDir holds the daemon's PID, logs and kubeconfigs.
	StateDir string
	// BinDir holds ferry's binaries (make build).
	BinDir string
	// RepoRoot holds manifests/.
	RepoRoot string
}

// component is a ferry process the daemon runs for a cluster.
type component struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// RunDaemon starts the clusters and ferry's controller managers, reports
// them ready, and stops everything on SIGTERM or SIGINT.
func RunDaemon(cfg Config) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(filepath.Join(cfg.StateDir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.WriteFile(filepath.Join(cfg.StateDir, errorFile), []byte(err.Error()), 0o600)
		}
		_ = os.Remove(filepath.Join(cfg.StateDir, readyFile))
		_ = os.Remove(filepath.Join(cfg.StateDir, pidFile))
	}()
	logs := filepath.Join(cfg.StateDir, logsFolder)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}

	progress("starting the consumer cluster (3 nodes) and the provider cluster (5 nodes)")
	clusters, err := testbed.StartClusters(ctx,
		testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Storage: true,
			Nodes: []testbed.NodePool{{Name: "consumer-node", Count: 3, CPU: "4", Memory: "16Gi"}}},
		testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Storage: true,
			Nodes: []testbed.NodePool{{Name: "provider-node", Count: 5, CPU: "16", Memory: "64Gi",
				Labels: map[string]string{"topology.kubernetes.io/region": "eu-west"}}}},
	)
	if err != nil {
		return fmt.Errorf("start clusters: %w", err)
	}
	defer func() {
		progress("stopping the clusters")
		for _, c := range clusters {
			_ = c.Stop()
		}
	}()
	consumer, provider := clusters[0], clusters[1]

	progress("installing ferry's CRDs and roles in both clusters, and its storage class in the consumer")
	for _, c := range clusters {
		if err := c.ApplyKustomization(ctx, filepath.Join(cfg.RepoRoot, "manifests", "base")); err != nil {
			return err
		}
	}
	if err := consumer.ApplyKustomization(ctx, filepath.Join(cfg.RepoRoot, "manifests", "storage")); err != nil {
		return err
	}

	progress("starting ferry-controller-manager for each cluster (virtual kubelets as local processes)")
	var comps []*component
	defer func() {
		for _, c := range comps {
			c.stop()
		}
	}()
	for _, c := range clusters {
		comp, err := startControllerManager(cfg, c, logs)
		if err != nil {
			return err
		}
		comps = append(comps, comp)
	}

	for i, c := range clusters {
		if err := waitForIdentity(ctx, c, comps[i]); err != nil {
			return err
		}
	}

	progress("starting ferry-webhook for each cluster (pod offloading policy, PVC remapping, quotas)")
	for _, c := range clusters {
		comp, err := startWebhook(ctx, cfg, c, logs)
		if comp != nil {
			comps = append(comps, comp)
		}
		if err != nil {
			return err
		}
	}

	progress("starting ferry-scheduler for the consumer (a second scheduler, profile " + SchedulerName + ", beside kube-scheduler's default-scheduler)")
	sched, err := startScheduler(cfg, consumer, logs)
	if err != nil {
		return err
	}
	comps = append(comps, sched)

	progress("building the network fabric's lab (nodes and pods as network namespaces) and starting ferry-gateway and route agents")
	fabric, ferr := startFabric(cfg, clusters, logs, &comps)
	defer fabric.close()
	if ferr != nil {
		progress(ferr.Error())
		_ = writeText(filepath.Join(cfg.StateDir, fabricFile), ferr.Error()+"\n")
	} else {
		go fabric.show(ctx, cfg.StateDir, consumer, provider)
	}

	kubectl, err := binaries.Path("kubectl")
	if err != nil {
		return err
	}
	ready := Ready{PID: os.Getpid(), ConsumerDir: consumer.Dir, ProviderDir: provider.Dir, Kubectl: kubectl,
		ConsumerKubeconfig: filepath.Join(cfg.StateDir, "consumer.kubeconfig"),
		ProviderKubeconfig: filepath.Join(cfg.StateDir, "provider.kubeconfig")}
	if err := copyFile(consumer.KubeconfigPath, ready.ConsumerKubeconfig); err != nil {
		return err
	}
	if err := copyFile(provider.KubeconfigPath, ready.ProviderKubeconfig); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(cfg.StateDir, readyFile), ready); err != nil {
		return err
	}
	progress("ready")

	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			progress("stopping (signal received)")
			return nil
		case <-ticker.C:
			for _, c := range comps {
				select {
				case <-c.done:
					return fmt.Errorf("%s exited; see %s", c.name, filepath.Join(logs, c.name+".log"))
				default:
				}
			}
		}
	}
}

func startControllerManager(cfg Config, c *testbed.Cluster, logs string) (*component, error) {
	return startComponent(c.Name+"-controller-manager", logs, filepath.Join(cfg.BinDir, "ferry-controller-manager"),
		"--kubeconfig="+c.KubeconfigPath,
		"--cluster-id="+c.Name,
		// kwok gives pod IPs from this range; the test bed's nodes have no
		// spec.podCIDRs to detect it from.
		"--pod-cidr="+c.PodCIDR(),
		"--virtual-kubelet-mode=process",
		"--virtual-kubelet-binary="+filepath.Join(cfg.BinDir, "ferry-virtual-kubelet"),
		"--virtual-kubelet-log-dir="+logs,
		"--virtual-kubelet-arg=--health-check-period=2s",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--grant-debounce=500ms",
	)
}

// startWebhook runs ferry-webhook for c on 127.0.0.1, with its
// configurations pointing there, and waits until it serves (its CA bundle
// injected).
func startWebhook(ctx context.Context, cfg Config, c *testbed.Cluster, logs string) (*component, error) {
	port, health, err := localwebhook.Ports()
	if err != nil {
		return nil, err
	}
	if err := localwebhook.Install(ctx, c.Client, cfg.RepoRoot, fmt.Sprintf("https://127.0.0.1:%d", port)); err != nil {
		return nil, err
	}
	comp, err := startComponent(c.Name+"-webhook", logs, filepath.Join(cfg.BinDir, "ferry-webhook"),
		"--kubeconfig="+c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--port=%d", port),
		"--cert-dns-names=localhost",
		"--cert-ip-addresses=127.0.0.1",
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
	)
	if err != nil {
		return nil, err
	}
	if err := localwebhook.WaitReady(ctx, health, time.Minute); err != nil {
		return comp, fmt.Errorf("%s: %w; see %s", comp.name, err, filepath.Join(logs, comp.name+".log"))
	}
	return comp, nil
}

// startScheduler runs ferry-scheduler for c with manifests/scheduler's
// profile, pointed at c's kubeconfig, without leader election and without
// serving endpoints (the demo talks to the API server only).
func startScheduler(cfg Config, c *testbed.Cluster, logs string) (*component, error) {
	config, err := localscheduler.WriteConfig(filepath.Join(cfg.RepoRoot, "manifests", "scheduler", "config.yaml"), c.KubeconfigPath, logs)
	if err != nil {
		return nil, err
	}
	return startComponent(c.Name+"-scheduler", logs, filepath.Join(cfg.BinDir, "ferry-scheduler"),
		"--config="+config,
		"--secure-port=0",
		"--bind-address=127.0.0.1",
	)
}

// startComponent starts one of ferry's binaries, logging to logs/<name>.log.
func startComponent(name, logs, binary string, args ...string) (*component, error) {
	logFile, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group (a Ctrl-C reaches the daemon, which stops it in
	// order), and it dies with the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	comp := &component{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(comp.done)
	}()
	return comp, nil
}

// stop ends the component (and, with it, its virtual kubelets), by PID.
func (c *component) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitForIdentity waits until the cluster's controller manager has recorded
// the cluster's identity, which ferryctl peer needs.
func waitForIdentity(ctx context.Context, c *testbed.Cluster, comp *component) error {
	key := client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: ferryv1alpha1.ClusterIdentityConfigMap}
	deadline := time.Now().Add(time.Minute)
	for {
		var cm corev1.ConfigMap
		if err := c.Client.Get(ctx, key, &cm); err == nil {
			return nil
		}
		select {
		case <-comp.done:
			return fmt.Errorf("%s exited", comp.name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not record the cluster identity (%s) within a minute", comp.name, key)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return errors.Join(out.Close())
}

// progress is a line of the daemon's log that `up` shows the user.
func progress(msg string) {
	fmt.Printf("%s %s\n", progressPrefix, msg)
}

const progressPrefix = "demo:"
