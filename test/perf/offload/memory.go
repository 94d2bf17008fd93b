package offload

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// memorySamplePeriod is how often the virtual kubelet's memory is sampled.
const memorySamplePeriod = 250 * time.Millisecond

// memorySampler follows a process's resident memory until stopped.
type memorySampler struct {
	pid     int
	stopped chan struct{}
	done    chan struct{}
	maxRSS  int64 // largest VmRSS sampled
	err     error // first failed sample
}

// sampleMemory samples the resident memory (VmRSS) of process pid every
// period until stop.
func sampleMemory(pid int, period time.Duration) (*memorySampler, error) {
	if pid == 0 {
		return nil, errors.New("no such process: it is not running")
	}
	m := &memorySampler{pid: pid, stopped: make(chan struct{}), done: make(chan struct{})}
	if _, err := m.read("VmRSS"); err != nil {
		return nil, err
	}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			rss, err := m.read("VmRSS")
			if err != nil {
				m.err = err
				return
			}
			m.maxRSS = max(m.maxRSS, rss)
			select {
			case <-m.stopped:
				return
			case <-tick.C:
			}
		}
	}()
	return m, nil
}

// stop ends the sampling and returns the process's peak resident memory
// (VmHWM, which also covers the moments between samples) and the last one,
// in bytes.
func (m *memorySampler) stop() (peak, last int64, err error) {
	close(m.stopped)
	<-m.done
	if m.err != nil {
		return 0, 0, m.err
	}
	if peak, err = m.read("VmHWM"); err != nil {
		return 0, 0, err
	}
	if last, err = m.read("VmRSS"); err != nil {
		return 0, 0, err
	}
	return max(peak, m.maxRSS, last), last, nil
}

// split is the process's resident memory now, anonymous (heap, stacks) and
// file-backed (the pages of its binary and libraries it touched).
func (m *memorySampler) split() (anon, file int64, err error) {
	if anon, err = m.read("RssAnon"); err != nil {
		return 0, 0, err
	}
	if file, err = m.read("RssFile"); err != nil {
		return 0, 0, err
	}
	return anon, file, nil
}

func (m *memorySampler) read(field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", m.pid, err)
	}
	return procStatusBytes(string(status), field)
}

// procStatusBytes reads a memory field ("VmRSS:    51234 kB") of a
// /proc/<pid>/status text, in bytes.
func procStatusBytes(status, field string) (int64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
			return 0, fmt.Errorf("parse %s %q: %w", field, strings.TrimSpace(rest), err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}
