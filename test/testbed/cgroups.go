package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupV1Hierarchies returns the mount points of the cgroup v1
// hierarchies (one per controller set, and named ones such as
// name=systemd). Real nodes need cgroup v1 here: this kind of machine has
// it, and the kubelet runs on it with failCgroupV1: false.
func cgroupV1Hierarchies() ([]string, error) {
	v1, _, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	if len(v1) == 0 {
		return nil, errors.New("real nodes need cgroup v1 hierarchies (this machine has none mounted); cgroup v2 is not supported by the test bed yet")
	}
	return v1, nil
}

// cgroupMounts returns the mount points of the cgroup v1 hierarchies and
// of cgroup v2 (on a v1 machine, the "unified" hierarchy beside them, where
// runc makes the containers' cgroups too).
func cgroupMounts() (v1, v2 []string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// ... mountpoint(4) ... "-" fstype source options
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		switch fields[sep+1] {
		case "cgroup":
			v1 = append(v1, fields[4])
		case "cgroup2":
			v2 = append(v2, fields[4])
		}
	}
	if err := s.Err(); err != nil {
		return nil, nil, fmt.Errorf("read mounts: %w", err)
	}
	return v1, v2, nil
}

// nodeCgroup is a real node's cgroup tree, the same path in every v1
// hierarchy: its kubelet's cgroupRoot, and, under "runtime", the node's own
// programs (containerd and its shims, the kubelet, kube-proxy), so that
// everything the node started can be found and ended by its cgroup.
type nodeCgroup struct {
	name string   // "/<name>" is the kubelet's cgroupRoot
	dirs []string // <hierarchy>/<name>, one per v1 hierarchy
	// more are the same path in the v2 hierarchy, which the node's
	// programs may fill but the test bed does not make.
	more []string
}

const runtimeCgroup = "runtime"

func newNodeCgroup(name string) (*nodeCgroup, error) {
	hs, err := cgroupV1Hierarchies()
	if err != nil {
		return nil, err
	}
	_, v2, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	cg := &nodeCgroup{name: name}
	for _, h := range v2 {
		cg.more = append(cg.more, filepath.Join(h, name))
	}
	for _, h := range hs {
		for _, sub := range []string{"", runtimeCgroup} {
			dir := filepath.Join(h, name, sub)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return cg, fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if sub == "" {
				cg.dirs = append(cg.dirs, dir)
			}
			// A cpuset cgroup takes no task until it has CPUs and memory
			// nodes: give it its parent's.
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if err := os.WriteFile(filepath.Join(dir, file), parent, 0o644); err != nil {
					return cg, fmt.Errorf("set %s of %s: %w", file, dir, err)
				}
			}
		}
	}
	return cg, nil
}

// CgroupRoot is the kubelet's cgroupRoot.
func (cg *nodeCgroup) CgroupRoot() string { return "/" + cg.name }

// enter moves pid into the node's runtime cgroup of every hierarchy; its
// children are born there.
func (cg *nodeCgroup) enter(pid int) error {
	for _, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, runtimeCgroup, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move process %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// pids lists every process in the node's tree (containers, shims and the
// node's programs), read from the first hierarchy holding any.
func (cg *nodeCgroup) pids() []int {
	seen := map[int]bool{}
	for _, d := range append(cg.dirs, cg.more...) {
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for f := range strings.FieldsSeq(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// killAll SIGKILLs every process in the tree until none is left: all of
// them were started by the node (its programs, their shims and the
// containers the kubelet ran).
func (cg *nodeCgroup) killAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := cg.pids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of node cgroup %s outlived SIGKILL for %s", pids, cg.name, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remove deletes the tree, deepest cgroups first (a cgroup is removed with
// rmdir once it holds no process and no child).
func (cg *nodeCgroup) remove() error {
	var errs []error
	for _, d := range append(cg.dirs, cg.more...) {
		var dirs []string
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, dir := range dirs {
			var err error
			for range 20 { // a cgroup lingers briefly after its last task exits
				if err = syscall.Rmdir(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}
