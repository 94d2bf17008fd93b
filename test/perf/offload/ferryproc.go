package offload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

// ferryBinaries are ferry's programs built from the source tree.
type ferryBinaries struct{ ControllerManager, VirtualKubelet string }

// buildFerryBinaries builds ferry-controller-manager and
// ferry-virtual-kubelet once into a temporary folder; remove deletes it.
func buildFerryBinaries(ctx context.Context, root string) (b ferryBinaries, remove func(), err error) {
	dir, err := os.MkdirTemp("", "ferry-bench-bin-")
	if err != nil {
		return b, nil, fmt.Errorf("create folder for ferry's binaries: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/ferry-controller-manager", "./cmd/ferry-virtual-kubelet")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		remove()
		return b, nil, fmt.Errorf("build ferry-controller-manager and ferry-virtual-kubelet: %w\n%s", err, out)
	}
	return ferryBinaries{
		ControllerManager: filepath.Join(dir, "ferry-controller-manager"),
		VirtualKubelet:    filepath.Join(dir, "ferry-virtual-kubelet"),
	}, remove, nil
}

// ferryStopGrace is how long Stop waits after SIGTERM before it kills: the
// controller manager first stops its virtual kubelets (up to 10s each).
const ferryStopGrace = 30 * time.Second

// ferryProcess is ferry-controller-manager of one cluster run as a process,
// with its virtual kubelets as its children (process mode), logging to
// c.Dir/ferry-controller-manager.log. Like the Deployment it runs as in a
// cluster, it is started again when it exits on its own (e.g. "leader
// election lost" while its API server is down), after a back-off (see
// supervisorDelay); Kill and Stop end it for good, until Start.
type ferryProcess struct {
	name    string // the cluster's
	bin     string
	args    []string
	logPath string
	health  string // http://127.0.0.1:port, /readyz
	metrics string // http://127.0.0.1:port/metrics

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	// stopped: by Kill or Stop, not to be started again until Start.
	stopped bool
	// exits counts the times it exited on its own; quickExits those in a
	// row within supervisorReset of their start.
	exits, quickExits int
	started           time.Time
}

// A controller manager that exited on its own is started again after
// supervisorDelay, doubled for each exit in a row within supervisorReset of
// its start, up to maxSupervisorDelay, as kubelet would restart its pod.
const (
	supervisorDelay    = time.Second
	maxSupervisorDelay = 16 * time.Second
	supervisorReset    = 30 * time.Second
)

// startFerryProcess starts ferry-controller-manager for c, as the chart
// would in process mode with the settings startFerry uses in-process
// (leader election on, the production default), and returns once its
// /readyz answers. extraArgs are appended to its flags.
func startFerryProcess(ctx context.Context, c *testbed.Cluster, id ferryv1alpha1.ClusterID, b ferryBinaries, extraArgs ...string) (*ferryProcess, error) {
	ports, err := testbed.FreePorts(2)
	if err != nil {
		return nil, err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	healthAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	p := &ferryProcess{
		name: c.Name,
		bin:  b.ControllerManager,
		args: append([]string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--cluster-id=" + string(id),
			"--virtual-kubelet-mode=process",
			"--virtual-kubelet-binary=" + b.VirtualKubelet,
			"--virtual-kubelet-log-dir=" + c.Dir,
			"--pod-cidr=" + c.PodCIDR(),
			"--sharing-percentage=90",
			"--grant-debounce=2s",
			"--volume-mover-image=",
			"--metrics-bind-address=" + metricsAddr,
			"--metrics-secure=false",
			"--health-probe-bind-address=" + healthAddr,
		}, extraArgs...),
		logPath: filepath.Join(c.Dir, "ferry-controller-manager.log"),
		health:  "http://" + healthAddr,
		metrics: "http://" + metricsAddr + "/metrics",
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Start starts the controller manager (again, after Kill or Stop) with the
// same flags and returns once its /readyz answers; it fails if it already
// runs.
func (p *ferryProcess) Start(ctx context.Context) error {
	return p.start(ctx, nil)
}

// start starts the process; after, when not nil, only if it has not been
// stopped nor started again since after exited (the supervisor's restart).
func (p *ferryProcess) start(ctx context.Context, after *exec.Cmd) error {
	p.mu.Lock()
	if after != nil && (p.stopped || p.cmd != after) {
		p.mu.Unlock()
		return nil
	}
	p.stopped = false
	if p.cmd != nil && !p.exited() {
		p.mu.Unlock()
		return fmt.Errorf("ferry-controller-manager of %s already runs (pid %d)", p.name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("open log of ferry-controller-manager of %s: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group (a Ctrl-C reaches the benchmark, which stops it
	// in order) and killed by the kernel if the benchmark dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		p.mu.Unlock()
		return fmt.Errorf("start ferry-controller-manager of %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
		p.supervise(cmd)
	}()
	p.cmd, p.done, p.started = cmd, done, time.Now()
	p.mu.Unlock()

	hc := &http.Client{Timeout: 2 * time.Second}
	err = poll(ctx, 60*time.Second, "ferry-controller-manager of "+p.name+" to answer /readyz", func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("ferry-controller-manager of %s exited; see %s", p.name, p.logPath)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.health+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		if after == nil {
			_ = p.Kill()
		} // else the supervisor starts it again when it exits
		return err
	}
	return nil
}

// supervise starts the controller manager again after cmd, its process,
// exited, unless Kill or Stop ended it.
func (p *ferryProcess) supervise(cmd *exec.Cmd) {
	p.mu.Lock()
	if p.stopped || p.cmd != cmd {
		p.mu.Unlock()
		return
	}
	p.exits++
	if time.Since(p.started) < supervisorReset {
		p.quickExits++
	} else {
		p.quickExits = 0
	}
	delay := min(supervisorDelay<<min(p.quickExits, 5), maxSupervisorDelay)
	p.mu.Unlock()
	time.Sleep(delay)
	_ = p.start(context.Background(), cmd)
}

// Exits is how many times the controller manager exited on its own (and
// was started again).
func (p *ferryProcess) Exits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}

// exited reports whether the last process started has ended; p.mu held.
func (p *ferryProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the controller manager's process ID, 0 when it does not run.
func (p *ferryProcess) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// MetricsURL is where the controller manager serves its Prometheus metrics
// (controller-runtime's reconciles and work queues), over plain HTTP.
func (p *ferryProcess) MetricsURL() string { return p.metrics }

// LogPath is the controller manager's log file.
func (p *ferryProcess) LogPath() string { return p.logPath }

// VirtualKubeletPIDs maps each virtual node to the PID of the virtual
// kubelet serving it, among the controller manager's running children.
func (p *ferryProcess) VirtualKubeletPIDs() map[string]int {
	pid := p.PID()
	if pid == 0 {
		return map[string]int{}
	}
	return childVirtualKubelets(pid)
}

// childVirtualKubelets finds, in /proc, the live children of parent that
// run with --virtual-node-name, by virtual node name.
func childVirtualKubelets(parent int) map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		ppid, state, ok := parseStat(string(stat))
		if !ok || ppid != parent || state == "Z" {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if name := virtualNodeArg(strings.Split(string(cmdline), "\x00")); name != "" {
			out[name] = pid
		}
	}
	return out
}

// parseStat reads the state and parent PID out of a /proc/<pid>/stat line,
// whose second field (the command, in parentheses) may hold spaces.
func parseStat(stat string) (ppid int, state string, ok bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, "", false
	}
	return ppid, f[0], true
}

// virtualNodeArg is the value of --virtual-node-name in a command line.
func virtualNodeArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--virtual-node-name="); ok {
			return v
		}
		if a == "--virtual-node-name" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// Kill sends SIGKILL to the controller manager and waits until it and its
// virtual kubelets (killed by the kernel with it) have gone.
func (p *ferryProcess) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopped = true
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	kubelets := childVirtualKubelets(cmd.Process.Pid)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill ferry-controller-manager of %s: %w", p.name, err)
	}
	<-done
	return waitGone(kubelets, 10*time.Second)
}

// Stop sends SIGTERM to the controller manager, which first stops its
// virtual kubelets, and waits for it; after ferryStopGrace it kills it.
// Stopping a stopped one is no error.
func (p *ferryProcess) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopped = true
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	kubelets := childVirtualKubelets(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(ferryStopGrace):
		_ = cmd.Process.Kill()
		<-done
	}
	return waitGone(kubelets, 10*time.Second)
}

// waitGone waits until none of pids runs (gone or a zombie).
func waitGone(pids map[string]int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for name, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("virtual kubelet of %s (pid %d) still runs %s after its controller manager ended", name, pid, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, state, ok := parseStat(string(stat))
	return ok && state != "Z"
}
