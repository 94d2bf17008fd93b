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

func TestClearStateRemovesOnlyWhatTheDemoWrote(t *testing.T) {
	dir := t.TempDir()
	ours := []string{pidFile, readyFile, statusFile, "consumer.kubeconfig", "provider.kubeconfig", "provider-3.kubeconfig"}
	theirs := []string{"mine.kubeconfig", "notes.txt", filepath.Join(logsFolder, "consumer-webhook.log")}
	if err := os.MkdirAll(filepath.Join(dir, logsFolder), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(ours, theirs...) {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clearState(dir)
	for _, f := range ours {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", f, err)
		}
	}
	for _, f := range theirs {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
}
