package peering

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// VirtualKubeletLauncher runs one virtual kubelet per VirtualNode. In a real
// cluster that is a Deployment; on the test bed and in the demo, a local
// process or a goroutine.
type VirtualKubeletLauncher interface {
	// Ensure starts the virtual kubelet of a VirtualNode unless it runs.
	Ensure(ctx context.Context, virtualNode types.NamespacedName) error
	// Remove stops it; stopping one that does not run is no error.
	Remove(ctx context.Context, virtualNode types.NamespacedName) error
	// Restart replaces a running virtual kubelet by a new one (which reads
	// its credential again), never running both at once.
	Restart(ctx context.Context, virtualNode types.NamespacedName) error
}

// FuncLauncher runs virtual kubelets as goroutines calling Run, which must
// block until its context ends. Tests and single-binary setups use it.
type FuncLauncher struct {
	Run func(ctx context.Context, virtualNode types.NamespacedName) error

	mu      sync.Mutex
	running map[types.NamespacedName]*runningKubelet
}

type runningKubelet struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Ensure implements VirtualKubeletLauncher.
func (l *FuncLauncher) Ensure(ctx context.Context, vn types.NamespacedName) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running = map[types.NamespacedName]*runningKubelet{}
	}
	if rk, ok := l.running[vn]; ok {
		select {
		case <-rk.done: // it ended on its own: start it again
		default:
			return nil
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rk := &runningKubelet{cancel: cancel, done: make(chan struct{})}
	l.running[vn] = rk
	logger := log.FromContext(ctx).WithValues("virtualNode", vn)
	go func() {
		defer close(rk.done)
		if err := l.Run(runCtx, vn); err != nil {
			logger.Error(err, "Virtual kubelet ended")
		}
	}()
	logger.Info("Started virtual kubelet")
	return nil
}

// Remove implements VirtualKubeletLauncher.
func (l *FuncLauncher) Remove(_ context.Context, vn types.NamespacedName) error {
	l.mu.Lock()
	rk, ok := l.running[vn]
	delete(l.running, vn)
	l.mu.Unlock()
	if ok {
		rk.cancel()
		<-rk.done
	}
	return nil
}

// Restart implements VirtualKubeletLauncher: the old one has ended when the
// new one starts.
func (l *FuncLauncher) Restart(ctx context.Context, vn types.NamespacedName) error {
	if err := l.Remove(ctx, vn); err != nil {
		return err
	}
	return l.Ensure(ctx, vn)
}

// StopAll stops every virtual kubelet the launcher runs, for shutdown.
func (l *FuncLauncher) StopAll() {
	l.mu.Lock()
	running := l.running
	l.running = nil
	l.mu.Unlock()
	for _, rk := range running {
		rk.cancel()
		<-rk.done
	}
}

// ProcessLauncher runs virtual kubelets as local processes of the
// ferry-virtual-kubelet binary, for the demo: each logs to
// LogDir/<name>.log, is started again when it exits on its own (after a
// back-off, see restartDelay) and dies with the controller manager.
type ProcessLauncher struct {
	// Binary is the ferry-virtual-kubelet executable.
	Binary string
	// Kubeconfig of the local cluster, passed to the virtual kubelet.
	Kubeconfig string
	// LogDir receives one log file per virtual kubelet.
	LogDir string
	// ExtraArgs are appended to every virtual kubelet's flags.
	ExtraArgs []string

	mu      sync.Mutex
	running map[types.NamespacedName]*kubeletProcess
}

type kubeletProcess struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when it has exited
	started time.Time
	// quickExits counts the exits in a row, before this process, each
	// within restartResetAfter of its start.
	quickExits int
}

// A virtual kubelet process that exits on its own (it crashed, or was
// killed) is started again after restartDelay, doubled for each exit in a
// row that came within restartResetAfter of its start, up to
// maxRestartDelay: it comes back at once after a kill, and a crash loop
// does not spin.
const (
	restartDelay      = time.Second
	maxRestartDelay   = time.Minute
	restartResetAfter = time.Minute
)

// backoff is the delay before restarting a process after quickExits exits
// in a row.
func backoff(quickExits int) time.Duration {
	d := restartDelay
	for range quickExits {
		if d >= maxRestartDelay {
			break
		}
		d *= 2
	}
	return min(d, maxRestartDelay)
}

// Ensure implements VirtualKubeletLauncher.
func (l *ProcessLauncher) Ensure(ctx context.Context, vn types.NamespacedName) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running = map[types.NamespacedName]*kubeletProcess{}
	}
	quickExits := 0
	if p, ok := l.running[vn]; ok {
		select {
		case <-p.done: // it ended on its own: start it again
			if time.Since(p.started) < restartResetAfter {
				quickExits = p.quickExits + 1
			}
		default:
			return nil
		}
	}
	p, err := l.start(log.FromContext(ctx), vn, quickExits)
	if err != nil {
		return err
	}
	l.running[vn] = p
	return nil
}

// start starts the virtual kubelet process of vn, with l.mu held; when it
// exits on its own, it is started again after a back-off.
func (l *ProcessLauncher) start(logger logr.Logger, vn types.NamespacedName, quickExits int) (*kubeletProcess, error) {
	logFile, err := os.OpenFile(filepath.Join(l.LogDir, "virtual-kubelet-"+vn.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open virtual kubelet log: %w", err)
	}
	args := append([]string{
		"--kubeconfig=" + l.Kubeconfig,
		"--virtual-node-namespace=" + vn.Namespace,
		"--virtual-node-name=" + vn.Name,
		// Processes share the host: each kubelet API on a free loopback
		// port, which its node advertises (ExtraArgs may say otherwise).
		"--kubelet-address=127.0.0.1:0",
	}, l.ExtraArgs...)
	cmd := exec.Command(l.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start virtual kubelet %s: %w", l.Binary, err)
	}
	p := &kubeletProcess{cmd: cmd, done: make(chan struct{}), started: time.Now(), quickExits: quickExits}
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		close(p.done)
		l.exited(logger, vn, p, err)
	}()
	logger.Info("Started virtual kubelet process", "virtualNode", vn, "pid", cmd.Process.Pid)
	return p, nil
}

// exited starts vn's virtual kubelet again after a back-off, unless p was
// removed or replaced meanwhile.
func (l *ProcessLauncher) exited(logger logr.Logger, vn types.NamespacedName, p *kubeletProcess, err error) {
	l.mu.Lock()
	current := l.running[vn] == p
	l.mu.Unlock()
	if !current {
		return // removed (stopped on purpose) or replaced
	}
	quickExits := 0
	if time.Since(p.started) < restartResetAfter {
		quickExits = p.quickExits + 1
	}
	delay := backoff(quickExits)
	logger.Info("Virtual kubelet process exited; starting it again", "virtualNode", vn, "pid", p.cmd.Process.Pid, "status", fmt.Sprint(err), "after", delay)
	time.AfterFunc(delay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.running[vn] != p {
			return
		}
		next, err := l.start(logger, vn, quickExits)
		if err != nil {
			// The next Ensure (the peering round) tries again.
			logger.Error(err, "Cannot start the virtual kubelet again", "virtualNode", vn)
			return
		}
		l.running[vn] = next
	})
}

// Restart implements VirtualKubeletLauncher: the old process has exited
// when the new one starts.
func (l *ProcessLauncher) Restart(ctx context.Context, vn types.NamespacedName) error {
	if err := l.Remove(ctx, vn); err != nil {
		return err
	}
	return l.Ensure(ctx, vn)
}

// StopAll stops every virtual kubelet process, for shutdown.
func (l *ProcessLauncher) StopAll(ctx context.Context) {
	l.mu.Lock()
	names := make([]types.NamespacedName, 0, len(l.running))
	for vn := range l.running {
		names = append(names, vn)
	}
	l.mu.Unlock()
	for _, vn := range names {
		_ = l.Remove(ctx, vn)
	}
}

// PID is the process ID of the virtual kubelet serving vn, 0 when none runs.
func (l *ProcessLauncher) PID(vn types.NamespacedName) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.running[vn]
	if !ok {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Remove implements VirtualKubeletLauncher.
func (l *ProcessLauncher) Remove(_ context.Context, vn types.NamespacedName) error {
	l.mu.Lock()
	p, ok := l.running[vn]
	delete(l.running, vn)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}
