package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	dirPrefix = "ferry-testbed-"
	ownerFile = "owner.pid"
)

var reapOnce sync.Once

// reapStaleClusterDirs removes the folders of clusters whose test process is
// gone (killed before it could clean up; the kernel already killed their
// programs through the parent-death signal). Folders of live processes, and
// anything not made by the test bed, are left alone.
func reapStaleClusterDirs() {
	if os.Getenv(EnvKeep) != "" {
		return // the developer wants to read old clusters' logs
	}
	reapOnce.Do(func() {
		entries, err := os.ReadDir(os.TempDir())
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
				continue
			}
			dir := filepath.Join(os.TempDir(), e.Name())
			data, err := os.ReadFile(filepath.Join(dir, ownerFile))
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil || pid <= 0 || processAlive(pid) {
				continue
			}
			_ = os.RemoveAll(dir)
		}
	})
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
