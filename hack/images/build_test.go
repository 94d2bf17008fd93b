package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImagesAreReproducibleAndRunAsNonRoot builds the test binary's images
// twice and reads them back from the layout: the same digests, one image
// per platform, the binary alone as entrypoint, a non-root user, no
// timestamp of the build.
func TestImagesAreReproducibleAndRunAsNonRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles")
	}
	platforms, err := parsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	// From the module root, where make runs it.
	t.Chdir(filepath.Join("..", ".."))
	var digests []string
	var dir string
	for i := range 2 {
		dir = filepath.Join(t.TempDir(), "layout")
		var out bytes.Buffer
		opts := options{version: "v0.0.1-test", commit: "abc", out: dir, components: []string{"hello"}, platforms: platforms, pkgDir: "hack/images/testdata"}
		if err := run(t.Context(), opts, &out); err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		digests = append(digests, strings.TrimSpace(out.String()))
	}
	if digests[0] != digests[1] || !strings.HasPrefix(digests[0], "hello:v0.0.1-test sha256:") {
		t.Fatalf("two builds of the same source: %q and %q", digests[0], digests[1])
	}

	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil || len(rm.Manifests) != 1 || rm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "hello:v0.0.1-test" {
		t.Fatalf("layout index: %+v, %v", rm, err)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 2 {
		t.Fatalf("image index: %+v, %v", im, err)
	}
	for i, want := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.Architecture != want {
			t.Errorf("manifest %d is for %+v, want linux/%s", i, d.Platform, want)
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, want)
	}
}

func checkImage(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != arch || cfg.OS != "linux" || cfg.Config.User != "65532:65532" ||
		len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/hello" || !cfg.Created.Time.Equal(epoch) {
		t.Errorf("%s image config: %+v (created %s)", arch, cfg.Config, cfg.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s image: %d layers, %v; want the binary's one", arch, len(layers), err)
	}
}

func TestParsePlatformsNamesTheFlag(t *testing.T) {
	for _, bad := range []string{"", "amd64", "windows/amd64", "linux/", "linux/arm/v7/x"} {
		if _, err := parsePlatforms(bad); err == nil || !strings.HasPrefix(err.Error(), "-platforms") {
			t.Errorf("parsePlatforms(%q) error %v, want one naming -platforms", bad, err)
		}
	}
}
