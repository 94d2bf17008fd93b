package offload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCountAuditWrites(t *testing.T) {
	log := `{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"update","userAgent":"ferry-controller-manager/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"leases","namespace":"ferry-system","name":"ferry","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"stageTimestamp":"2026-11-27T05:10:01.000000Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","userAgent":"ferry-virtual-kubelet/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"pods","subresource":"status","namespace":"a","name":"p"},"stageTimestamp":"2026-11-27T05:10:02.000000Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"update","userAgent":"kwok/v0.8.0","objectRef":{"resource":"leases","apiGroup":"coordination.k8s.io"},"stageTimestamp":"2026-11-27T05:10:03.000000Z"}

{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"create","userAgent":"ferry-virtual-kubelet/v0.0.0","objectRef":{"resource":"events"},"stageTimestamp":"2026-11-27T05:09:59.000000Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"get","userAgent":"ferry-virtual-kubelet/v0.0.0","objectRef":{"resource":"pods"},"stageTimestamp":"2026-11-27T05:10:04.000000Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"create","userAgent":"","stageTimestamp":"2026-11-27T05:10:05.000000Z"}
`
	from := time.Date(2026, 11, 27, 5, 10, 0, 0, time.UTC)
	w, err := countAuditWrites(strings.NewReader(log), from, from.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ferry, heartbeats, others := w.split()
	if ferry != 1 || heartbeats != 1 || others != 2 {
		t.Errorf("ferry %d, ferry heartbeats %d, others %d; want 1, 1, 2 (%s)", ferry, heartbeats, others, w)
	}
	if n := w["ferry-virtual-kubelet"]["patch pods/status"]; n != 1 {
		t.Errorf("ferry-virtual-kubelet patch pods/status: %d, want 1 (%s)", n, w)
	}
	if n := w["(none)"]["create"]; n != 1 {
		t.Errorf("write with no agent nor object: %d, want 1 (%s)", n, w)
	}
	if _, err := countAuditWrites(strings.NewReader("{not json\n"), from, from); err == nil {
		t.Error("malformed line: no error")
	}

	// From an offset: the lines before it are not read.
	path := filepath.Join(t.TempDir(), "audit.log")
	first := strings.SplitAfter(log, "\n")[0]
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err = readAuditWrites(path, int64(len(first)), from, from.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, heartbeats, _ := w.split(); heartbeats != 0 {
		t.Errorf("read from after the lease line, yet %d heartbeats (%s)", heartbeats, w)
	}
	total := writesByAgent{}
	w.addTo(total)
	w.addTo(total)
	if n := total["kwok"]["update leases.coordination.k8s.io"]; n != 2 {
		t.Errorf("added twice: kwok lease updates %d, want 2", n)
	}
}
