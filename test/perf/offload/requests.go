package offload

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ferry-io/ferry/test/perf/stats"
	"github.com/ferry-io/ferry/test/testbed"
)

// requestCounts are API requests an API server served, by kind: verb and
// resource (resource.group/subresource, as kubectl spells them), with the
// response code when it is no success, e.g. "PUT pods/status 409".
type requestCounts map[string]int64

// scrapeRequests reads apiserver_request_total from c's /metrics.
func scrapeRequests(ctx context.Context, c *testbed.Cluster) (requestCounts, error) {
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read /metrics of %s: %w", c.Name, err)
	}
	counts, err := parseRequestCounts(string(raw))
	if err != nil {
		return nil, fmt.Errorf("/metrics of %s: %w", c.Name, err)
	}
	return counts, nil
}

const requestMetric = "apiserver_request_total"

// parseRequestCounts sums the apiserver_request_total series of a
// Prometheus text exposition by kind.
func parseRequestCounts(text string) (requestCounts, error) {
	counts := requestCounts{}
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, requestMetric+"{")
		if !ok {
			continue
		}
		labels, rest, err := parseLabels(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		fields := strings.Fields(rest) // value, then an optional timestamp
		if len(fields) == 0 {
			return nil, fmt.Errorf("%s: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value: %w", line, err)
		}
		counts[requestKind(labels)] += int64(v)
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("no %s series", requestMetric)
	}
	return counts, nil
}

// parseLabels reads `name="value",...}` and returns the labels and what
// follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return labels, rest, nil
		}
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return nil, "", fmt.Errorf("malformed labels at %q", s)
		}
		var value strings.Builder
		closed := false
		for i := 0; i < len(rest) && !closed; i++ {
			switch c := rest[i]; {
			case c == '\\' && i+1 < len(rest):
				i++
				if rest[i] == 'n' {
					value.WriteByte('\n')
				} else {
					value.WriteByte(rest[i])
				}
			case c == '"':
				closed, s = true, rest[i+1:]
			default:
				value.WriteByte(c)
			}
		}
		if !closed {
			return nil, "", fmt.Errorf("unterminated value of label %s", name)
		}
		labels[name] = value.String()
	}
}

func requestKind(labels map[string]string) string {
	resource := labels["resource"]
	if resource == "" {
		resource = "(non-resource)"
	}
	if g := labels["group"]; g != "" {
		resource += "." + g
	}
	if sub := labels["subresource"]; sub != "" {
		resource += "/" + sub
	}
	kind := labels["verb"] + " " + resource
	if code := labels["code"]; code != "" && !strings.HasPrefix(code, "2") {
		kind += " " + code
	}
	return kind
}

// minus is what was served since before.
func (after requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for kind, n := range after {
		if d := n - before[kind]; d != 0 {
			out[kind] = d
		}
	}
	return out
}

func (c requestCounts) total() int64 { return stats.Total(c) }

// top lists the n most frequent kinds, most frequent first.
func (c requestCounts) top(n int) string {
	kinds := stats.KeysByValue(c)
	if len(kinds) > n {
		kinds = kinds[:n]
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	return strings.Join(parts, ", ")
}
