package realnodes

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/test/testbed"
)

// schedOf sums, over every thread of every process of the real nodes of
// clusters whose name is comm (route agents apart), the time on a CPU and
// the time waiting on a run queue for one (/proc/<pid>/task/*/schedstat),
// by cluster: a thread that waits longer than it runs is starved by the
// machine's load rather than bound by its own work.
func schedOf(comm string, clusters ...*testbed.Cluster) map[string][2]time.Duration {
	out := map[string][2]time.Duration{}
	for _, c := range clusters {
		for _, n := range c.RealNodes {
			for _, pid := range n.PIDs() {
				p, err := procfs.NewProc(pid)
				if err != nil {
					continue
				}
				if st, err := p.Stat(); err != nil || st.Comm != comm {
					continue
				}
				if args, err := p.CmdLine(); err != nil || slices.Contains(args, "route-agent") {
					continue
				}
				tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
				for _, t := range tasks {
					data, err := os.ReadFile(t)
					if err != nil {
						continue
					}
					f := strings.Fields(string(data))
					if len(f) < 2 {
						continue
					}
					run, _ := strconv.ParseInt(f[0], 10, 64)
					wait, _ := strconv.ParseInt(f[1], 10, 64)
					v := out[c.Name]
					v[0] += time.Duration(run)
					v[1] += time.Duration(wait)
					out[c.Name] = v
				}
			}
		}
	}
	return out
}

// schedDelta formats what schedOf counted between two samples.
func schedDelta(before, after map[string][2]time.Duration) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		run, wait := after[k][0]-before[k][0], after[k][1]-before[k][1]
		parts = append(parts, fmt.Sprintf("%s ran %.2f s, waited %.2f s for a CPU", k, run.Seconds(), wait.Seconds()))
	}
	return strings.Join(parts, "; ")
}

// cpuByProcess is the CPU time (user and system, seconds) of every process
// of the real nodes of clusters, summed by cluster and program
// ("real-provider/ferry-gateway"); ferry-gateway's route agent is counted
// apart as "ferry-gateway route-agent".
func cpuByProcess(clusters ...*testbed.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, c := range clusters {
		for _, n := range c.RealNodes {
			for _, pid := range n.PIDs() {
				p, err := procfs.NewProc(pid)
				if err != nil {
					continue
				}
				st, err := p.Stat()
				if err != nil {
					continue
				}
				name := st.Comm
				if args, err := p.CmdLine(); err == nil && slices.Contains(args, "route-agent") {
					name += " route-agent"
				}
				out[c.Name+"/"+name] += st.CPUTime()
			}
		}
	}
	return out
}

// cpuDelta formats the processes that used the most CPU between two
// cpuByProcess samples, at most top of them, as cores over seconds.
func cpuDelta(before, after map[string]float64, seconds float64, top int) string {
	d := map[string]float64{}
	for k, v := range after {
		if dv := v - before[k]; dv > 0 {
			d[k] = dv
		}
	}
	keys := slices.SortedFunc(maps.Keys(d), func(a, b string) int { return cmp.Or(cmp.Compare(d[b], d[a]), strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys[:min(top, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, d[k]/seconds))
	}
	return strings.Join(parts, ", ")
}

// tunnelRTT is the round trip through the tunnel the consumer's gateway
// last measured to the provider's gateway pod, or why there is none.
func tunnelRTT(ctx context.Context, consumer *testbed.Cluster, provider ferryv1alpha1.ClusterID) string {
	var nc ferryv1alpha1.NetworkConfig
	if err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: charts.Namespace, Name: string(provider)}, &nc); err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	if nc.Status.Tunnel == nil || nc.Status.Tunnel.RoundTripTime == nil {
		return "not measured by the gateway"
	}
	return nc.Status.Tunnel.RoundTripTime.Duration.String()
}
