package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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
			reapStaleNodeCgroups(e.Name())
			_ = os.RemoveAll(dir)
		}
	})
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// reapStaleNodeCgroups ends what real nodes of a dead test process left:
// containerd's shims and the containers outlive the parent-death signal
// (they are not its children), in the nodes' cgroups, named after the
// cluster's folder.
func reapStaleNodeCgroups(clusterDir string) {
	v1, v2, err := cgroupMounts()
	if err != nil {
		return
	}
	names := map[string]bool{}
	for _, h := range append(v1, v2...) {
		matches, _ := filepath.Glob(filepath.Join(h, clusterDir+"-*"))
		for _, m := range matches {
			names[filepath.Base(m)] = true
		}
	}
	for name := range names {
		cg := &nodeCgroup{name: name}
		for _, h := range v1 {
			cg.dirs = append(cg.dirs, filepath.Join(h, name))
		}
		for _, h := range v2 {
			cg.more = append(cg.more, filepath.Join(h, name))
		}
		_ = cg.killAll(10 * time.Second)
		_ = cg.remove()
	}
}
