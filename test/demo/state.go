package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ferry-io/ferry/test/crashloop"
)

// Files of the state folder.
const (
	pidFile    = "daemon.pid"
	readyFile  = "ready.json"
	errorFile  = "error.txt"
	daemonLog  = "daemon.log"
	logsFolder = "logs"
	statusFile = "components.json"
	// lockFile is held by `up` for its whole run: two `up` in one folder
	// do not both start a daemon.
	lockFile = "up.lock"
)

// Ready is what the daemon writes once the clusters and components run.
type Ready struct {
	PID                int    `json:"pid"`
	ConsumerKubeconfig string `json:"consumerKubeconfig"`
	ProviderKubeconfig string `json:"providerKubeconfig"`
	ConsumerDir        string `json:"consumerDir"`
	ProviderDir        string `json:"providerDir"`
	Kubectl            string `json:"kubectl"`
	// ConsumerRealNode is the consumer's real node.
	ConsumerRealNode string `json:"consumerRealNode"`
	// Providers are every provider, the first (ProviderKubeconfig) too.
	Providers []ProviderReady `json:"providers"`
}

// ProviderReady is how to reach one provider cluster.
type ProviderReady struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	// RealNode is the provider's real node.
	RealNode string `json:"realNode"`
}

// daemonStatus is what the daemon records of its components, for
// `ferry-demo status`.
type daemonStatus struct {
	PID        int               `json:"pid"`
	Components []componentStatus `json:"components"`
}

// componentStatus is one component's state.
type componentStatus struct {
	Name string `json:"name"`
	Log  string `json:"log"`
	crashloop.State
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readReady(dir string) (*Ready, error) {
	data, err := os.ReadFile(filepath.Join(dir, readyFile))
	if err != nil {
		return nil, err
	}
	var r Ready
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, readyFile), err)
	}
	return &r, nil
}

// daemonPID is the PID of the demo daemon recorded in dir, when that
// process still runs and is a demo daemon (a recycled PID is not ours).
func daemonPID(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 2 || args[1] != daemonCommand {
		return 0, false
	}
	return pid, true
}

// clearState removes what a previous demo left in dir, its logs aside.
func clearState(dir string) {
	for _, f := range []string{pidFile, readyFile, errorFile, statusFile} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	// Only the names the demo writes: --dir may be a folder of the user's.
	for _, cluster := range (&Config{Providers: MaxProviders}).clusterNames() {
		_ = os.Remove(filepath.Join(dir, cluster+".kubeconfig"))
	}
}

// errRunning is up's refusal to start a second demo in a folder.
type errRunning struct {
	dir string
	pid int
}

func (e errRunning) Error() string {
	down := "make demo-down"
	if abs, err := filepath.Abs(defaultDir); err != nil || abs != e.dir {
		down += fmt.Sprintf(" DEMO_FLAGS='--dir %s'", e.dir)
	}
	return fmt.Sprintf("a demo is already running in %s (daemon PID %d); stop it with `%s`, "+
		"or run another beside it in a folder of its own: make demo DEMO_FLAGS='--dir .demo-2'", e.dir, e.pid, down)
}

// lockForUp takes dir's up lock, or says who holds it: a demo starting
// there. The lock goes with the returned file's Close (or the process).
func lockForUp(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another ferry-demo up is starting a demo in %s; wait for it, or use another --dir", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// refuseIfRunning is up's check: a demo whose daemon runs in dir is left
// alone, and the error says how to stop it or run another beside it.
func refuseIfRunning(dir string) error {
	if pid, running := daemonPID(dir); running {
		return errRunning{dir: dir, pid: pid}
	}
	return nil
}
