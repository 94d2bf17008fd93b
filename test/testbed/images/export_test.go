package images

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// platformImage is a random one-layer image for p.
func randomImage(t *testing.T, p v1.Platform) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = p.OS, p.Architecture
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// writeLayout writes an OCI layout as hack/images does: per component an
// image index of one image per platform, named <component>:<version>. It
// returns each component's image for Platform.
func writeLayout(t *testing.T, dir, version string, components map[string][]v1.Platform) map[string]v1.Image {
	t.Helper()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]v1.Image{}
	for component, platforms := range components {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range platforms {
			img := randomImage(t, p)
			if p.Satisfies(Platform) {
				want[component] = img
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: component + ":" + version})); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func TestExportComponentsTagsEachAmd64Image(t *testing.T) {
	dir := t.TempDir()
	amd64, arm64 := v1.Platform{OS: "linux", Architecture: "amd64"}, v1.Platform{OS: "linux", Architecture: "arm64"}
	want := writeLayout(t, filepath.Join(dir, "layout"), "v0.0.0-devel", map[string][]v1.Platform{
		"ferry-webhook": {arm64, amd64},
		"ferryctl":      {amd64, arm64},
	})
	out := filepath.Join(dir, "ferry-images.tar")
	tb, err := ExportComponents(filepath.Join(dir, "layout"), "ferry.test/", "e2e", out)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := []string{"ferry.test/ferry-webhook:e2e", "ferry.test/ferryctl:e2e"}
	got := slices.Sorted(slices.Values(tb.Refs))
	if tb.Path != out || !slices.Equal(got, wantRefs) {
		t.Fatalf("ExportComponents = %s %v, want %s %v", tb.Path, got, out, wantRefs)
	}
	for _, component := range []string{"ferry-webhook", "ferryctl"} {
		img, cfg := loadImage(t, out, "ferry.test/"+component+":e2e")
		if cfg.Architecture != "amd64" || cfg.OS != "linux" {
			t.Errorf("%s exported for %s/%s, want linux/amd64", component, cfg.OS, cfg.Architecture)
		}
		gotCfg, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		wantCfg, err := want[component].ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if gotCfg != wantCfg {
			t.Errorf("%s: exported config %s, want the amd64 image's %s", component, gotCfg, wantCfg)
		}
		gotLayers, _ := img.Layers()
		wantLayers, _ := want[component].Layers()
		gotDigest, _ := gotLayers[0].Digest()
		wantDigest, _ := wantLayers[0].Digest()
		if len(gotLayers) != 1 || gotDigest != wantDigest {
			t.Errorf("%s: exported layer %s, want %s", component, gotDigest, wantDigest)
		}
	}
}

func TestExportComponentsWithoutAmd64Fails(t *testing.T) {
	dir := t.TempDir()
	writeLayout(t, filepath.Join(dir, "layout"), "v1", map[string][]v1.Platform{
		"ferry-gateway": {{OS: "linux", Architecture: "arm64"}},
	})
	_, err := ExportComponents(filepath.Join(dir, "layout"), "ferry.test", "e2e", filepath.Join(dir, "out.tar"))
	if err == nil || !strings.Contains(err.Error(), "ferry-gateway") || !strings.Contains(err.Error(), "linux/amd64") {
		t.Fatalf("export of an arm64-only layout: %v, want an error naming the component and linux/amd64", err)
	}
	if _, err := ExportComponents(filepath.Join(dir, "none"), "ferry.test", "e2e", filepath.Join(dir, "out.tar")); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Fatalf("export of a missing layout: %v, want an error naming make images", err)
	}
}
