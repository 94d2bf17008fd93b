// Package images builds the container images real test-bed nodes run, as
// docker-archive tarballs for `ctr -n k8s.io images import`, since no image
// can be pulled there: agnhost (Kubernetes' e2e test image) and the pod
// sandbox made of the same binary, and CoreDNS, each its static binary from
// the test bed's cache alone on an empty base; and ferry's own component
// images, exported from the OCI layout `make images` writes.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// AgnhostVersion is the version of agnhost in k8s.io/kubernetes
// binaries.KubernetesVersion (test/images/agnhost/VERSION, major.minor).
const AgnhostVersion = "2.63"

// References of the test-bed images. Each tag ends in -ferry: they are built
// here from the test bed's binaries, never pulled.
const (
	// AgnhostImage runs /agnhost: pass a subcommand as the container's
	// args (netexec, serve-hostname, pause, dns…).
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:" + AgnhostVersion + "-ferry"
	// PauseImage is the pod sandbox image (containerd's sandbox_image):
	// agnhost's pause subcommand, which waits for SIGINT or SIGTERM.
	PauseImage = "registry.k8s.io/pause:agnhost-" + AgnhostVersion + "-ferry"
	// CoreDNSImage runs /coredns; pass -conf <Corefile> as args.
	CoreDNSImage = "registry.k8s.io/coredns/coredns:" + binaries.CoreDNSVersion + "-ferry"
)

// Platform is the platform of every image this package writes.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Tarball is a docker-archive file and the image references it holds.
type Tarball struct {
	Path string
	Refs []string
}

// layoutVersion is part of every tarball's file name, so that a change to how
// the images are made is not hidden by tarballs an older one left in the
// cache. Bump it with any such change.
const layoutVersion = "1"

// nodeImage is one tarball of Ensure: images of one binary.
type nodeImage struct {
	file   string // in binaries.Dir()
	binary string // a program of binaries.Node
	// images: reference to entrypoint.
	images []image
}

type image struct {
	ref        string
	entrypoint []string
}

var nodeImages = []nodeImage{
	{file: "agnhost.image-v" + layoutVersion + ".tar", binary: binaries.Agnhost, images: []image{
		{AgnhostImage, []string{"/" + binaries.Agnhost}},
		{PauseImage, []string{"/" + binaries.Agnhost, "pause"}},
	}},
	{file: "coredns.image-v" + layoutVersion + ".tar", binary: binaries.CoreDNS, images: []image{
		{CoreDNSImage, []string{"/" + binaries.CoreDNS}},
	}},
}

// Ensure writes the tarballs of AgnhostImage and PauseImage (one file) and of
// CoreDNSImage into binaries.Dir(), from the binaries there, printing
// progress to out. A tarball is rebuilt only when missing or older than its
// binary; a missing binary is an error naming `make testbed`.
func Ensure(out io.Writer) ([]Tarball, error) {
	dir, err := binaries.Dir()
	if err != nil {
		return nil, err
	}
	return ensure(dir, out)
}

func ensure(dir string, out io.Writer) ([]Tarball, error) {
	var tarballs []Tarball
	for _, ni := range nodeImages {
		t, err := ni.ensure(dir, out)
		if err != nil {
			return nil, err
		}
		tarballs = append(tarballs, t)
	}
	return tarballs, nil
}

func (ni nodeImage) ensure(dir string, out io.Writer) (Tarball, error) {
	t := Tarball{Path: filepath.Join(dir, ni.file)}
	for _, im := range ni.images {
		t.Refs = append(t.Refs, im.ref)
	}
	bin := filepath.Join(dir, ni.binary)
	binInfo, err := os.Stat(bin)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return t, fmt.Errorf("image %s: binary %s is missing from %s: run `make testbed` first", t.Refs[0], ni.binary, dir)
		}
		return t, fmt.Errorf("image %s: %w", t.Refs[0], err)
	}
	if tarInfo, err := os.Stat(t.Path); err == nil && !tarInfo.ModTime().Before(binInfo.ModTime()) {
		return t, nil
	}
	start := time.Now()
	entrypoints := map[string][]string{}
	for _, im := range ni.images {
		entrypoints[im.ref] = im.entrypoint
	}
	if _, err := Write(t.Path, bin, entrypoints); err != nil {
		return t, err
	}
	fmt.Fprintf(out, "testbed: image %s written to %s in %s\n", strings.Join(t.Refs, ", "), t.Path, time.Since(start).Round(100*time.Millisecond))
	return t, nil
}

// Write writes a docker-archive at path holding, for each reference in
// entrypoints, a linux/amd64 image of the one static binary bin (at
// /<its file name>) run by that entrypoint, for Options.Images of real
// nodes. The archive appears whole or not at all.
func Write(path, bin string, entrypoints map[string][]string) (Tarball, error) {
	t := Tarball{Path: path}
	data, err := os.ReadFile(bin)
	if err != nil {
		return t, fmt.Errorf("image %s: %w", strings.Join(slices.Sorted(maps.Keys(entrypoints)), ", "), err)
	}
	base := filepath.Base(bin)
	layer, err := binaryLayer("/"+base, data)
	if err != nil {
		return t, fmt.Errorf("image of %s: layer: %w", bin, err)
	}
	refs := map[name.Reference]v1.Image{}
	for r, entrypoint := range entrypoints {
		img, err := imageOf(layer, entrypoint, base)
		if err != nil {
			return t, fmt.Errorf("image %s: %w", r, err)
		}
		ref, err := name.ParseReference(r)
		if err != nil {
			return t, fmt.Errorf("image reference %q: %w", r, err)
		}
		refs[ref] = img
		t.Refs = append(t.Refs, r)
	}
	sort.Strings(t.Refs)
	if err := writeAtomically(path, refs); err != nil {
		return t, err
	}
	return t, nil
}

// writeAtomically writes a docker-archive under a temporary name in the
// destination's folder and renames it into place, so that a reader never
// sees a partial tarball.
func writeAtomically(path string, refs map[name.Reference]v1.Image) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = tarball.MultiRefWrite(refs, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// epoch is every timestamp in the images, so that the same binary gives the
// same image.
var epoch = time.Unix(0, 0).UTC()

// binaryLayer is a layer holding one executable at path, mode 0755, and an
// empty /tmp (mode 1777), owned by root.
func binaryLayer(path string, data []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch, Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path, "/"), Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerTar := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
}

// imageOf is a linux/amd64 image of layer alone, running entrypoint as root.
func imageOf(layer v1.Layer, entrypoint []string, title string) (v1.Image, error) {
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "ferry test/testbed/images: " + title,
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = Platform.OS, Platform.Architecture
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": title}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: epoch})
}

// WriteBinaryImage writes to path a docker-archive of one image, ref, that
// holds the static linux/amd64 executable bin alone, as /<its name>, and
// runs it (with the container's args) as root: how programs a test builds
// reach real nodes (Options.Images of the test bed).
func WriteBinaryImage(ref, bin, path string) error {
	_, err := Write(path, bin, map[string][]string{ref: {"/" + filepath.Base(bin)}})
	return err
}
