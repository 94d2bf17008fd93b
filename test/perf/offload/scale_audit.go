package offload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-io/ferry/test/perf/stats"
)

// auditPolicy logs every write (no get, list or watch), metadata only, once
// it is answered: who wrote what during the at-rest window.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  verbs: ["get", "list", "watch"]
- level: Metadata
`

// auditArgs writes the audit policy into dir and returns kube-apiserver's
// flags that log the writes of cluster name to dir/name-audit.log (batched,
// so that the API server does not wait on the file), and that path.
func auditArgs(dir, name string) (args []string, logPath string, err error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", fmt.Errorf("write audit policy: %w", err)
	}
	logPath = filepath.Join(dir, name+"-audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath, "--audit-log-mode=batch",
		"--audit-log-batch-max-wait=1s", "--audit-log-maxsize=1000000"}, logPath, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the window reads.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// writesByAgent are writes counted by the writing program (the user agent's
// first part, e.g. ferry-virtual-kubelet) and kind ("update leases.coordination.k8s.io").
type writesByAgent map[string]map[string]int64

// readAuditWrites reads the audit log at path from byte offset and counts
// the writes answered within [from, to].
func readAuditWrites(path string, offset int64, from, to time.Time) (writesByAgent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek audit log %s: %w", path, err)
	}
	return countAuditWrites(f, from, to)
}

// countAuditWrites counts the audit events (JSON lines) answered within
// [from, to], by agent and kind.
func countAuditWrites(r io.Reader, from, to time.Time) (writesByAgent, error) {
	out := writesByAgent{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit event %.200s: %w", line, err)
		}
		if e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		switch e.Verb {
		case "get", "list", "watch":
			continue
		}
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		if agent == "" {
			agent = "(none)"
		}
		kind := e.Verb
		if ref := e.ObjectRef; ref != nil {
			kind += " " + ref.Resource
			if ref.APIGroup != "" {
				kind += "." + ref.APIGroup
			}
			if ref.Subresource != "" {
				kind += "/" + ref.Subresource
			}
		}
		if out[agent] == nil {
			out[agent] = map[string]int64{}
		}
		out[agent][kind]++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

// isFerryAgent tells ferry's programs from the rest (kwok, Kubernetes'
// controllers, the benchmark).
func isFerryAgent(agent string) bool { return strings.HasPrefix(agent, "ferry-") }

// isHeartbeat tells the writes that go on by design at rest: leases
// (leader election, the virtual node's heartbeat).
func isHeartbeat(kind string) bool { return strings.HasSuffix(kind, " leases.coordination.k8s.io") }

// addTo counts w's writes into into.
func (w writesByAgent) addTo(into writesByAgent) {
	for agent, kinds := range w {
		if into[agent] == nil {
			into[agent] = map[string]int64{}
		}
		for k, n := range kinds {
			into[agent][k] += n
		}
	}
}

// split counts ferry's writes other than heartbeats, ferry's heartbeats,
// and the other programs' writes.
func (w writesByAgent) split() (ferry, ferryHeartbeats, others int64) {
	for agent, kinds := range w {
		for kind, n := range kinds {
			switch {
			case !isFerryAgent(agent):
				others += n
			case isHeartbeat(kind):
				ferryHeartbeats += n
			default:
				ferry += n
			}
		}
	}
	return ferry, ferryHeartbeats, others
}

// String lists each agent's writes, most first.
func (w writesByAgent) String() string {
	var parts []string
	for _, agent := range stats.KeysByValue(w.totals()) {
		kinds := w[agent]
		var ks []string
		for _, k := range stats.KeysByValue(kinds) {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
		parts = append(parts, fmt.Sprintf("%s: %s", agent, strings.Join(ks, ", ")))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func (w writesByAgent) totals() map[string]int64 {
	out := map[string]int64{}
	for agent, kinds := range w {
		out[agent] = stats.Total(kinds)
	}
	return out
}
