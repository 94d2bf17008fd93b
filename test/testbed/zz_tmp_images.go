package testbed

// TEMPORARY until branch i32-binaries lands (replaced at merge).

import (
	"os"
	"path/filepath"

	"archive/tar"
	"bytes"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"io"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

const (
	SandboxImage = "ferry.test/pause:tmp"
	AgnhostImage = "ferry.test/agnhost:tmp"
	CoreDNSImage = "ferry.test/coredns:tmp"
)

func NodePackages() error { return nil }

func tmpImage(ref, bin string, entry []string, out string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 01777})
	_ = tw.WriteHeader(&tar.Header{Name: filepath.Base(bin), Mode: 0o755, Size: int64(len(data))})
	_, _ = tw.Write(data)
	_ = tw.Close()
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = "amd64", "linux", v1.Config{Entrypoint: entry}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

func realNodeImages(extra []string) ([]string, error) {
	dir, _ := binaries.Dir()
	ag, _ := binaries.Path("agnhost")
	out := []string{filepath.Join(dir, "tmp-pause.tar"), filepath.Join(dir, "tmp-agnhost.tar")}
	if err := tmpImage(SandboxImage, ag, []string{"/agnhost", "pause"}, out[0]); err != nil {
		return nil, err
	}
	if err := tmpImage(AgnhostImage, ag, []string{"/agnhost"}, out[1]); err != nil {
		return nil, err
	}
	if cd, err := binaries.Path("coredns"); err == nil {
		o := filepath.Join(dir, "tmp-coredns.tar")
		if err := tmpImage(CoreDNSImage, cd, []string{"/coredns"}, o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return append(out, extra...), nil
}
