package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// procFigures are one process's memory now, in bytes: resident, of it
// anonymous, and the peak resident since it started (VmHWM).
type procFigures struct{ rss, anon, peak int64 }

// readProc reads pid's memory from /proc.
func readProc(pid int) (procFigures, error) {
	if pid == 0 {
		return procFigures{}, fmt.Errorf("no such process: it is not running")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procFigures{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	var f procFigures
	for field, into := range map[string]*int64{"VmRSS": &f.rss, "RssAnon": &f.anon, "VmHWM": &f.peak} {
		if *into, err = procStatusBytes(string(status), field); err != nil {
			return procFigures{}, fmt.Errorf("process %d: %w", pid, err)
		}
	}
	return f, nil
}

// readProcs reads the memory of every named process; those gone (a
// controller manager that exited, and its virtual kubelets) are left out.
func readProcs(pids map[string]int) (map[string]procFigures, error) {
	out := map[string]procFigures{}
	for name, pid := range pids {
		f, err := readProc(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = f
	}
	return out, nil
}

// cpuWindow is the CPU time the named processes used over a wall-clock
// window.
type cpuWindow struct {
	pids   map[string]int
	before cpuSample
	begin  time.Time
}

func startCPUWindow(pids map[string]int) (*cpuWindow, error) {
	return &cpuWindow{pids: maps.Clone(pids), before: sampleLiveCPU(pids), begin: time.Now()}, nil
}

// sampleLiveCPU is sampleCPU of the processes still running.
func sampleLiveCPU(pids map[string]int) cpuSample {
	out := cpuSample{}
	for name, pid := range pids {
		if s, err := sampleCPU(nil, map[string]int{name: pid}); err == nil {
			out[name] = s[name]
		}
	}
	return out
}

// cores is each process's mean CPU use over the window, in cores; a
// process that ended within it is left out.
func (w *cpuWindow) cores() (map[string]float64, error) {
	after := sampleLiveCPU(w.pids)
	wall := time.Since(w.begin).Seconds()
	out := map[string]float64{}
	for name, used := range after.since(w.before) {
		if _, ok := w.pids[name]; ok {
			out[name] = used / wall
		}
	}
	return out, nil
}

// etcdFigures are what an etcd stores: keys (the API objects, one key
// each) and the bytes of its database in use (old revisions included until
// the API server compacts them, every 5 minutes).
type etcdFigures struct{ keys, bytesInUse float64 }

// readEtcd reads c's etcd's /metrics.
func readEtcd(ctx context.Context, c *testbed.Cluster) (etcdFigures, error) {
	url, err := etcdURL(c)
	if err != nil {
		return etcdFigures{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return etcdFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return etcdFigures{}, fmt.Errorf("read etcd metrics of %s: %w", c.Name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return etcdFigures{}, fmt.Errorf("read etcd metrics of %s: %w", c.Name, err)
	}
	f, err := parseEtcdFigures(string(raw))
	if err != nil {
		return etcdFigures{}, fmt.Errorf("etcd metrics of %s: %w", c.Name, err)
	}
	return f, nil
}

// parseEtcdFigures reads etcd_debugging_mvcc_keys_total and
// etcd_mvcc_db_total_size_in_use_in_bytes from etcd's /metrics.
func parseEtcdFigures(text string) (etcdFigures, error) {
	var f etcdFigures
	found := 0
	for line := range strings.SplitSeq(text, "\n") {
		name, value, ok := strings.Cut(line, " ")
		var into *float64
		switch name {
		case "etcd_debugging_mvcc_keys_total":
			into = &f.keys
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			into = &f.bytesInUse
		}
		if !ok || into == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return f, fmt.Errorf("%s: %w", line, err)
		}
		*into = v
		found++
	}
	if found != 2 {
		return f, fmt.Errorf("want etcd_debugging_mvcc_keys_total and etcd_mvcc_db_total_size_in_use_in_bytes, found %d of them", found)
	}
	return f, nil
}

// etcdURL is where c's etcd serves clients, from its command line.
func etcdURL(c *testbed.Cluster) (string, error) {
	pid := c.PIDs()[binaries.Etcd]
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", fmt.Errorf("etcd of %s: %w", c.Name, err)
	}
	for arg := range strings.SplitSeq(string(raw), "\x00") {
		if urls, ok := strings.CutPrefix(arg, "--listen-client-urls="); ok {
			first, _, _ := strings.Cut(urls, ",")
			return first, nil
		}
	}
	return "", fmt.Errorf("etcd of %s (pid %d): no --listen-client-urls", c.Name, pid)
}

// storageObjects is apiserver_storage_objects of c's API server, by
// resource (it is refreshed about once a minute).
func storageObjects(ctx context.Context, c *testbed.Cluster) (map[string]float64, error) {
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read /metrics of %s: %w", c.Name, err)
	}
	return parseStorageObjects(string(raw))
}

// parseStorageObjects reads apiserver_storage_objects by resource.
func parseStorageObjects(text string) (map[string]float64, error) {
	out := map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_storage_objects{")
		if !ok {
			continue
		}
		labels, value, err := parseLabels(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			return nil, fmt.Errorf("%s: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		out[labels["resource"]] += v
	}
	return out, nil
}

// objectsAdded renders the resources whose object count changed by at
// least one per 20 pods, most first (apiserver_storage_objects lags by up to
// a minute: the clusters' own setup shows as a few dozen objects).
func objectsAdded(before, after map[string]float64, pods int) string {
	delta := map[string]float64{}
	for r, n := range after {
		if d := n - before[r]; math.Abs(d) >= float64(pods)/20 {
			delta[r] = d
		}
	}
	keys := slices.SortedFunc(maps.Keys(delta), func(a, b string) int {
		if delta[a] != delta[b] {
			if delta[a] > delta[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %+.0f (%.2f per pod)", k, delta[k], delta[k]/float64(pods)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
