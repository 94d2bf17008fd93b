package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

// TestArchivesAreReproducibleAndKrewInstallsThem builds the test binary's
// archives twice (the same bytes), checks each archive holds the plugin
// binary alone, owned by root at the epoch, that the manifest names each
// archive's digest, and has krew (the pinned Go tool) install the plugin
// from the manifest and archive, offline, and run it.
func TestArchivesAreReproducibleAndKrewInstallsThem(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles")
	}
	platforms, err := parsePlatforms("linux/amd64, darwin/arm64")
	if err != nil {
		t.Fatal(err)
	}
	// From the module root, where make runs it.
	t.Chdir(filepath.Join("..", ".."))
	var outs [2]string
	for i := range outs {
		outs[i] = filepath.Join(t.TempDir(), "dist")
		opts := options{version: "v0.0.1", commit: "abc", out: outs[i], urlBase: "https://example.invalid/r/", platforms: platforms, pkg: "./hack/images/testdata/hello"}
		if err := run(t.Context(), opts, io.Discard); err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
	}
	for _, name := range []string{archiveName("v0.0.1", platforms[0]), archiveName("v0.0.1", platforms[1]), "SHA256SUMS", "ferry.yaml"} {
		a, errA := os.ReadFile(filepath.Join(outs[0], name))
		b, errB := os.ReadFile(filepath.Join(outs[1], name))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of the same source (%v, %v)", name, errA, errB)
		}
	}

	raw, err := os.ReadFile(filepath.Join(outs[0], "ferry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plugin index.Plugin
	if err := yaml.UnmarshalStrict(raw, &plugin); err != nil {
		t.Fatalf("ferry.yaml: %v", err)
	}
	if plugin.Name != "ferry" || plugin.Spec.Version != "v0.0.1" || len(plugin.Spec.Platforms) != 2 {
		t.Fatalf("manifest %+v", plugin)
	}
	for i, p := range plugin.Spec.Platforms {
		name := archiveName("v0.0.1", platforms[i])
		archive, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(archive)
		if p.Sha256 != hex.EncodeToString(sum[:]) || p.URI != "https://example.invalid/r/"+name || p.Bin != pluginBinary ||
			p.Selector.MatchLabels["os"] != platforms[i].os || p.Selector.MatchLabels["arch"] != platforms[i].arch {
			t.Errorf("platform %d of the manifest = %+v, want %s's digest and URL", i, p, name)
		}
		checkArchive(t, archive)
	}

	krew := filepath.Join(t.TempDir(), "krew")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", krew, "sigs.k8s.io/krew/cmd/krew").CombinedOutput(); err != nil {
		t.Fatalf("build krew: %v\n%s", err, out)
	}
	root := t.TempDir()
	cmd := exec.CommandContext(t.Context(), krew, "install", "--manifest="+filepath.Join(outs[0], "ferry.yaml"), "--archive="+filepath.Join(outs[0], archiveName("v0.0.1", platforms[0])))
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_OS=linux", "KREW_ARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(root, "bin", pluginBinary)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Errorf("the plugin krew installed ran: %q, %v", out, err)
	}
}

func checkArchive(t *testing.T, archive []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header keeps the build's time %v or a name %q", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mode %o, owner %d:%d, time %v; want 755, root, the epoch", h.Name, h.Mode, h.Uid, h.Gid, h.ModTime)
		}
	}
	if len(names) != 1 || names[0] != pluginBinary {
		t.Errorf("archive holds %v, want %s alone", names, pluginBinary)
	}
}

func TestVersionAndPlatformsNameTheFlag(t *testing.T) {
	for _, v := range []string{"devel", "1.2.3", "v1.2"} {
		err := run(t.Context(), options{version: v, out: t.TempDir(), platforms: []platform{{"linux", "amd64"}}}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-version") {
			t.Errorf("version %q: %v, want an error naming -version", v, err)
		}
	}
	for _, p := range []string{"", "linux", "linux/amd64/v7", "/amd64"} {
		if _, err := parsePlatforms(p); err == nil || !strings.Contains(err.Error(), "-platforms") {
			t.Errorf("platforms %q: %v, want an error naming -platforms", p, err)
		}
	}
}
