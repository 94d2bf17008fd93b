package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeExecutables(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodePackagesNamesWhatIsMissingAndTheTarget(t *testing.T) {
	cni, bin, sbin := t.TempDir(), t.TempDir(), t.TempDir()
	writeExecutables(t, cni, "bridge", "loopback", "ptp", "portmap")
	// host-local is there but not executable.
	if err := os.WriteFile(filepath.Join(cni, "host-local"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeExecutables(t, bin, "containerd", "ctr")
	writeExecutables(t, sbin, "runc", "iptables", "nft") // found outside PATH
	lookPath := func(name string) (string, error) {
		p := filepath.Join(bin, name)
		if executable(p) == nil {
			return p, nil
		}
		return "", exec.ErrNotFound
	}
	err := nodePackages(lookPath, []string{sbin}, cni)
	if err == nil {
		t.Fatal("nodePackages with conntrack missing and host-local not executable: no error")
	}
	missing, _, _ := strings.Cut(err.Error(), ": run")
	if want := "missing conntrack, " + filepath.Join(cni, "host-local"); !strings.HasSuffix(missing, want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
	if !strings.Contains(err.Error(), "make node-packages") {
		t.Errorf("error %q does not name make node-packages", err)
	}

	if err := os.Chmod(filepath.Join(cni, "host-local"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeExecutables(t, sbin, "conntrack")
	if err := nodePackages(lookPath, []string{sbin}, cni); err != nil {
		t.Fatalf("nodePackages with everything present: %v", err)
	}
	if p, err := lookCommand(lookPath, []string{sbin}, "runc"); err != nil || p != filepath.Join(sbin, "runc") {
		t.Errorf("lookCommand(runc) = %q, %v, want the one in %s", p, err, sbin)
	}
}
