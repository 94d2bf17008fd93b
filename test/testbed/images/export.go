package images

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// refNameAnnotation names an image in an OCI layout's index.json; `make
// images` (hack/images) sets it to <component>:<version>.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// ExportComponents writes the Platform image of every component in the OCI
// image layout layoutDir, as `make images` writes it (bin/images: an image
// index per component, named <component>:<version> by the
// org.opencontainers.image.ref.name annotation), into one docker-archive at
// path, tagged <registry>/<component>:<tag>, for `ctr images import`. The
// file is written under a temporary name and renamed.
func ExportComponents(layoutDir, registry, tag, path string) (Tarball, error) {
	t := Tarball{Path: path}
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		return t, fmt.Errorf("OCI layout %s (run `make images IMAGE_PLATFORMS=linux/amd64`): %w", layoutDir, err)
	}
	index, err := lp.ImageIndex()
	if err != nil {
		return t, fmt.Errorf("OCI layout %s: %w", layoutDir, err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return t, fmt.Errorf("OCI layout %s: %w", layoutDir, err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, desc := range manifest.Manifests {
		refName := desc.Annotations[refNameAnnotation]
		component, _, _ := strings.Cut(refName, ":")
		if component == "" {
			return t, fmt.Errorf("OCI layout %s: manifest %s has no %s annotation naming its component", layoutDir, desc.Digest, refNameAnnotation)
		}
		img, err := platformImage(lp, desc)
		if err != nil {
			return t, fmt.Errorf("OCI layout %s: %s: %w", layoutDir, refName, err)
		}
		ref, err := name.NewTag(strings.TrimSuffix(registry, "/") + "/" + component + ":" + tag)
		if err != nil {
			return t, fmt.Errorf("image reference of %s with registry %q and tag %q: %w", component, registry, tag, err)
		}
		refs[ref] = img
		t.Refs = append(t.Refs, ref.String())
	}
	if len(refs) == 0 {
		return t, fmt.Errorf("OCI layout %s holds no image", layoutDir)
	}
	if err := writeAtomically(filepath.Clean(path), refs); err != nil {
		return t, err
	}
	return t, nil
}

// platformImage is the image for Platform that desc names: itself, or its
// entry for Platform when it is an index.
func platformImage(lp layout.Path, desc v1.Descriptor) (v1.Image, error) {
	switch {
	case desc.MediaType.IsIndex():
		idx, err := lp.ImageIndex()
		if err == nil {
			idx, err = idx.ImageIndex(desc.Digest)
		}
		if err != nil {
			return nil, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		var have []string
		for _, d := range m.Manifests {
			if d.Platform != nil && d.Platform.Satisfies(Platform) {
				return idx.Image(d.Digest)
			}
			if d.Platform != nil {
				have = append(have, d.Platform.String())
			}
		}
		return nil, fmt.Errorf("no %s image (has %s)", Platform.String(), strings.Join(have, ", "))
	case desc.MediaType.IsImage():
		img, err := lp.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if cfg.OS != Platform.OS || cfg.Architecture != Platform.Architecture {
			return nil, fmt.Errorf("image for %s/%s, want %s", cfg.OS, cfg.Architecture, Platform.String())
		}
		return img, nil
	default:
		return nil, fmt.Errorf("media type %s is neither an image nor an index", desc.MediaType)
	}
}
