package offload

import (
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/ferry-io/ferry/test/perf/stats"
	"github.com/ferry-io/ferry/test/testbed"
)

// benchProcess names this process in CPU figures: the load generator and
// both clusters' ferry controller managers, which run in it.
const benchProcess = "bench (load + controller managers)"

// cpuSample is the CPU time (user + system, seconds) each process has used
// since it started, by name.
type cpuSample map[string]float64

// sampleCPU reads the CPU time of every process of the clusters, of the
// extra processes (the virtual kubelet) and of this one.
func sampleCPU(clusters []*testbed.Cluster, extra map[string]int) (cpuSample, error) {
	pids := map[string]int{benchProcess: os.Getpid()}
	for _, c := range clusters {
		for name, pid := range c.PIDs() {
			pids[c.Name+"/"+name] = pid
		}
	}
	maps.Copy(pids, extra)
	out := cpuSample{}
	for name, pid := range pids {
		p, err := procfs.NewProc(pid)
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s (pid %d): %w", name, pid, err)
		}
		st, err := p.Stat()
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s (pid %d): %w", name, pid, err)
		}
		out[name] = st.CPUTime()
	}
	return out, nil
}

// cpuUse is the CPU seconds each process used between two samples.
type cpuUse map[string]float64

// since is the use from before to s; processes missing from either
// sample (restarted, or started in between) are left out.
func (s cpuSample) since(before cpuSample) cpuUse {
	out := cpuUse{}
	for name, t := range s {
		if b, ok := before[name]; ok && t >= b {
			out[name] = t - b
		}
	}
	return out
}

// total is the CPU seconds of every process.
func (u cpuUse) total() float64 { return stats.Total(u) }

// perPod renders the use per pod in milliseconds, the busiest first.
func (u cpuUse) perPod(pods int) string {
	names := stats.KeysByValue(u)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, u[n]*1000/float64(pods)))
	}
	return strings.Join(parts, ", ")
}
