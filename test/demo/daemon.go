package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/crashloop"
	"github.com/ferry-io/ferry/test/localscheduler"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// daemonCommand is the daemon's first argument, by which `down` recognizes
// its process.
const daemonCommand = "daemon"

// RunDaemon starts the clusters and ferry's components, reports them
// ready, and stops everything on SIGTERM or SIGINT (ferry-demo down). A
// component that exits is restarted with the kubelet's crash-loop back-off
// (package crashloop), as in a cluster: the demo goes on.
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
		_ = os.Remove(filepath.Join(cfg.StateDir, statusFile))
		_ = os.Remove(filepath.Join(cfg.StateDir, pidFile))
	}()
	logs := filepath.Join(cfg.StateDir, logsFolder)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}

	if err := testbed.RealNodesAvailable(); err != nil {
		return fmt.Errorf("the demo runs a real node in each cluster: %w", err)
	}
	// ferry-gateway's image builds while the clusters start.
	type image struct {
		tarball string
		err     error
		took    time.Duration
	}
	gatewayImage := make(chan image, 1)
	go func() {
		start := time.Now()
		t, err := buildGatewayImage(ctx, cfg.RepoRoot, filepath.Join(cfg.StateDir, "images"))
		gatewayImage <- image{tarball: t, err: err, took: time.Since(start)}
	}()

	underlay, err := testbed.NewUnderlay()
	if err != nil {
		return fmt.Errorf("the real nodes' underlay: %w", err)
	}
	defer func() { _ = underlay.Close() }() // after the clusters' stop, deferred below

	providerNames := cfg.providerNames()
	opts := []testbed.Options{{Name: consumerName, ControllerManager: true, Scheduler: true, Storage: true,
		RealNodes: 1, Underlay: underlay}}
	for i, name := range providerNames {
		opts = append(opts, testbed.Options{Name: name, ControllerManager: true, Scheduler: true, Storage: true,
			RealNodes: 1, Underlay: underlay,
			// The provider keeps the demo's offloaded pods on its real
			// node by their twin namespace's node selector.
			ExtraAPIServerArgs: []string{"--enable-admission-plugins=PodNodeSelector"},
			Nodes:              []testbed.NodePool{{Name: name + "-sim", Count: simulatedProviderNodes, CPU: "16", Memory: "64Gi", Labels: cfg.providerLabels[i]}}})
	}
	if len(providerNames) == 1 {
		progress(fmt.Sprintf("starting the consumer cluster (a real node) and the provider cluster (a real node and %d simulated ones, labels %s), and building ferry-gateway's image",
			simulatedProviderNodes, labels.Set(cfg.providerLabels[0])))
	} else {
		progress(fmt.Sprintf("starting the consumer cluster (a real node) and %d provider clusters (a real node and %d simulated ones each): %s, and building ferry-gateway's image",
			len(providerNames), simulatedProviderNodes, strings.Join(providerNames, ", ")))
	}
	clusters, err := testbed.StartClusters(ctx, opts...)
	if err != nil {
		return fmt.Errorf("start clusters: %w", err)
	}
	defer func() {
		progress("stopping the clusters")
		for _, c := range clusters {
			_ = c.Stop()
		}
	}()
	consumer, providers := clusters[0], clusters[1:]
	for i, p := range providers {
		// The real node shares the simulated ones' labels: the provider's
		// region is still the one its nodes have in common.
		if err := labelRealNodes(ctx, p, cfg.providerLabels[i]); err != nil {
			return err
		}
	}

	progress("installing ferry's CRDs and roles in every cluster, and its storage class in the consumer")
	for _, c := range clusters {
		if err := c.ApplyKustomization(ctx, filepath.Join(cfg.RepoRoot, "manifests", "base")); err != nil {
			return err
		}
	}
	if err := consumer.ApplyKustomization(ctx, filepath.Join(cfg.RepoRoot, "manifests", "storage")); err != nil {
		return err
	}

	img := <-gatewayImage
	if img.err != nil {
		return img.err
	}
	progress(fmt.Sprintf("network fabric: ferry-gateway's image built in %s; imported into every real node; ferry-gateway and a route agent per real node run as pods of each cluster (manifests/gateway), starting while ferry's other components start",
		img.took.Round(100*time.Millisecond)))
	for _, c := range clusters {
		for _, n := range c.RealNodes {
			if err := n.ImportImage(ctx, img.tarball); err != nil {
				return err
			}
		}
		if err := installFabric(ctx, cfg, c); err != nil {
			return err
		}
	}

	comps := &components{cfg: cfg, logs: logs, log: daemonLogger()}
	defer comps.stopAll()
	statusPath := filepath.Join(cfg.StateDir, statusFile)

	progress("starting ferry-controller-manager for each cluster (virtual kubelets as local processes)")
	var managers []*crashloop.Process
	for _, c := range clusters {
		comp, err := comps.startControllerManager(c)
		if err != nil {
			return err
		}
		managers = append(managers, comp)
	}
	for i, c := range clusters {
		if err := waitForIdentity(ctx, c, managers[i], logs); err != nil {
			return err
		}
	}

	progress("starting ferry-webhook for each cluster (pod offloading policy, PVC remapping, quotas)")
	for _, c := range clusters {
		if err := comps.startWebhook(ctx, c); err != nil {
			return err
		}
	}

	progress("starting ferry-scheduler for the consumer (a second scheduler, profile " + SchedulerName + ", beside kube-scheduler's default-scheduler)")
	if err := comps.startScheduler(consumer); err != nil {
		return err
	}

	kubectl, err := binaries.Path("kubectl")
	if err != nil {
		return err
	}
	ready := Ready{PID: os.Getpid(), ConsumerDir: consumer.Dir, ProviderDir: providers[0].Dir, Kubectl: kubectl,
		ConsumerRealNode:   consumer.RealNodes[0].Name,
		ConsumerKubeconfig: filepath.Join(cfg.StateDir, consumerName+".kubeconfig"),
		ProviderKubeconfig: filepath.Join(cfg.StateDir, providerName+".kubeconfig")}
	if err := copyFile(consumer.KubeconfigPath, ready.ConsumerKubeconfig); err != nil {
		return err
	}
	for _, p := range providers {
		kubeconfig := filepath.Join(cfg.StateDir, p.Name+".kubeconfig")
		if err := copyFile(p.KubeconfigPath, kubeconfig); err != nil {
			return err
		}
		ready.Providers = append(ready.Providers, ProviderReady{Name: p.Name, Kubeconfig: kubeconfig, RealNode: p.RealNodes[0].Name})
	}
	if err := comps.writeStatus(statusPath); err != nil {
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
			if err := comps.writeStatus(statusPath); err != nil {
				comps.log.Error(err, "Write the components' status", "file", statusPath)
			}
		}
	}
}

// simulatedProviderNodes is how many kwok nodes each provider has beside
// its real node: their capacity is what the scheduling part is about.
const simulatedProviderNodes = 5

// labelRealNodes gives c's real nodes the labels set.
func labelRealNodes(ctx context.Context, c *testbed.Cluster, set map[string]string) error {
	for _, n := range c.RealNodes {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": set}})
		if err != nil {
			return err
		}
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s of %s: %w", n.Name, c.Name, err)
		}
	}
	return nil
}

// daemonLogger writes structured lines to the daemon's output (daemon.log).
func daemonLogger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		fmt.Println(time.Now().UTC().Format(time.RFC3339), args)
	}, funcr.Options{})
}

// components are ferry's processes the daemon runs, each restarted with
// the kubelet's crash-loop back-off when it exits on its own.
type components struct {
	cfg  Config
	logs string
	log  logr.Logger

	mu   sync.Mutex
	list []*crashloop.Process
}

// start runs binary as the component name (of kind, for cluster), with the
// user's extra flags for it appended, logging to logs/<name>.log (emptied
// first: a new demo starts a new log; restarts append to it).
func (cs *components) start(cluster, kind, name, binary string, args ...string) (*crashloop.Process, error) {
	args = append(args, cs.cfg.flagsFor(cluster, kind, name)...)
	logPath := filepath.Join(cs.logs, name+".log")
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		return nil, err
	}
	p := &crashloop.Process{Name: name, Binary: binary, Args: args, LogPath: logPath, Restart: true, Logger: cs.log}
	if err := p.Start(); err != nil {
		return nil, err
	}
	cs.log.Info("Started component", "component", name, "pid", p.PID(), "args", args)
	cs.mu.Lock()
	cs.list = append(cs.list, p)
	cs.mu.Unlock()
	return p, nil
}

// stopAll ends every component (a controller manager's virtual kubelets
// with it), by PID, the last started first.
func (cs *components) stopAll() {
	cs.mu.Lock()
	list := slices.Clone(cs.list)
	cs.mu.Unlock()
	slices.Reverse(list)
	for _, p := range list {
		p.Stop(10 * time.Second)
	}
}

// writeStatus records each component's state for ferry-demo status.
func (cs *components) writeStatus(path string) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := daemonStatus{PID: os.Getpid()}
	for _, p := range cs.list {
		st.Components = append(st.Components, componentStatus{Name: p.Name, Log: p.LogPath, State: p.State()})
	}
	return writeJSON(path, st)
}

func (cs *components) startControllerManager(c *testbed.Cluster) (*crashloop.Process, error) {
	name := c.Name + "-" + kindControllerManager
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--cluster-id=" + c.Name,
		// kwok gives pod IPs from this range; the test bed's nodes have no
		// spec.podCIDRs to detect it from.
		"--pod-cidr=" + c.PodCIDR(),
		"--virtual-kubelet-mode=process",
		"--virtual-kubelet-binary=" + filepath.Join(cs.cfg.BinDir, "ferry-virtual-kubelet"),
		"--virtual-kubelet-log-dir=" + cs.logs,
		"--virtual-kubelet-arg=--health-check-period=2s",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--grant-debounce=500ms",
	}
	for _, f := range cs.cfg.flagsFor(c.Name, kindVirtualKubelet, c.Name+"-"+kindVirtualKubelet) {
		args = append(args, "--virtual-kubelet-arg="+f)
	}
	return cs.start(c.Name, kindControllerManager, name, filepath.Join(cs.cfg.BinDir, "ferry-controller-manager"), args...)
}

// startWebhook runs ferry-webhook for c on 127.0.0.1, with its
// configurations pointing there, and waits until it serves (its CA bundle
// injected).
func (cs *components) startWebhook(ctx context.Context, c *testbed.Cluster) error {
	port, health, err := localwebhook.Ports()
	if err != nil {
		return err
	}
	if err := localwebhook.Install(ctx, c.Client, cs.cfg.RepoRoot, fmt.Sprintf("https://127.0.0.1:%d", port)); err != nil {
		return err
	}
	comp, err := cs.start(c.Name, kindWebhook, c.Name+"-"+kindWebhook, filepath.Join(cs.cfg.BinDir, "ferry-webhook"),
		"--kubeconfig="+c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--port=%d", port),
		"--cert-dns-names=localhost",
		"--cert-ip-addresses=127.0.0.1",
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
	)
	if err != nil {
		return err
	}
	// A webhook that exits before it serves (a bad flag) fails the start
	// at once, rather than after the minute of waiting.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited := comp.Exited()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := localwebhook.WaitReady(wctx, health, time.Minute); err != nil {
		if isClosed(exited) {
			return fmt.Errorf("%s exited (%s); see %s", comp.Name, comp.State().LastExit, comp.LogPath)
		}
		return fmt.Errorf("%s: %w; see %s", comp.Name, err, comp.LogPath)
	}
	return nil
}

// startScheduler runs ferry-scheduler for c with manifests/scheduler's
// profile, pointed at c's kubeconfig, without leader election and without
// serving endpoints (the demo talks to the API server only).
func (cs *components) startScheduler(c *testbed.Cluster) error {
	config, err := localscheduler.WriteConfig(filepath.Join(cs.cfg.RepoRoot, "manifests", "scheduler", "config.yaml"), c.KubeconfigPath, cs.logs)
	if err != nil {
		return err
	}
	_, err = cs.start(c.Name, kindScheduler, c.Name+"-"+kindScheduler, filepath.Join(cs.cfg.BinDir, "ferry-scheduler"),
		"--config="+config,
		"--secure-port=0",
		"--bind-address=127.0.0.1",
	)
	return err
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitForIdentity waits until the cluster's controller manager has recorded
// the cluster's identity, which ferryctl peer needs; it fails at once if the
// controller manager exits first (a bad flag).
func waitForIdentity(ctx context.Context, c *testbed.Cluster, comp *crashloop.Process, logs string) error {
	key := client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: ferryv1alpha1.ClusterIdentityConfigMap}
	exited := comp.Exited()
	deadline := time.Now().Add(time.Minute)
	for {
		var cm corev1.ConfigMap
		if err := c.Client.Get(ctx, key, &cm); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%s); see %s", comp.Name, comp.State().LastExit, comp.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not record the cluster identity (%s) within a minute; see %s", comp.Name, key, filepath.Join(logs, comp.Name+".log"))
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
