package demo

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestDaemonPIDOnlyRecognizesDemoDaemons(t *testing.T) {
	dir := t.TempDir()
	if _, ok := daemonPID(dir); ok {
		t.Fatal("no PID file: reported a running daemon")
	}
	// A live process that is not a demo daemon (this test) is not ours.
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := daemonPID(dir); ok {
		t.Error("the test process was taken for a demo daemon: down would signal it")
	}
	for _, garbage := range []string{"", "abc", "-1", "0", "999999999"} {
		if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok := daemonPID(dir); ok {
			t.Errorf("PID file %q: reported a running daemon", garbage)
		}
	}
	clearState(dir)
	if _, err := os.Stat(filepath.Join(dir, pidFile)); !os.IsNotExist(err) {
		t.Errorf("clearState left the PID file: %v", err)
	}
}
