package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// fakeBinaries writes stand-ins for the node binaries the images hold.
func fakeBinaries(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	contents := map[string][]byte{
		binaries.Agnhost: []byte("\x7fELF agnhost stand-in"),
		binaries.CoreDNS: []byte("\x7fELF coredns stand-in"),
	}
	for name, data := range contents {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return contents
}

// loadImage reads ref back from a docker-archive.
func loadImage(t *testing.T, path, ref string) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("load %s from %s: %v", ref, path, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return img, cfg
}

// files lists an image's single layer: path to header, and the content of
// regular files.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers, contents := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			contents[hdr.Name] = data
		}
	}
	return headers, contents
}

func TestEnsureWritesEveryImageRunnableAsItsEntrypoint(t *testing.T) {
	dir := t.TempDir()
	contents := fakeBinaries(t, dir)
	var out strings.Builder
	tarballs, err := ensure(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		binary     string
		entrypoint []string
	}{
		AgnhostImage: {binaries.Agnhost, []string{"/agnhost"}},
		PauseImage:   {binaries.Agnhost, []string{"/agnhost", "pause"}},
		CoreDNSImage: {binaries.CoreDNS, []string{"/coredns"}},
	}
	seen := 0
	for _, tb := range tarballs {
		if filepath.Dir(tb.Path) != dir {
			t.Errorf("tarball %s is not in the binaries folder %s", tb.Path, dir)
		}
		for _, ref := range tb.Refs {
			w, ok := want[ref]
			if !ok {
				t.Errorf("unexpected image %s in %s", ref, tb.Path)
				continue
			}
			seen++
			img, cfg := loadImage(t, tb.Path, ref)
			if cfg.OS != "linux" || cfg.Architecture != "amd64" {
				t.Errorf("%s: platform %s/%s, want linux/amd64", ref, cfg.OS, cfg.Architecture)
			}
			if !slices.Equal(cfg.Config.Entrypoint, w.entrypoint) {
				t.Errorf("%s: entrypoint %q, want %q", ref, cfg.Config.Entrypoint, w.entrypoint)
			}
			headers, data := files(t, img)
			bin := headers[w.binary]
			if bin == nil || bin.Typeflag != tar.TypeReg || bin.Mode != 0o755 || bin.Uid != 0 {
				t.Fatalf("%s: /%s is %+v, want a regular file, mode 0755, owned by root", ref, w.binary, bin)
			}
			if !bytes.Equal(data[w.binary], contents[w.binary]) {
				t.Errorf("%s: /%s holds %q, want the binary %q", ref, w.binary, data[w.binary], contents[w.binary])
			}
			if tmp := headers["tmp/"]; tmp == nil || tmp.Typeflag != tar.TypeDir || tmp.Mode != 0o1777 {
				t.Errorf("%s: /tmp is %+v, want a directory with mode 1777", ref, tmp)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("the tarballs hold %d of the %d images", seen, len(want))
	}
	if strings.Count(out.String(), "written") != len(tarballs) {
		t.Errorf("Ensure printed %q, want a line per tarball written", out.String())
	}
}

func TestEnsureRebuildsOnlyAMissingOrOlderTarball(t *testing.T) {
	dir := t.TempDir()
	fakeBinaries(t, dir)
	var out strings.Builder
	tarballs, err := ensure(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := ensure(dir, &out); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("Ensure with every tarball up to date printed %q, want nothing rewritten", out.String())
	}
	// A rebuilt agnhost (newer than its tarball) is packed again; CoreDNS
	// is not.
	newer := []byte("\x7fELF agnhost rebuilt")
	agnhost := filepath.Join(dir, binaries.Agnhost)
	if err := os.WriteFile(agnhost, newer, 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(agnhost, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := ensure(dir, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, AgnhostImage) || strings.Contains(got, CoreDNSImage) {
		t.Errorf("Ensure after agnhost was rebuilt printed %q, want agnhost's tarball alone rewritten", got)
	}
	img, _ := loadImage(t, tarballs[0].Path, PauseImage)
	if _, data := files(t, img); !bytes.Equal(data[binaries.Agnhost], newer) {
		t.Errorf("pause image holds %q after agnhost was rebuilt, want %q", data[binaries.Agnhost], newer)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestEnsureWithoutTheBinaryTellsHowToBuildIt(t *testing.T) {
	dir := t.TempDir()
	_, err := ensure(dir, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "make testbed") || !strings.Contains(err.Error(), binaries.Agnhost) {
		t.Fatalf("ensure without binaries: %v, want an error naming agnhost and `make testbed`", err)
	}
}

// AgnhostVersion, in the references, is the version of the agnhost the test
// bed builds.
func TestAgnhostVersionMatchesTheModule(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join("..", "..", "..")
	dir, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/kubernetes: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "test", "images", "agnhost", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(data))
	if version != AgnhostVersion && !strings.HasPrefix(version, AgnhostVersion+".") {
		t.Errorf("agnhost VERSION in k8s.io/kubernetes is %s, AgnhostVersion says %s", version, AgnhostVersion)
	}
}

func TestWriteBinaryImageHoldsTheBinaryAsItsEntrypoint(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	content := []byte("\x7fELF probe stand-in")
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	const ref = "ferry.test/probe:bench"
	path := filepath.Join(dir, "probe.tar")
	if err := WriteBinaryImage(ref, bin, path); err != nil {
		t.Fatal(err)
	}
	img, cfg := loadImage(t, path, ref)
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if want := []string{"/probe"}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, want)
	}
	headers, data := files(t, img)
	if h := headers["probe"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Fatalf("/probe is %+v, want a regular file, mode 0755", h)
	}
	if !bytes.Equal(data["probe"], content) {
		t.Errorf("/probe holds %q, want %q", data["probe"], content)
	}
	if err := WriteBinaryImage(ref, filepath.Join(dir, "missing"), path); err == nil || !strings.Contains(err.Error(), ref) {
		t.Errorf("a missing binary: error %v, want one naming %s", err, ref)
	}
}
