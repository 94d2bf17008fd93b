package offload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cm.log")
	log := strings.Repeat("a line of the log\n", 100) + "E leader election lost\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := logTail(path, 40); got != "E leader election lost" {
		t.Errorf("last 40 bytes from a line's start: %q", got)
	}
	got := logTail(path, 100)
	lines := strings.Split(got, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "E leader election lost" {
		t.Errorf("last 100 bytes: %q", got)
	}
	for _, l := range lines[:len(lines)-1] {
		if l != "a line of the log" {
			t.Errorf("last 100 bytes: line %q is not whole", l)
		}
	}
	if got := logTail(path, 1<<20); got != strings.TrimRight(log, "\n") {
		t.Errorf("whole file: %d bytes, want %d", len(got), len(log)-1)
	}
	if got := logTail(filepath.Join(t.TempDir(), "none"), 10); !strings.Contains(got, "no such file") {
		t.Errorf("missing file: %q", got)
	}
}
