package binaries

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The constants name the cache folder and the versions the tests report; the
// binaries themselves are built from go.mod's pins. If the two drift, a
// cache folder would be labelled with versions it does not hold.
func TestVersionsMatchGoMod(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	required := map[string]string{}
	for _, r := range mod.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	for path, want := range map[string]string{
		"k8s.io/kubernetes":         KubernetesVersion,
		"go.etcd.io/etcd/server/v3": EtcdVersion,
		"sigs.k8s.io/kwok":          KwokVersion,
	} {
		if got := required[path]; got != want {
			t.Errorf("go.mod requires %s %q, binaries.go says %q", path, got, want)
		}
	}
	// Every staging module must be replaced with the matching v0 version.
	stagingWant := "v0" + strings.TrimPrefix(KubernetesVersion, "v1")
	staging := 0
	for _, r := range mod.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") {
			staging++
			if r.New.Version != stagingWant {
				t.Errorf("replace %s => %s %s, want %s", r.Old.Path, r.New.Path, r.New.Version, stagingWant)
			}
		}
	}
	if staging < 30 {
		t.Errorf("go.mod replaces %d k8s.io staging modules, want the whole block of k8s.io/kubernetes %s", staging, KubernetesVersion)
	}
}

func TestDirHonoursOverrideAndIsVersioned(t *testing.T) {
	t.Setenv(EnvDir, "/tmp/ferry-bins")
	if d, err := Dir(); err != nil || d != "/tmp/ferry-bins" {
		t.Fatalf("Dir() with %s set = %q, %v", EnvDir, d, err)
	}
	t.Setenv(EnvDir, "")
	t.Setenv("XDG_CACHE_HOME", "/var/cache/x")
	d, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{KubernetesVersion, EtcdVersion, KwokVersion} {
		if !strings.Contains(d, v) {
			t.Errorf("Dir() = %q does not name version %s", d, v)
		}
	}
	if !strings.HasPrefix(d, "/var/cache/x/ferry/testbed/") {
		t.Errorf("Dir() = %q, want it under $XDG_CACHE_HOME/ferry/testbed", d)
	}
}

func TestPathOfMissingBinaryTellsHowToBuildIt(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	_, err := Path(KubeAPIServer)
	if err == nil || !strings.Contains(err.Error(), "make testbed") || !strings.Contains(err.Error(), KubeAPIServer) {
		t.Fatalf("Path of a missing binary: %v, want an error naming it and `make testbed`", err)
	}
}

func TestMajorMinor(t *testing.T) {
	if major("v1.36.4") != "1" || minor("v1.36.4") != "36" {
		t.Fatalf("major/minor of v1.36.4 = %s/%s", major("v1.36.4"), minor("v1.36.4"))
	}
}

func TestEnsureIsANoOpWhenEveryBinaryIsPresent(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	for _, name := range Names() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	// A module root that does not exist: any build attempt would fail.
	if err := Ensure(t.Context(), filepath.Join(dir, "no-module"), &out); err != nil {
		t.Fatalf("Ensure with every binary present: %v", err)
	}
	if !strings.Contains(out.String(), "binaries present") {
		t.Fatalf("Ensure printed %q, want it to say the binaries are present", out.String())
	}
}

func TestFailedBuildNamesTheProgramAndKeepsNoPartialBinary(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	err = build(t.Context(), root, dir, program{name: "kube-nothing", pkg: "k8s.io/kubernetes/cmd/kube-nothing"})
	if err == nil {
		t.Fatal("building a package that does not exist succeeded")
	}
	for _, want := range []string{"kube-nothing", "k8s.io/kubernetes/cmd/kube-nothing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("build error %q does not name %q", err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a failed build left %v behind", entries)
	}
}
