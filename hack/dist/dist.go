package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/hack/crossbuild"
)

// pluginBinary is ferryctl's name as a kubectl plugin.
const pluginBinary = "kubectl-ferry"

// defaultPlatforms are those ferryctl builds for (the virtual-kubelet
// process launcher it shares code with is Linux-only at run time).
var defaultPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

type platform struct{ os, arch string }

type options struct {
	version, commit, out, urlBase string
	platforms                     []platform
	// pkg is the package built (./cmd/ferryctl; tests use a small one).
	pkg string
}

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		goos, arch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("-platforms %q: %q is not os/arch", s, p)
		}
		out = append(out, platform{goos, arch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-platforms %q: names no platform", s)
	}
	return out, nil
}

// archiveName is the file name of one platform's archive.
func archiveName(version string, p platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginBinary, version, p.os, p.arch)
}

// run builds every archive, SHA256SUMS and ferry.yaml into opts.out.
func run(ctx context.Context, opts options, out io.Writer) error {
	if !semver.IsValid(opts.version) || semver.Canonical(opts.version) != strings.SplitN(opts.version, "+", 2)[0] {
		return fmt.Errorf("-version %q: krew wants a semantic version vMAJOR.MINOR.PATCH (make dist VERSION=v0.1.0)", opts.version)
	}
	if opts.pkg == "" {
		opts.pkg = "./cmd/ferryctl"
	}
	work, done, err := crossbuild.Prepare(opts.out)
	if err != nil {
		return err
	}
	defer done()
	if err := os.MkdirAll(opts.out, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", opts.out, err)
	}
	plugin := index.Plugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"},
		ObjectMeta: metav1.ObjectMeta{Name: "ferry"},
		Spec: index.PluginSpec{
			Version:          opts.version,
			Homepage:         "https://github.com/ferry-io/ferry",
			ShortDescription: "Peer clusters and offload namespaces to them with ferry",
			Description: "ferryctl as a kubectl plugin: install ferry into a cluster, peer two clusters\n" +
				"(one offloads pods to the other through a virtual node), discover peers by DNS-SD,\n" +
				"offload namespaces and show the peerings in both directions.\n",
		},
	}
	var sums strings.Builder
	for _, p := range opts.platforms {
		bin := filepath.Join(work, p.os+"-"+p.arch, pluginBinary)
		if err := crossbuild.Build(ctx, opts.pkg, p.os, p.arch, opts.version, opts.commit, bin); err != nil {
			return err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		archive, err := tarGz(pluginBinary, data)
		if err != nil {
			return err
		}
		name := archiveName(opts.version, p)
		if err := os.WriteFile(filepath.Join(opts.out, name), archive, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(archive)
		digest := hex.EncodeToString(sum[:])
		fmt.Fprintf(&sums, "%s  %s\n", digest, name)
		plugin.Spec.Platforms = append(plugin.Spec.Platforms, index.Platform{
			URI:      strings.TrimSuffix(opts.urlBase, "/") + "/" + name,
			Sha256:   digest,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": p.os, "arch": p.arch}},
			Files:    []index.FileOperation{{From: pluginBinary, To: "."}},
			Bin:      pluginBinary,
		})
		fmt.Fprintf(out, "%s %s\n", name, digest)
	}
	if err := os.WriteFile(filepath.Join(opts.out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return err
	}
	manifest, err := yaml.Marshal(plugin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(opts.out, "ferry.yaml"), manifest, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "ferry.yaml (krew manifest, archives at %s)\n", opts.urlBase)
	return nil
}

// epoch is every timestamp in the archives, so that they do not depend on
// when they were built.
var epoch = time.Unix(0, 0).UTC()

// tarGz is a gzipped tar holding one executable file, with nothing of this
// machine in it (owner root, epoch times, no gzip name or time).
func tarGz(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
