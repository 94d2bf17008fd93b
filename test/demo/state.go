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
)

// Files of the state folder.
const (
	pidFile    = "daemon.pid"
	readyFile  = "ready.json"
	errorFile  = "error.txt"
	daemonLog  = "daemon.log"
	logsFolder = "logs"
)

// Ready is what the daemon writes once the clusters and components run.
type Ready struct {
	PID                int    `json:"pid"`
	ConsumerKubeconfig string `json:"consumerKubeconfig"`
	ProviderKubeconfig string `json:"providerKubeconfig"`
	ConsumerDir        string `json:"consumerDir"`
	ProviderDir        string `json:"providerDir"`
	Kubectl            string `json:"kubectl"`
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
	for _, f := range []string{pidFile, readyFile, errorFile, fabricFile, "consumer.kubeconfig", "provider.kubeconfig"} {
		_ = os.Remove(filepath.Join(dir, f))
	}
}
