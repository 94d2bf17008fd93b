package webhook

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux ABI Go supports).
const clockTicks = 100

// cpuTime is the CPU time (user + system) process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(raw))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces, so
// fields are counted after its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state): utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat %q: %d fields after the command name, want at least 13", stat, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: CPU time %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuMeter adds up the CPU time of named processes between marks.
type cpuMeter struct {
	pids map[string]int
	last map[string]time.Duration
}

func newCPUMeter(pids map[string]int) (*cpuMeter, error) {
	m := &cpuMeter{pids: pids, last: map[string]time.Duration{}}
	_, err := m.lap()
	return m, err
}

// lap returns, per process, the CPU time used since the previous lap.
func (m *cpuMeter) lap() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for name, pid := range m.pids {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s: %w", name, err)
		}
		out[name] = t - m.last[name]
		m.last[name] = t
	}
	return out, nil
}
