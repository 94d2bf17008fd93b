package binaries

import (
	"os"
	"path/filepath"
	"slices"
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

// Every program is built from a tool dependency of the go.mod that pins it,
// CoreDNS from the nested module at CoreDNSVersion: `go mod tidy` keeps
// the go.sum lines of tools, and a version bump moves what is built.
func TestProgramsAreToolsOfTheirModule(t *testing.T) {
	mods := map[string]*modfile.File{}
	for _, p := range programs {
		mod, ok := mods[p.module]
		if !ok {
			data, err := os.ReadFile(filepath.Join("..", "..", "..", p.module, "go.mod"))
			if err != nil {
				t.Fatal(err)
			}
			if mod, err = modfile.Parse(p.module+"/go.mod", data, nil); err != nil {
				t.Fatal(err)
			}
			mods[p.module] = mod
		}
		found := false
		for _, tool := range mod.Tool {
			found = found || tool.Path == p.pkg
		}
		if !found {
			t.Errorf("%s: %s is not a tool of %s/go.mod", p.name, p.pkg, p.module)
		}
	}
	coredns := mods[coreDNSModule]
	if coredns == nil {
		t.Fatalf("no program is built from %s", coreDNSModule)
	}
	got := ""
	for _, r := range coredns.Require {
		if r.Mod.Path == "github.com/coredns/coredns" {
			got = r.Mod.Version
		}
	}
	if got != CoreDNSVersion {
		t.Errorf("%s/go.mod requires github.com/coredns/coredns %q, binaries.go says %q", coreDNSModule, got, CoreDNSVersion)
	}
}

func TestSetsSplitTheProgramsInTwo(t *testing.T) {
	cp, node := NamesOf(ControlPlane), NamesOf(Node)
	if got, want := strings.Join(append(cp, node...), ","), strings.Join(Names(), ","); got != want {
		t.Errorf("control plane + node = %s, want every program %s", got, want)
	}
	if got, want := strings.Join(node, ","), strings.Join([]string{Kubelet, KubeProxy, Agnhost, CoreDNS, KubeNetworkPolicies}, ","); got != want {
		t.Errorf("node set = %s, want %s", got, want)
	}
	for _, name := range cp {
		if slices.Contains(node, name) {
			t.Errorf("%s is in both sets", name)
		}
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

// The control plane alone can be ensured without building the node programs,
// and Ensure builds those too.
func TestEnsureSetLeavesOtherSetsAlone(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	for _, name := range NamesOf(ControlPlane) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	noModule := filepath.Join(dir, "no-module")
	var out strings.Builder
	if err := EnsureSet(t.Context(), noModule, ControlPlane, &out); err != nil {
		t.Fatalf("EnsureSet(ControlPlane) with the control plane present: %v", err)
	}
	if !strings.Contains(out.String(), "binaries present") {
		t.Fatalf("EnsureSet printed %q, want it to say the binaries are present", out.String())
	}
	out.Reset()
	err := Ensure(t.Context(), noModule, &out)
	if err == nil || !strings.Contains(err.Error(), Kubelet) {
		t.Fatalf("Ensure without the node programs: %v, want a failed build of %s", err, Kubelet)
	}
	if !strings.Contains(out.String(), "building 5 binaries") {
		t.Errorf("Ensure printed %q, want it to build the 5 node programs", out.String())
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

// A program of the nested module is built there, not in ferry's module.
func TestNestedModuleProgramIsBuiltInItsModule(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	err = build(t.Context(), root, t.TempDir(), program{name: "coredns-nothing", pkg: "github.com/coredns/coredns/nothing", module: coreDNSModule, static: true})
	if err == nil {
		t.Fatal("building a package that does not exist succeeded")
	}
	if want := filepath.Join(root, coreDNSModule); !strings.Contains(err.Error(), "(in "+want+")") {
		t.Errorf("build error %q does not say it ran in %s", err, want)
	}
}
