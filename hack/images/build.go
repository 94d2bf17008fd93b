package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ferry-io/ferry/hack/crossbuild"
)

// Components are ferry's binaries that ship as images (./cmd/<name>).
var Components = []string{"ferry-controller-manager", "ferry-virtual-kubelet", "ferry-webhook", "ferry-scheduler", "ferry-gateway", "ferryctl", "ferry-volume-mover"}

// nonRoot is the user and group the images run as (distroless' nonroot).
const nonRoot = "65532"

type options struct {
	version, commit string
	out, registry   string
	components      []string
	platforms       []v1.Platform
	// pkgDir is where ./<component> packages are found ("cmd"; tests use
	// testdata).
	pkgDir string
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range splitList(s) {
		os, arch, ok := strings.Cut(p, "/")
		if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("-platforms %q: %q is not linux/<arch>", s, p)
		}
		out = append(out, v1.Platform{OS: os, Architecture: arch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-platforms %q: names no platform", s)
	}
	return out, nil
}

// run builds every component for every platform, writes the layout and
// pushes when asked, printing each index's digest.
func run(ctx context.Context, opts options, out io.Writer) error {
	if opts.pkgDir == "" {
		opts.pkgDir = "cmd"
	}
	work, done, err := crossbuild.Prepare(opts.out)
	if err != nil {
		return err
	}
	defer done()
	lp, err := layout.Write(opts.out, empty.Index)
	if err != nil {
		return fmt.Errorf("-out %s: %w", opts.out, err)
	}
	for _, component := range opts.components {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range opts.platforms {
			bin := filepath.Join(work, p.Architecture, component)
			if err := buildBinary(ctx, opts, component, p, bin); err != nil {
				return err
			}
			img, err := imageOf(bin, component, opts.version, p)
			if err != nil {
				return err
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		}
		digest, err := idx.Digest()
		if err != nil {
			return fmt.Errorf("%s: %w", component, err)
		}
		ref := component + ":" + opts.version
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			return fmt.Errorf("write %s to %s: %w", component, opts.out, err)
		}
		fmt.Fprintf(out, "%s %s\n", ref, digest)
		if opts.registry != "" {
			tag, err := name.NewTag(strings.TrimSuffix(opts.registry, "/") + "/" + ref)
			if err != nil {
				return fmt.Errorf("-registry %q: %w", opts.registry, err)
			}
			if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				return fmt.Errorf("push %s: %w", tag, err)
			}
			fmt.Fprintf(out, "pushed %s@%s\n", tag, digest)
		}
	}
	return nil
}

// buildBinary cross-compiles a component as every release artefact is.
func buildBinary(ctx context.Context, opts options, component string, p v1.Platform, bin string) error {
	return crossbuild.Build(ctx, "./"+filepath.ToSlash(filepath.Join(opts.pkgDir, component)), p.OS, p.Architecture, opts.version, opts.commit, bin)
}

// epoch is every timestamp in the images, so that they do not depend on
// when they were built.
var epoch = time.Unix(0, 0).UTC()

// imageOf is an image holding only bin, at /<component>, run as nonRoot.
func imageOf(bin, component, version string, p v1.Platform) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layerTar, err := singleFileTar("/"+component, data)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", component, err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "ferry hack/images: " + component, Comment: version,
	}})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", component, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/" + component}
	cfg.Config.User = nonRoot + ":" + nonRoot
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   component,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/ferry-io/ferry",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", component, err)
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch})
}

// singleFileTar is a tar of one executable file at path (and /tmp, which a
// read-only root file system mounts over), with fixed owners and times.
func singleFileTar(path string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
